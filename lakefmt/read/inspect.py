"""A table's metadata as Arrow tables (pyiceberg's ``table.inspect``, Paimon's ``T$snapshots``, ``T$files``,
``T$audit_log``): :class:`InspectTable`, reached as :attr:`lakefmt.Table.inspect`.

Every method returns a ``pyarrow.Table`` whose schema is fixed (the module's ``*_SCHEMA`` constants; columns may be
added at the end in later versions, never renamed or reordered). Column names follow pyiceberg's where the meaning
is the same (``snapshot_id``, ``parent_id``, ``file_path``, ``record_count``, ``file_size_in_bytes``, ...), and
Paimon's or Delta's where lakefmt's columns came from there. Spark's SQL functions ``lakefmt_snapshots``,
``lakefmt_history`` and ``lakefmt_files`` return the leading columns of :meth:`InspectTable.snapshots`,
:meth:`~InspectTable.history` and :meth:`~InspectTable.files`, computed here, so the two cannot disagree.

Partition values are shown as text (``map<string, string>``, a null value as null) so that one schema serves every
table. Timestamps are UTC, in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta import tags as tags_store
from lakefmt.meta.history import history as table_history
from lakefmt.meta.store import MetaStore
from lakefmt.read.changes import table_changes
from lakefmt.read.masks import Vector, vectors_of
from lakefmt.spec import Snapshot
from lakefmt.spec.layout import manifest_path
from lakefmt.spec.manifest import FileContent
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = [
    "DELETION_VECTORS_SCHEMA",
    "FILES_SCHEMA",
    "HISTORY_SCHEMA",
    "MANIFESTS_SCHEMA",
    "PARTITIONS_SCHEMA",
    "SNAPSHOTS_SCHEMA",
    "TAGS_SCHEMA",
    "InspectTable",
]

_TIME = pa.timestamp("ms", tz="UTC")
_TEXT_MAP = pa.map_(pa.string(), pa.string())

#: :meth:`InspectTable.snapshots`: one row per retained snapshot, oldest first (Paimon's ``T$snapshots``)
SNAPSHOTS_SCHEMA = pa.schema([
    ("snapshot_id", pa.int64()),
    ("schema_id", pa.int64()),
    ("commit_user", pa.string()),
    ("commit_identifier", pa.int64()),
    ("commit_kind", pa.string()),  # APPEND, OVERWRITE, COMPACT
    ("commit_time", _TIME),
    ("total_record_count", pa.int64()),
    ("delta_record_count", pa.int64()),
    ("total_file_count", pa.int64()),
    ("watermark", pa.int64()),
    ("properties", _TEXT_MAP),
    ("parent_id", pa.int64()),  # the snapshot before (ids are contiguous), null for the first
    ("operation", pa.string()),  # WRITE, OVERWRITE, DELETE, COMPACT, RESTORE, ... (Table.history's)
    ("base_manifest_list", pa.string()),
    ("delta_manifest_list", pa.string()),
    ("changelog_manifest_list", pa.string()),
    ("changelog_record_count", pa.int64()),
])

#: :meth:`InspectTable.history`: one row per retained snapshot, oldest first (Delta's ``DESCRIBE HISTORY``,
#: :meth:`lakefmt.Table.history`'s records)
HISTORY_SCHEMA = pa.schema([
    ("version", pa.int64()),
    ("timestamp", _TIME),
    ("operation", pa.string()),
    ("operation_parameters", _TEXT_MAP),
    ("parameters", _TEXT_MAP),  # the snapshot's other properties
    ("rows_added", pa.int64()),
    ("rows_removed", pa.int64()),
    ("files_added", pa.int64()),
    ("files_removed", pa.int64()),
    ("commit_user", pa.string()),
    ("commit_identifier", pa.int64()),
    ("commit_kind", pa.string()),
    ("schema_id", pa.int64()),
    ("total_rows", pa.int64()),
    ("total_files", pa.int64()),
])

#: :meth:`InspectTable.files` (data files) and :meth:`InspectTable.delete_files` (deletion-vector files): one row
#: per live file of a snapshot (Paimon's ``T$files``, pyiceberg's ``files()``/``delete_files()``)
FILES_SCHEMA = pa.schema([
    ("file_path", pa.string()),  # relative to the table root
    ("partition", _TEXT_MAP),
    ("record_count", pa.int64()),  # a data file's rows; the positions a deletion-vector file deletes
    ("deleted_record_count", pa.int64()),  # the rows of a data file its deletion vector deletes (null for a vector)
    ("file_size_in_bytes", pa.int64()),
    ("schema_id", pa.int64()),
    ("content", pa.int8()),  # 0 data, 1 deletion vectors (pyiceberg: 1 position deletes)
    ("file_format", pa.string()),  # PARQUET, PUFFIN
    ("bucket", pa.int32()),  # a format-version-3 table's bucket; null before version 3
    ("creation_time", _TIME),
])

#: :meth:`InspectTable.deletion_vectors`: one row per data file with deleted rows (Iceberg v3's vector fields)
DELETION_VECTORS_SCHEMA = pa.schema([
    ("referenced_data_file", pa.string()),
    ("file_path", pa.string()),  # the Puffin file holding the vector
    ("content_offset", pa.int64()),
    ("content_size_in_bytes", pa.int64()),
    ("record_count", pa.int64()),  # the rows it deletes (the vector's cardinality)
    ("partition", _TEXT_MAP),
    ("bucket", pa.int32()),
])

#: :meth:`InspectTable.partitions`: one row per partition with live data files (pyiceberg's ``partitions()``)
PARTITIONS_SCHEMA = pa.schema([
    ("partition", _TEXT_MAP),
    ("record_count", pa.int64()),  # rows in its data files, deleted ones included
    ("file_count", pa.int64()),
    ("total_data_file_size_in_bytes", pa.int64()),
    ("position_delete_record_count", pa.int64()),  # rows its deletion vectors delete
    ("position_delete_file_count", pa.int64()),
    ("bucket_count", pa.int64()),  # buckets with data files (1 for a table without buckets)
])

_BOUND = pa.struct([
    ("field", pa.string()),
    ("contains_null", pa.bool_()),
    ("lower_bound", pa.string()),
    ("upper_bound", pa.string()),
])

#: :meth:`InspectTable.manifests`: one row per manifest a snapshot reads (pyiceberg's ``manifests()``)
MANIFESTS_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("length", pa.int64()),
    ("manifest_list", pa.string()),  # base or delta
    ("schema_id", pa.int64()),
    ("added_files_count", pa.int64()),  # Iceberg's manifest-list field names
    ("deleted_files_count", pa.int64()),
    ("added_rows_count", pa.int64()),
    ("deleted_rows_count", pa.int64()),
    ("partition_summaries", pa.list_(_BOUND)),
])

#: :meth:`InspectTable.tags`: one row per tag, by name (Paimon's ``T$tags``, pyiceberg's ``refs()``)
TAGS_SCHEMA = pa.schema([
    ("name", pa.string()),
    ("snapshot_id", pa.int64()),
    ("schema_id", pa.int64()),
    ("commit_time", _TIME),  # its snapshot's
    ("record_count", pa.int64()),  # its snapshot's rows
    ("create_time", _TIME),
    ("max_reference_age_in_ms", pa.int64()),  # its retain time, null: until deleted
    ("expired", pa.bool_()),
])


class InspectTable:
    """The metadata tables of one table (:attr:`lakefmt.Table.inspect`); each call reads the table anew."""

    def __init__(self, io: FileIO, store: MetaStore, *, now_ms: Callable[[], int]) -> None:
        self._io = io
        self._store = store
        self._now_ms = now_ms

    def snapshots(self) -> pa.Table:
        """Every retained snapshot, oldest first: :data:`SNAPSHOTS_SCHEMA`."""
        rows = [
            {
                "snapshot_id": s.id, "schema_id": s.schema_id, "commit_user": s.commit_user,
                "commit_identifier": s.commit_identifier, "commit_kind": s.commit_kind.value,
                "commit_time": s.time_millis, "total_record_count": s.total_record_count,
                "delta_record_count": s.delta_record_count, "total_file_count": s.total_file_count,
                "watermark": s.watermark, "properties": _texts(s.properties),
                "parent_id": s.id - 1 if s.id > 1 else None, "operation": s.operation.value,
                "base_manifest_list": s.base_manifest_list, "delta_manifest_list": s.delta_manifest_list,
                "changelog_manifest_list": s.changelog_manifest_list,
                "changelog_record_count": s.changelog_record_count,
            }
            for s in self._store.retained_snapshots()
        ]  # fmt: skip
        return pa.Table.from_pylist(rows, SNAPSHOTS_SCHEMA)

    def history(self, limit: int | None = None) -> pa.Table:
        """What each retained snapshot did, oldest first (the latest ``limit`` only): :data:`HISTORY_SCHEMA`, the
        records of :meth:`lakefmt.Table.history` with each snapshot's other properties as ``parameters``."""
        rows = []
        for rec in reversed(table_history(self._store, limit)):
            props = self._store.snapshot(rec["version"]).properties
            params = {k: str(v) for k, v in props.items() if k != "lakefmt.operation"}
            rows.append({**rec, "operation_parameters": _texts(rec["operation_parameters"]), "parameters": params})
        return pa.Table.from_pylist(rows, HISTORY_SCHEMA)

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live data files of the latest snapshot (or ``snapshot_id``), in manifest order: :data:`FILES_SCHEMA`
        (``deleted_record_count`` 0 for a file without a deletion vector)."""
        live = self._live(snapshot_id)
        data = ents.data_files(live)
        vectors = vectors_of(self._io, live) if ents.CONTENT in live.column_names else {}
        return _files(data, FileContent.DATA, vectors)

    def delete_files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live deletion-vector files (Puffin) of the latest snapshot (or ``snapshot_id``): :data:`FILES_SCHEMA`,
        ``content`` 1, ``record_count`` the positions the file's vectors delete. Empty before format version 3."""
        return _files(ents.vector_files(self._live(snapshot_id)), FileContent.DELETION_VECTORS, {})

    def deletion_vectors(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per live data file whose deletion vector deletes rows: where its vector is and how many rows it
        deletes (:data:`DELETION_VECTORS_SCHEMA`)."""
        live = self._live(snapshot_id)
        data = ents.data_files(live)
        vectors: dict[str, Vector] = vectors_of(self._io, live) if ents.CONTENT in live.column_names else {}
        rows = []
        for path, part, bucket in zip(ents.paths(data), _partitions(data), _column(data, ents.BUCKET), strict=True):
            v = vectors.get(path)
            if v is not None:
                rows.append({
                    "referenced_data_file": path, "file_path": v.file, "content_offset": v.offset,
                    "content_size_in_bytes": v.length, "record_count": v.cardinality, "partition": part,
                    "bucket": bucket,
                })  # fmt: skip
        return pa.Table.from_pylist(rows, DELETION_VECTORS_SCHEMA)

    def partitions(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per partition with live data files, in the order :meth:`files` meets them:
        :data:`PARTITIONS_SCHEMA`."""
        files = self.files(snapshot_id)
        vector_files = self.delete_files(snapshot_id)
        out: dict[tuple[tuple[str, str | None], ...], dict[str, Any]] = {}
        buckets: dict[tuple[tuple[str, str | None], ...], set[int | None]] = {}
        for f in files.to_pylist():
            key = tuple(f["partition"])
            row = out.setdefault(key, _partition_row(f["partition"]))
            row["record_count"] += f["record_count"]
            row["file_count"] += 1
            row["total_data_file_size_in_bytes"] += f["file_size_in_bytes"]
            row["position_delete_record_count"] += f["deleted_record_count"]
            buckets.setdefault(key, set()).add(f["bucket"])
        for f in vector_files.to_pylist():
            key = tuple(f["partition"])
            if key in out:
                out[key]["position_delete_file_count"] += 1
        for key, row in out.items():
            row["bucket_count"] = len(buckets[key])
        return pa.Table.from_pylist(list(out.values()), PARTITIONS_SCHEMA)

    def manifests(self, snapshot_id: int | None = None) -> pa.Table:
        """The manifests the latest snapshot (or ``snapshot_id``) reads, its base list's then its delta list's:
        :data:`MANIFESTS_SCHEMA`. ``partition_summaries``: each partition key's range over the manifest's entries."""
        snap = self._snapshot(snapshot_id)
        rows = []
        if snap is not None:
            for which, name in (("base", snap.base_manifest_list), ("delta", snap.delta_manifest_list)):
                for m in self._store.manifest_list(name):
                    summaries = [
                        {"field": k, "contains_null": s.null_count > 0, "lower_bound": _text(s.min),
                         "upper_bound": _text(s.max)}
                        for k, s in m.partition_stats.items()
                    ]  # fmt: skip
                    rows.append({
                        "path": manifest_path(m.file_name), "length": m.file_size, "manifest_list": which,
                        "schema_id": m.schema_id, "added_files_count": m.num_added_files,
                        "deleted_files_count": m.num_deleted_files, "added_rows_count": m.num_added_rows,
                        "deleted_rows_count": m.num_deleted_rows, "partition_summaries": summaries,
                    })  # fmt: skip
        return pa.Table.from_pylist(rows, MANIFESTS_SCHEMA)

    def tags(self) -> pa.Table:
        """Every tag, by name (expired ones too, ``expired`` true): :data:`TAGS_SCHEMA`."""
        now = self._now_ms()
        rows = [
            {
                "name": t.name, "snapshot_id": t.snapshot.id, "schema_id": t.snapshot.schema_id,
                "commit_time": t.snapshot.time_millis, "record_count": t.snapshot.total_record_count,
                "create_time": t.time_millis, "max_reference_age_in_ms": t.retain_millis, "expired": t.expired(now),
            }
            for t in tags_store.list_tags(self._io).check().tags
        ]  # fmt: skip
        return pa.Table.from_pylist(rows, TAGS_SCHEMA)

    def audit_log(self, from_snapshot: int | None = None, to_snapshot: int | None = None, **options: Any) -> pa.Table:
        """Paimon's ``T$audit_log`` over the change feed: every row snapshots ``from_snapshot+1 .. to_snapshot``
        (default: the whole retained history, to the latest: from the first commit while it is retained, else
        after the earliest retained snapshot, the first whose changes can still be read) inserted, updated and
        deleted, with its row kind ``_row_kind`` (``+I``, ``-U``, ``+U``, ``-D``), ``_commit_snapshot`` and
        ``_commit_timestamp``: exactly :meth:`lakefmt.Table.changes` with ``row_kinds=True`` (``options``:
        ``columns``, ``filter``, ...)."""
        if from_snapshot is None:
            ids = self._store.snapshot_ids()
            from_snapshot = 0 if not ids or ids[0] <= 1 else ids[0]
        return table_changes(
            self._io, self._store, from_snapshot, to_snapshot, row_kinds=True, now_ms=self._now_ms(), **options
        )

    def _snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        if snapshot_id is None:
            return self._store.latest_snapshot()
        return self._store.snapshot(check_snapshot_id(snapshot_id))

    def _live(self, snapshot_id: int | None) -> pa.Table:
        snap = self._snapshot(snapshot_id)
        if snap is None:
            return ents.empty_entries_for(self._store.latest_schema())
        return ents.live_entries(self._store, snap)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _texts(values: Mapping[str, Any]) -> dict[str, str | None]:
    return {k: _text(v) for k, v in values.items()}


def _column(entries: pa.Table, name: str) -> list[Any]:
    return entries.column(name).to_pylist() if name in entries.column_names else [None] * entries.num_rows


def _partitions(entries: pa.Table) -> list[list[tuple[str, str | None]]]:
    """Each entry's partition values as text, in key order (a map's value: a list of pairs)."""
    return [list(_texts(p or {}).items()) for p in _column(entries, ents.PARTITION)]


def _files(entries: pa.Table, content: FileContent, vectors: Mapping[str, Vector]) -> pa.Table:
    is_data = content == FileContent.DATA
    columns: Sequence[list[Any]] = (
        ents.paths(entries), _partitions(entries), _column(entries, ents.ROW_COUNT),
        _column(entries, ents.FILE_SIZE), _column(entries, ents.SCHEMA_ID), _column(entries, ents.BUCKET),
        _column(entries, "creation_time_ms"),
    )  # fmt: skip
    rows = []
    for path, part, count, size, schema_id, bucket, created in zip(*columns, strict=True):
        vector = vectors.get(path)
        rows.append({
            "file_path": path, "partition": part, "record_count": count,
            "deleted_record_count": (vector.cardinality if vector else 0) if is_data else None,
            "file_size_in_bytes": size, "schema_id": schema_id, "content": int(content),
            "file_format": "PARQUET" if is_data else "PUFFIN", "bucket": bucket, "creation_time": created,
        })  # fmt: skip
    return pa.Table.from_pylist(rows, FILES_SCHEMA)


def _partition_row(partition: list[tuple[str, str | None]]) -> dict[str, Any]:
    return {
        "partition": partition, "record_count": 0, "file_count": 0, "total_data_file_size_in_bytes": 0,
        "position_delete_record_count": 0, "position_delete_file_count": 0, "bucket_count": 0,
    }  # fmt: skip
