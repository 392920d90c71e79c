"""The ``lakefmt`` command: inspect tables from a shell. Thin commands over the public API; presentation
(text table or ``--json``) lives in :func:`_emit`.

Exit codes: 0 success, 1 failure (a one-line message, no traceback, for lakefmt's own errors), 2 bad usage.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from typing import Any

import orjson

import lakefmt
from lakefmt.errors import LakefmtError

__all__ = ["main"]

EPILOG = """\
examples:
  lakefmt snapshots /data/events              history of a table on local disk
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakefmt`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        options = _storage_options(args.storage_option)
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
