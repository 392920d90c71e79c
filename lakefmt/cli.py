"""The ``lakefmt`` command: inspect tables from a shell. Thin commands over the public API; presentation
(text table or ``--json``) lives in :func:`_emit`.

Exit codes: 0 success, 1 failure (a one-line message, no traceback, for lakefmt's own errors), 2 bad usage.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

import lakefmt
from lakefmt.errors import LakefmtError
from lakefmt.maintenance import FileClass, MaintenanceReport
from lakefmt.options import parse_duration_ms

__all__ = ["main"]

EPILOG = """\
examples:
  lakefmt snapshots /data/events              history of a table on local disk
  lakefmt expire /data/events --retain-min 10 --older-than 7d --dry-run
  lakefmt orphan-clean /data/events --older-than 2d --json
  lakefmt describe s3://bucket/events -o endpoint_url=http://127.0.0.1:9000
  lakefmt files /data/events --snapshot 12 --json | jq '.[].path'

storage options (-o key=value) go to fsspec/s3fs; credentials may also come from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...). They are never printed.
"""


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"storage option {pair!r} is not key=value")
        out[key] = value
    return out


def _env_storage_options(uri: str) -> dict[str, Any]:
    """S3 endpoint from the environment (credentials are picked up by botocore itself)."""
    if uri.startswith(("s3://", "s3a://")) and os.environ.get("AWS_ENDPOINT_URL"):
        return {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    return {}


def _when(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _emit(rows: list[dict[str, Any]] | dict[str, Any], as_json: bool, columns: Sequence[str] = ()) -> None:
    """Print rows as JSON (for scripts) or as an aligned text table (for people)."""
    if as_json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
        return
    if isinstance(rows, dict):
        width = max((len(k) for k in rows), default=0)
        for k, v in rows.items():
            print(f"{k:<{width}}  {v}")
        return
    if not rows:
        print("(none)")
        return
    cols = list(columns) or list(rows[0])
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    for row in cells:
        print(
            "  ".join(
                v.rjust(w) if v.replace(",", "").isdigit() else v.ljust(w) for v, w in zip(row, widths, strict=True)
            ).rstrip()
        )


def _cmd_snapshots(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows = []
    for s in table.snapshots():
        d = s.to_dict()
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


def _cmd_describe(table: lakefmt.Table, args: argparse.Namespace) -> None:
    ts = table.table_schema()
    latest = table.latest_snapshot()
    files = table.files() if latest else []
    info: dict[str, Any] = {
        "uri": table.uri,
        "format_version": lakefmt.FORMAT_VERSION,
        "schema_id": ts.id,
        "columns": {f.name: str(f.type) + ("" if f.nullable else " not null") for f in ts.arrow_schema},
        "partition_keys": list(ts.partition_keys),
        "options": dict(ts.options),
        "latest_snapshot": latest.id if latest else None,
        "latest_commit": _when(latest.time_millis) if latest else None,
        "rows": f"{latest.total_record_count if latest else 0:,}"
        if not args.json
        else (latest.total_record_count if latest else 0),
        "live_files": len(files),
        "live_bytes": sum(f.file_size for f in files),
    }
    if args.json:
        _emit(info, True)
        return
    columns = info.pop("columns")
    info["columns"] = ", ".join(f"{k} {v}" for k, v in columns.items())
    info["live_bytes"] = f"{info['live_bytes']:,}"
    _emit(info, False)


def _cmd_files(table: lakefmt.Table, args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    for f in table.files(snapshot_id=args.snapshot):
        part: Any = f.partition if args.json else ",".join(f"{k}={v}" for k, v in f.partition.items())
        rows.append({"path": f.path, "size": f.file_size, "rows": f.row_count, "partition": part})
    _emit(rows, args.json, ["path", "size", "rows", "partition"])


class _ProgressBar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _summary(report: MaintenanceReport) -> None:
    verb = "would delete" if report.dry_run else "deleted"
    if report.operation == "expire":
        if report.expired_snapshots:
            ids = report.expired_snapshots
            print(f"expired snapshots {ids[0]}..{ids[-1]} ({len(ids)})", end="")
        else:
            print("no snapshot to expire", end="")
        if report.kept_snapshots:
            print(f"; retained {report.kept_snapshots[0]}..{report.kept_snapshots[1]}")
        else:
            print()
    if report.dry_run:
        for path in report.paths:
            print(f"  {path}")
    for kind in FileClass:
        if count := report.count(kind):
            label = kind.value.replace("_", " ")
            label = label[:-1] if count == 1 else label  # "1 data file", "2 data files"
            print(f"{verb} {count:,} {label} ({_human(report.bytes(kind))})")
    print(f"{verb} {report.total_files:,} file(s), {_human(report.total_bytes)} in total")


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _duration(text: str) -> datetime.timedelta:
    try:
        return datetime.timedelta(milliseconds=parse_duration_ms(text, "duration"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _cmd_expire(table: lakefmt.Table, args: argparse.Namespace) -> None:
    report = table.expire_snapshots(
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        older_than=args.older_than,
        dry_run=args.dry_run,
        progress=_ProgressBar("expire"),
    )
    _emit(report.to_dict(), True) if args.json else _summary(report)


def _cmd_orphan_clean(table: lakefmt.Table, args: argparse.Namespace) -> None:
    report = table.remove_orphan_files(
        older_than=args.older_than, dry_run=args.dry_run, progress=_ProgressBar("orphan-clean")
    )
    _emit(report.to_dict(), True) if args.json else _summary(report)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog="lakefmt",
        description="Inspect and maintain lakefmt tables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lakefmt {lakefmt.__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("uri", help="table location: a path, file://, s3://bucket/path, memory://...")
    common.add_argument(
        "-o",
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec/s3fs storage option (repeatable)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "snapshots",
        parents=[common],
        help="snapshot history as a table",
        description="List every retained snapshot, oldest first.",
    )
    p.set_defaults(func=_cmd_snapshots)
    p = sub.add_parser(
        "describe",
        parents=[common],
        help="schema, partitioning, latest snapshot, live files",
        description="Describe a table: schema, partition keys, options, latest snapshot, size.",
    )
    p.set_defaults(func=_cmd_describe)
    p = sub.add_parser(
        "files",
        parents=[common],
        help="live data files of a snapshot",
        description="List the data files a snapshot reads (the latest by default).",
    )
    p.add_argument("--snapshot", type=int, default=None, metavar="N", help="snapshot id (default: latest)")
    p.set_defaults(func=_cmd_files)
    p = sub.add_parser(
        "expire",
        parents=[common],
        help="expire old snapshots and delete files only they reference",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Expire snapshots: never the latest; at least --retain-min are kept; at most --retain-max;\n"
        "those committed more than --older-than ago go. Data files, manifests and manifest lists that only\n"
        "expired snapshots reference are deleted, then the snapshot files. Time travel to an expired\n"
        "snapshot fails afterwards. Try --dry-run first.",
        epilog="example:\n  lakefmt expire s3://bucket/events --retain-min 10 --retain-max 500 \\\n"
        "      --older-than 7d --dry-run\n",
    )
    p.add_argument("--retain-min", type=_positive, default=1, metavar="N", help="always keep this many (default 1)")
    p.add_argument("--retain-max", type=_positive, default=None, metavar="N", help="never keep more than this many")
    p.add_argument(
        "--older-than",
        type=_duration,
        default=None,
        metavar="AGE",
        help="expire snapshots older than AGE: 90m, 12h, 7d (default: only --retain-max applies)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    p.set_defaults(func=_cmd_expire)
    p = sub.add_parser(
        "orphan-clean",
        parents=[common],
        help="delete files no snapshot references",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Delete files under the table root that no retained snapshot references (failed commits,\n"
        "interrupted writes, temp files) and that are older than --older-than, so files of commits in\n"
        "flight are never touched. Try --dry-run first.",
        epilog="example:\n  lakefmt orphan-clean /data/events --older-than 2d --dry-run\n",
    )
    p.add_argument(
        "--older-than",
        type=_duration,
        default=datetime.timedelta(days=1),
        metavar="AGE",
        help="only files last modified before AGE ago: 90m, 12h, 7d (default 1d)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    p.set_defaults(func=_cmd_orphan_clean)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakefmt`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "retain_max", None) is not None and args.retain_max < args.retain_min:
        parser.error(f"--retain-max ({args.retain_max}) must be at least --retain-min ({args.retain_min})")
    try:
        options = {**_env_storage_options(args.uri), **_storage_options(args.storage_option)}
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    try:
        table = lakefmt.open_table(args.uri, storage_options=options)
        args.func(table, args)
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0
    except LakefmtError as exc:
        print(f"lakefmt: error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"lakefmt: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
