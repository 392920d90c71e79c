"""The ``lakefmt changes`` command: the change data feed of a range of snapshots (:mod:`lakefmt.read.changes`),
one line per changed row, or JSON objects with the row's columns and the change columns."""

from __future__ import annotations

import argparse
import time
from typing import Any

import pyarrow as pa

import lakefmt
from lakefmt.cli.maintain import whole_number
from lakefmt.cli.output import _emit, _iso, _when
from lakefmt.read.changes import CHANGE_TYPE, COMMIT_SNAPSHOT, COMMIT_TIMESTAMP, ROW_KIND, change_batches, change_range

__all__ = ["cmd_changes", "start_id"]


def start_id(text: str) -> int:
    """``--from`` and ``--starting-version``: a snapshot id, or 0 (from the first commit, from the table's creation)."""
    return whole_number(
        text,
        0,
        what="a snapshot id (a whole number)",
        too_small=lambda value: f"{value} is not a snapshot id: 0 (from the first commit) or more",
    )


def _rows(table: lakefmt.Table, args: argparse.Namespace) -> pa.Table:
    """The change rows of the range, at most ``--limit`` of them (later snapshots are not read then)."""
    store = table.rewrite_target().store
    now_ms = int(time.time() * 1000)
    start, end = change_range(
        table.io, store, from_snapshot=args.start, to_snapshot=args.to, starting_version=args.starting_version,
        ending_version=args.ending_version, now_ms=now_ms,
    )  # fmt: skip
    parts: list[pa.Table] = []
    count = 0
    for part in change_batches(table.io, store, start, end, row_kinds=args.row_kinds):
        parts.append(part)
        count += part.num_rows
        if args.limit is not None and count >= args.limit:
            break
    if not parts:
        return pa.table({})
    out = pa.concat_tables(parts)
    return out if args.limit is None else out.slice(0, args.limit)


def cmd_changes(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows = _rows(table, args)
    kind = ROW_KIND if args.row_kinds else CHANGE_TYPE
    if rows.num_columns == 0:
        _emit([], args.json)
        return
    data = [c for c in rows.column_names if c not in (kind, COMMIT_SNAPSHOT, COMMIT_TIMESTAMP)]
    millis = rows.column(COMMIT_TIMESTAMP).cast(pa.int64()).to_pylist()
    out: list[dict[str, Any]] = []
    for row, ms in zip(rows.to_pylist(), millis, strict=True):
        if args.json:  # the row's columns as they are, then the change columns (the time in ISO-8601 and millis)
            row[COMMIT_TIMESTAMP] = _iso(ms)
            row["_commit_timestamp_millis"] = ms
            out.append(row)
            continue
        text = {"snapshot": row[COMMIT_SNAPSHOT], "committed": _when(ms), "change": row[kind]}
        text.update({c: "null" if row[c] is None else row[c] for c in data})
        out.append(text)
    _emit(out, args.json, ["snapshot", "committed", "change", *data])
