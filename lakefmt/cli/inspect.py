"""The commands that look at a table: ``lakefmt snapshots``, ``describe`` and ``files``."""

from __future__ import annotations

import argparse
from typing import Any

import lakefmt
from lakefmt.cli.output import _beside, _emit, _iso, _when
from lakefmt.spec.partition import describe_partition

__all__ = ["cmd_describe", "cmd_files", "cmd_snapshots"]


def cmd_snapshots(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows = []
    for s in table.snapshots():
        d = _beside(s.to_dict(), "time_millis", "time", _iso(s.time_millis))
        if not args.json:
            d = {
                "id": s.id,
                "kind": s.commit_kind.value,
                "committed": _when(s.time_millis),
                "commit_user": s.commit_user,
                "identifier": s.commit_identifier,
                "delta_rows": f"{s.delta_record_count:,}",
                "total_rows": f"{s.total_record_count:,}",
                "files": f"{s.total_file_count:,}",
            }
        rows.append(d)
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
    if args.json:  # the columns in order as a list too (a JSON object's order is not every reader's)
        fields = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in ts.arrow_schema]
        _emit(_beside(info, "columns", "fields", fields), True)
        return
    for key in ("latest_commit_time", "latest_commit_millis"):  # latest_commit says it for people
        info.pop(key)
    columns = info.pop("columns")
    info["columns"] = ", ".join(f"{k} {v}" for k, v in columns.items())
    info["live_bytes"] = f"{info['live_bytes']:,}"
    _emit(info, False)


def cmd_files(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    for f in table.files(snapshot_id=args.snapshot):
        part: Any = f.partition if args.json else describe_partition(f.partition, ",")
        rows.append({"path": f.path, "size": f.file_size, "rows": f.row_count, "partition": part})
    _emit(rows, args.json, ["path", "size", "rows", "partition"])
