"""The maintenance commands and their argument types: ``lakefmt expire``, ``orphan-clean`` and ``consumers``."""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable
from typing import Any

import lakefmt
from lakefmt.cli.output import _beside, _emit, _iso, _ProgressBar, _report_json, _summary
from lakefmt.errors import ConsumerNotFoundError, InvalidConsumerIdError
from lakefmt.maintenance import list_consumers
from lakefmt.spec.consumer import check_consumer_id
from lakefmt.units import format_duration_ms, parse_duration

__all__ = [
    "CONSUMER_COLUMNS",
    "cmd_consumers",
    "cmd_expire",
    "cmd_orphan_clean",
    "consumer_id",
    "duration",
    "positive",
    "positive_duration",
    "snapshot_id",
]


def duration(text: str) -> datetime.timedelta:
    try:
        return parse_duration(text, "duration")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def positive_duration(text: str) -> datetime.timedelta:
    value = duration(text)
    if value <= datetime.timedelta(0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return value


def whole_number(text: str, least: int, *, what: str, too_small: Callable[[int], str]) -> int:
    """``text`` as an integer of at least ``least``, else :class:`argparse.ArgumentTypeError`: ``'x' is not
    <what>`` for text that is no whole number, ``too_small(value)`` for a smaller one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if value < least:
        raise argparse.ArgumentTypeError(too_small(value))
    return value


def snapshot_id(text: str) -> int:
    return whole_number(
        text,
        1,
        what="a snapshot id (a whole number)",
        too_small=lambda value: f"{value} is not a snapshot id: snapshot ids start at 1",
    )


def positive(text: str) -> int:
    return whole_number(text, 1, what="a whole number", too_small=lambda value: f"must be at least 1, got {value}")


def cmd_expire(table: lakefmt.Table, args: argparse.Namespace) -> None:
    report = table.expire_snapshots(
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        older_than=args.older_than,
        dry_run=args.dry_run,
        progress=_ProgressBar("expire"),
    )
    _emit(_report_json(report), True) if args.json else _summary(report)


def cmd_orphan_clean(table: lakefmt.Table, args: argparse.Namespace) -> None:
    report = table.remove_orphan_files(
        older_than=args.older_than, dry_run=args.dry_run, progress=_ProgressBar("orphan-clean")
    )
    _emit(_report_json(report), True) if args.json else _summary(report)


def consumer_id(text: str) -> str:
    try:
        return check_consumer_id(text)
    except InvalidConsumerIdError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def consumer_row(
    consumer: lakefmt.Consumer, expiration_ms: int | None, now_ms: int, latest: int, as_json: bool
) -> dict[str, Any]:
    expires = None if expiration_ms is None else consumer.time_millis + expiration_ms
    expired = consumer.expired(expiration_ms, now_ms)
    row: dict[str, Any] = {
        "consumer": consumer.consumer_id,
        "next_snapshot": consumer.next_snapshot,
        "unread": max(0, latest - consumer.next_snapshot + 1),
        "recorded": _iso(consumer.time_millis),
        "recorded_ms": consumer.time_millis,
        "expires": None if expires is None else _iso(expires),
        "expires_ms": expires,
        "expired": expired,
    }
    if as_json:
        row["error"] = None
    else:
        row["expired"] = "yes" if expired else ("no" if expires is not None else "never")
        row.pop("expires")
        row.pop("expires_ms")
    return row


CONSUMER_COLUMNS = ("consumer", "next_snapshot", "unread", "recorded", "recorded_ms", "expired")


def cmd_consumers(table: lakefmt.Table, args: argparse.Namespace) -> None:
    if args.delete is not None:
        delete_consumer(table, args)
        return
    listing = list_consumers(table.io)
    expiration_ms = table.table_schema().table_options.consumer_expiration_ms
    now_ms = int(time.time() * 1000)
    latest = table.latest_snapshot()
    latest_id = latest.id if latest else 0
    rows = [consumer_row(c, expiration_ms, now_ms, latest_id, args.json) for c in listing.consumers]
    for bad in listing.unreadable:  # listed, then reported as the error (exit 1) below
        if args.json:
            rows.append({"consumer": bad.consumer_id, "next_snapshot": None, "error": bad.error})
        else:
            rows.append({"consumer": bad.consumer_id, "next_snapshot": "unreadable"})
    rows.sort(key=lambda r: str(r["consumer"]))
    _emit(rows, args.json, () if args.json else CONSUMER_COLUMNS)
    if not args.json:
        if expiration_ms is None:
            print("consumer.expiration-time is not set: a consumer holds snapshots back until its record is deleted")
        else:
            print(
                f"consumer.expiration-time = {format_duration_ms(expiration_ms)}: a consumer whose record is older "
                "no longer holds snapshots back, and expire deletes its record"
            )
    listing.check()


def delete_consumer(table: lakefmt.Table, args: argparse.Namespace) -> None:
    listing = list_consumers(table.io)
    consumer = next((c for c in listing.consumers if c.consumer_id == args.delete), None)
    unreadable = next((u for u in listing.unreadable if u.consumer_id == args.delete), None)
    if consumer is None and unreadable is None:
        known = ", ".join(c.consumer_id for c in listing.consumers) or "none"
        raise ConsumerNotFoundError(f"{table.uri} has no consumer {args.delete!r} (its consumers: {known})")
    if not args.dry_run:
        table.delete_consumer(args.delete)
    if args.json:
        record = None
        if consumer is not None:
            record = _beside(consumer.to_dict(), "time_millis", "time", _iso(consumer.time_millis))
        error = unreadable.error if unreadable is not None else None
        out = {
            "operation": "delete-consumer",
            "dry_run": args.dry_run,
            "consumer": args.delete,
            "record": record,
            "error": error,
            "deleted": not args.dry_run,
        }
        _emit(out, True)
        return
    what = (
        f"next snapshot {consumer.next_snapshot}, recorded {_iso(consumer.time_millis)}"
        if consumer is not None
        else "unreadable record"
    )
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} consumer {args.delete!r} ({what}); it no longer holds snapshots back from expiration")
