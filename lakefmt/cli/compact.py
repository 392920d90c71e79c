"""The ``lakefmt compact`` command: merge a table's small data files (one COMPACT snapshot), with a progress bar
on a terminal, a summary or ``--json``."""

from __future__ import annotations

import argparse
from typing import Any

import lakefmt
from lakefmt.cli.output import _emit, _human, _ProgressBar
from lakefmt.rewrite.compact.plan import LARGE_ENOUGH
from lakefmt.rewrite.compact.types import CompactionReport
from lakefmt.spec.partition import describe_partition, parse_partition_value
from lakefmt.units import parse_size

__all__ = ["cmd_compact", "parse_partition", "parse_sort_by", "parse_target_size"]


def parse_partition(text: str) -> dict[str, str | None]:
    """``dt=2026-11-01[,region=eu]`` -> one partition's values (as text; the table casts them). A null value is
    written as its folder names it, ``__null__``, or as Hive and Spark name it, ``__HIVE_DEFAULT_PARTITION__``;
    a text value spelled exactly so is written with its first ``_`` escaped, ``%5F_null__``, as its folder and
    the listings spell it; ``dt=`` is the empty text."""
    out: dict[str, str | None] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{text!r} is not a partition: write key=value[,key=value]")
        if key in out:
            raise argparse.ArgumentTypeError(f"{text!r} names {key!r} twice")
        out[key] = parse_partition_value(value)
    return out


def parse_target_size(text: str) -> int:
    """``128MiB``, ``512kb``, ``1g`` or bytes; at least 1 byte."""
    try:
        size = parse_size(text, "--target-file-size")
    except ValueError:  # (argparse names the option already)
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (examples: 128MiB, 512kb, 1g, 1000000)") from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return size


def parse_sort_by(text: str) -> list[str]:
    """``a,b`` -> ``["a", "b"]``."""
    columns = [c.strip() for c in text.split(",")]
    if not all(columns):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of columns: write c1,c2")
    return columns


def cmd_compact(table: lakefmt.Table, args: argparse.Namespace) -> None:
    report = table.compact(
        args.partition or None,
        target_file_size=args.target_file_size,
        min_files=args.min_files,
        sort_by=args.sort_by,
        dry_run=args.dry_run,
        progress=_ProgressBar("compact"),
    )
    if args.json:
        _emit(report.to_dict(), True)
        return
    _summary(table, report, args)


def _parts(partitions: list[dict[str, Any]]) -> str:
    shown = [describe_partition(p, "/") for p in partitions[:5]]
    more = f" and {len(partitions) - 5} more" if len(partitions) > 5 else ""
    return ", ".join(shown) + more


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _summary(table: lakefmt.Table, report: CompactionReport, args: argparse.Namespace) -> None:
    options = table.table_schema().table_options
    target = args.target_file_size or options.target_file_size
    least = args.min_files or options.compaction_min_file_num
    if not report.rewritten_files:
        print(
            f"nothing to compact: no partition holds {least} or more small files (under "
            f"{_human(int(target * LARGE_ENOUGH))}, 3/4 of the target {_human(target)}); "
            f"{_plural(report.files_before, 'live file')}, {_human(report.bytes_before)}"
        )
    elif report.dry_run:
        n = len(report.partitions)
        print(
            f"would compact {_plural(report.rewritten_files, 'file')} ({_human(report.rewritten_bytes)}, "
            f"{report.rows:,} rows) in {_plural(n, 'partition')}: {_parts(report.partitions)}"
        )
        print(f"target file size {_human(target)}; nothing was written")
    else:
        assert report.snapshot is not None
        print(
            f"compacted {_plural(report.rewritten_files, 'file')} ({_human(report.rewritten_bytes)}) into "
            f"{_plural(report.written_files, 'file')} ({_human(report.written_bytes)}) in "
            f"{_plural(len(report.partitions), 'partition')}: snapshot {report.snapshot.id} (COMPACT)"
        )
        scope = "the partitions asked for" if args.partition else "the table"
        print(
            f"live files in {scope}: {report.files_before:,} ({_human(report.bytes_before)}) -> "
            f"{report.files_after:,} ({_human(report.bytes_after)}); {report.seconds:.1f} s"
        )
    for p in report.replanned:
        print(f"re-planned {_parts([p])}: a concurrent commit removed some of its files")
    for g in report.given_up:
        print(f"gave up {_parts([g.partition])}: {g.reason}")
