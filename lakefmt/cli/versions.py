"""The ``lakefmt tag create|list|delete`` and ``lakefmt restore`` commands: named versions, and bringing one
back as a new snapshot."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import lakefmt
from lakefmt.cli.output import _beside, _emit, _iso, _when
from lakefmt.errors import InvalidTagNameError, InvalidTimestampError, LakefmtError
from lakefmt.meta.tags import read_tag
from lakefmt.read.scan import parse_as_of
from lakefmt.spec.tag import check_tag_name
from lakefmt.units import format_duration_ms

__all__ = ["cmd_restore", "cmd_tag_create", "cmd_tag_delete", "cmd_tag_list", "parse_instant", "parse_tag_name"]


def parse_tag_name(text: str) -> str:
    try:
        return check_tag_name(text)
    except InvalidTagNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_instant(text: str) -> int:
    """``--as-of``: ISO-8601 (``2026-11-30T23:59:59Z``; without an offset, UTC) or epoch milliseconds."""
    try:
        return parse_as_of(text)
    except (InvalidTimestampError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a point in time: use ISO-8601 (2026-11-30T23:59:59Z) or epoch milliseconds"
        ) from None


def _tag_json(tag: lakefmt.Tag, now_ms: int) -> dict[str, Any]:
    row = tag.to_dict()
    row = _beside(row, "snapshot_time_millis", "snapshot_time", _iso(tag.snapshot.time_millis))
    row = _beside(row, "created_millis", "created", _iso(tag.time_millis))
    expires = tag.expires_millis
    row = _beside(row, "expires_millis", "expires", None if expires is None else _iso(expires))
    row["expired"] = tag.expired(now_ms)
    return row


def _tag_text(tag: lakefmt.Tag, now_ms: int) -> dict[str, Any]:
    expires = tag.expires_millis
    return {
        "tag": tag.name,
        "snapshot": tag.snapshot_id,
        "committed": _when(tag.snapshot.time_millis),
        "created": _when(tag.time_millis),
        "retain": "forever" if tag.retain_millis is None else format_duration_ms(tag.retain_millis),
        "expires": "never" if expires is None else ("expired" if tag.expired(now_ms) else _when(expires)),
        "rows": f"{tag.snapshot.total_record_count:,}",
    }


def cmd_tag_list(table: lakefmt.Table, args: argparse.Namespace) -> None:
    now_ms = int(time.time() * 1000)
    tags = table.tags()
    if args.json:
        _emit([_tag_json(t, now_ms) for t in tags], True)
        return
    _emit([_tag_text(t, now_ms) for t in tags], False)


def cmd_tag_create(table: lakefmt.Table, args: argparse.Namespace) -> None:
    tag = table.create_tag(args.name, args.snapshot, retain=args.retain)
    if args.json:
        _emit(_tag_json(tag, tag.time_millis), True)
        return
    kept = "until it is deleted" if tag.expires_millis is None else f"until {_when(tag.expires_millis)}"
    print(
        f"created tag {tag.name!r} for snapshot {tag.snapshot_id} (committed {_when(tag.snapshot.time_millis)}, "
        f"{tag.snapshot.total_record_count:,} rows); expire and orphan-clean keep its files {kept}"
    )


def cmd_tag_delete(table: lakefmt.Table, args: argparse.Namespace) -> None:
    # this tag alone, to show its snapshot: deleting is the way out of an unreadable tag file (this one or another)
    tag = None
    with contextlib.suppress(LakefmtError):
        tag = read_tag(table.io, args.name)
    table.delete_tag(args.name)  # TagNotFoundError when there is none
    if args.json:
        _emit({"operation": "delete-tag", "tag": args.name, "snapshot_id": tag.snapshot_id if tag else None}, True)
        return
    of = f" (snapshot {tag.snapshot_id})" if tag is not None else ""
    print(f"deleted tag {args.name!r}{of}; the files only it kept go at the next orphan-clean")


def _files_text(files: list[dict[str, Any]]) -> list[str]:
    return [f"  {f['path']}  {f['rows']:,} row{'' if f['rows'] == 1 else 's'}" for f in files]


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"


def cmd_restore(table: lakefmt.Table, args: argparse.Namespace) -> None:
    target = {"snapshot_id": args.snapshot, "tag": args.tag, "as_of": args.as_of}
    plan = table.plan_restore(**target)
    snap = None if args.dry_run or plan.noop else table.apply_restore_plan(plan)  # what is shown, or a conflict
    summary = plan.to_dict()
    if args.json:
        out: dict[str, Any] = {"operation": "restore", "dry_run": args.dry_run, **summary}
        out = _beside(out, "target_snapshot", "target_time_millis", plan.target.time_millis)
        out = _beside(out, "target_time_millis", "target_time", _iso(plan.target.time_millis))
        out["snapshot"] = snap.id if snap is not None else None
        _emit(out, True)
        return
    name = f"snapshot {plan.target.id}" + (f" (tag {plan.tag!r})" if plan.tag else "")
    if plan.noop:
        print(f"the table already holds exactly the files of {name}: nothing to restore")
        return
    removed, added = summary["files_removed"], summary["files_added"]
    before, after = _n(summary["rows_before"], "row"), _n(summary["rows_after"], "row")
    if args.dry_run:
        head = f"would restore {name}, committed {_when(plan.target.time_millis)}, as a new snapshot"
        print(f"{head}: {before} now, {after} after")
        verbs = ("would remove", "would add again")
    else:
        assert snap is not None
        head = f"restored {name}, committed {_when(plan.target.time_millis)}, as snapshot {snap.id}"
        print(f"{head}: {before} before, {after} now")
        verbs = ("removed", "added again")
    for verb, files, rows in ((verbs[0], removed, summary["rows_removed"]), (verbs[1], added, summary["rows_added"])):
        print(f"{verb} {_n(len(files), 'file')} ({_n(rows, 'row')})" + (":" if files else ""))
        for line in _files_text(files):
            print(line)
