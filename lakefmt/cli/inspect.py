"""The commands that look at a table: ``lakefmt snapshots``, ``describe`` and ``files``.

On a format-version-3 table (a key table, or one whose deletes mark deletion vectors) ``describe`` adds the primary
key, the number of buckets and the live deletion vectors, and ``files`` lists every live file of the snapshot, data
files and deletion-vector files, each with its content and bucket (docs/format.md, "Key tables")."""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt
from lakefmt.cli.output import _beside, _emit, _iso, _when
from lakefmt.meta import entries as ents
from lakefmt.read.masks import vectors_of
from lakefmt.spec import Snapshot
from lakefmt.spec.manifest import FileContent
from lakefmt.spec.partition import describe_partition

__all__ = ["cmd_describe", "cmd_files", "cmd_history", "cmd_snapshots"]


def cmd_snapshots(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows = []
    for s in table.snapshots():
        d = _beside(s.to_dict(), "time_millis", "time", _iso(s.time_millis))
        if not args.json:
            d = {
                "id": s.id,
                "kind": s.commit_kind.value,
                "operation": s.operation.value,
                "committed": _when(s.time_millis),
                "commit_user": s.commit_user,
                "identifier": s.commit_identifier,
                "delta_rows": f"{s.delta_record_count:,}",
                "total_rows": f"{s.total_record_count:,}",
                "files": f"{s.total_file_count:,}",
            }
        rows.append(d)
    _emit(rows, args.json)


def cmd_history(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows = []
    for h in table.history(limit=args.limit):
        if args.json:  # the record as Table.history() gives it, the time also in ISO-8601
            rows.append(_beside(h, "timestamp", "time", _iso(h["timestamp"])))
            continue
        params = h["operation_parameters"]
        rows.append({
            "version": h["version"],
            "committed": _when(h["timestamp"]),
            "operation": h["operation"],
            "parameters": ", ".join(f"{k}={v}" for k, v in params.items()),
            "rows_added": f"{h['rows_added']:,}",
            "rows_removed": f"{h['rows_removed']:,}",
            "files_added": h["files_added"],
            "files_removed": h["files_removed"],
            "commit_user": h["commit_user"],
            "identifier": h["commit_identifier"],
        })
    _emit(rows, args.json)


def cmd_describe(table: lakefmt.Table, args: argparse.Namespace) -> None:
    ts = table.table_schema()
    latest = table.latest_snapshot()
    files = table.files() if latest else []
    info: dict[str, Any] = {
        "uri": table.uri,
        "format_version": ts.format_version,
        "schema_id": ts.id,
        "columns": {f.name: str(f.type) + ("" if f.nullable else " not null") for f in ts.arrow_schema},
        "partition_keys": list(ts.partition_keys),
        "primary_key": list(ts.primary_keys),
        "buckets": ts.table_options.bucket if ts.has_primary_key else None,
        "options": dict(ts.options),
        "latest_snapshot": latest.id if latest else None,
        "latest_commit": _when(latest.time_millis) if latest else None,
        "latest_commit_time": _iso(latest.time_millis) if latest else None,
        "latest_commit_millis": latest.time_millis if latest else None,
        "rows": f"{latest.total_record_count if latest else 0:,}"
        if not args.json
        else (latest.total_record_count if latest else 0),
        "live_files": len(files),
        "live_bytes": sum(f.file_size for f in files),
    }
    if ts.format_version >= 3:  # what the deletion vectors hold
        vectors = ents.vector_files(_live(table, latest))
        info["deletion_vector_files"] = vectors.num_rows
        info["deleted_rows"] = int(pc.sum(vectors.column(ents.ROW_COUNT)).as_py() or 0)
    if args.json:  # the columns in order as a list too (a JSON object's order is not every reader's)
        fields = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in ts.arrow_schema]
        _emit(_beside(info, "columns", "fields", fields), True)
        return
    for key in ("latest_commit_time", "latest_commit_millis"):  # latest_commit says it for people
        info.pop(key)
    if ts.has_primary_key:
        info["primary_key"] = ", ".join(ts.primary_keys)
    else:  # nothing to say about keys and buckets for people
        info.pop("primary_key")
        info.pop("buckets")
    columns = info.pop("columns")
    info["columns"] = ", ".join(f"{k} {v}" for k, v in columns.items())
    info["live_bytes"] = f"{info['live_bytes']:,}"
    _emit(info, False)


def _live(table: lakefmt.Table, snap: Snapshot | None) -> pa.Table:
    """Every live entry of ``snap`` (data and deletion-vector files); none for a table without snapshots."""
    store = table.rewrite_target().store
    if snap is None:
        return ents.empty_entries_for(store.latest_schema())
    return ents.live_entries(store, snap)


#: a manifest entry's content, as ``lakefmt files`` names it (JSON, text)
_CONTENT = {
    int(FileContent.DATA): ("data", "data"),
    int(FileContent.DELETION_VECTORS): ("deletion_vectors", "deletion vectors"),
}


def _keyed_files(table: lakefmt.Table, snap: Snapshot | None, as_json: bool) -> list[dict[str, Any]]:
    """``lakefmt files`` of a version-3 snapshot: each live file with its content and bucket, grouped by partition
    and bucket. ``rows`` is the entry's row count: a data file's rows, or the positions a deletion-vector file
    deletes; ``deleted`` is how many of a data file's rows its deletion vector deletes."""
    live = _live(table, snap)
    vectors = vectors_of(table.io, live)
    n = live.num_rows
    parts = live.column(ents.PARTITION).to_pylist() if ents.PARTITION in live.column_names else [{}] * n
    rows: list[tuple[tuple[str, int, int], dict[str, Any]]] = []
    columns = zip(
        ents.paths(live),
        live.column(ents.CONTENT).to_pylist() if ents.CONTENT in live.column_names else [0] * n,
        live.column(ents.BUCKET).to_pylist() if ents.BUCKET in live.column_names else [0] * n,
        live.column("file_size").to_pylist(),
        live.column(ents.ROW_COUNT).to_pylist(),
        parts,
        strict=True,
    )
    for path, content, bucket, size, count, partition in columns:
        described = describe_partition(partition or {}, ",")
        is_data = content == int(FileContent.DATA)
        vector = vectors.get(path) if is_data else None
        deleted = (vector.cardinality if vector else 0) if is_data else None
        named = _CONTENT.get(content, (str(content), str(content)))
        row: dict[str, Any] = {"path": path, "content": named[0] if as_json else named[1], "bucket": bucket}
        row.update({"size": size, "rows": count})
        if as_json:
            row.update({"deleted_rows": deleted, "deletion_vector": vector.file if vector else None})
            row["partition"] = partition or {}
        else:
            row.update({"deleted": "" if deleted is None else deleted, "partition": described})
        rows.append(((described, bucket, content), row))
    rows.sort(key=lambda r: r[0])  # stable: manifest order within a partition and bucket
    return [r for _, r in rows]


def cmd_files(table: lakefmt.Table, args: argparse.Namespace) -> None:
    if table.table_schema().format_version >= 3:
        snap = table.snapshot(args.snapshot) if args.snapshot is not None else table.latest_snapshot()
        columns = ["path", "content", "bucket", "size", "rows", "deleted", "partition"]
        _emit(_keyed_files(table, snap, args.json), args.json, columns)
        return
    rows: list[dict[str, Any]] = []
    for f in table.files(snapshot_id=args.snapshot):
        part: Any = f.partition if args.json else describe_partition(f.partition, ",")
        rows.append({"path": f.path, "size": f.file_size, "rows": f.row_count, "partition": part})
    _emit(rows, args.json, ["path", "size", "rows", "partition"])
