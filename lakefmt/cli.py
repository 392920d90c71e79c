"""The ``lakefmt`` command: inspect tables from a shell. Thin commands over the public API; presentation
(text table or ``--json``) lives in :func:`_emit`.

Exit codes: 0 success, 1 failure, 2 bad usage. Either way the error is one line on stderr, never a traceback
(set ``LAKEFMT_TRACEBACK=1`` to see one for an unexpected error).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import difflib
import importlib
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit

import orjson

import lakefmt
from lakefmt.errors import LakefmtError
from lakefmt.maintenance import FileClass, MaintenanceReport
from lakefmt.options import (
    DEFAULT_ORPHAN_OLDER_THAN,
    DEFAULT_ORPHAN_OLDER_THAN_MS,
    format_duration_ms,
    parse_duration,
)

__all__ = ["main"]

EPILOG = """\
examples:
  lakefmt snapshots /data/events              history of a table on local disk
  lakefmt expire /data/events --retain-min 10 --older-than 7d --dry-run
  lakefmt orphan-clean /data/events --older-than 2d --json
  lakefmt describe s3://bucket/events -o endpoint_url=http://127.0.0.1:9000
  lakefmt files /data/events --snapshot 12 --json | jq '.[].path'

storage options (-o key=value) go to fsspec/s3fs; credentials may also come from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...). They are never printed. Values are typed:
true/false, integers, decimals, JSON objects (-o 'config_kwargs={"read_timeout": 60}'); anything else is a
string. On S3 the command gives up quickly: 3 s to connect, 2 attempts per request, unless -o config_kwargs
(connect_timeout, retries) or AWS_MAX_ATTEMPTS / AWS_RETRY_MODE say otherwise.
"""

#: options that are always strings, even when they look like numbers (an all-digit secret stays a secret)
_STRING_OPTIONS = frozenset({"key", "secret", "token", "username", "password", "profile", "endpoint_url"})
#: options every fsspec filesystem takes (instance and listings caches)
_FSSPEC_OPTIONS = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
#: CLI defaults for s3fs's botocore client: fail within seconds instead of botocore's retry storm
_S3_CONFIG_DEFAULTS: dict[str, Any] = {"connect_timeout": 3, "retries": {"total_max_attempts": 2, "mode": "standard"}}
_S3_EXTRA = "pip install 'lakefmt[s3]'"


class _UsageError(Exception):
    """A command line that cannot work (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _option_value(key: str, text: str) -> Any:
    """A storage option's value by its form: true/false, an integer, a decimal, a JSON object or list, or else
    the string itself."""
    stripped = text.strip()
    if key in _STRING_OPTIONS:
        return text
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    if _DECIMAL.fullmatch(stripped):
        return float(stripped)
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as exc:  # the value is not repeated: it may hold a credential
            raise argparse.ArgumentTypeError(
                f"storage option {key!r} is not valid JSON ({exc.msg} at character {exc.pos + 1})"
            ) from None
    return text


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``-o key=value`` pairs as a dict of typed values (see :func:`_option_value`)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"storage option {pair!r} is not key=value")
        out[key] = _option_value(key, value)
    return out


def _scheme(uri: str) -> str:
    """``s3`` for ``s3://`` and ``s3a://``, ``file`` for a path or ``file://``, else the URI's scheme."""
    if "://" not in uri:
        return "file"
    scheme = uri.split("://", 1)[0].lower()
    return "s3" if scheme == "s3a" else scheme


def _check_uri(uri: str) -> None:
    """Refuse a location that can name no table (exit 2)."""
    if not uri.strip():
        raise _UsageError("the table location is empty")
    if _scheme(uri) == "s3" and not uri.split("://", 1)[1].split("/", 1)[0]:
        raise _UsageError(f"{uri!r} names no bucket: write s3://bucket/path/to/table")


def _s3fs_missing() -> str | None:
    """Why S3 cannot be reached (s3fs, an optional dependency, is not installed), or None."""
    try:
        import s3fs  # noqa: F401
    except ImportError as exc:
        return f"s3:// needs the optional dependency s3fs, which cannot be imported ({exc}): {_S3_EXTRA}"
    return None


def _parameters(func: Any) -> set[str]:
    """The names a callable takes as keywords (``self`` and ``**kwargs`` aside)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in inspect.signature(func).parameters.values() if p.kind in kinds and p.name != "self"}


def _known_options(uri: str) -> set[str] | None:
    """The storage options the filesystem behind ``uri`` takes, or None when it cannot be told (then the
    filesystem itself judges). s3fs hands any option it does not know to ``aiobotocore.AioSession``, which
    raises ``TypeError``; local paths take none."""
    scheme = _scheme(uri)
    if scheme == "file":
        return set()
    if scheme != "s3":
        return None
    import s3fs

    known = _parameters(s3fs.S3FileSystem.__init__) | _FSSPEC_OPTIONS
    with contextlib.suppress(ImportError, AttributeError):  # s3fs depends on aiobotocore: it is there
        known |= _parameters(importlib.import_module("aiobotocore.session").AioSession.__init__)
    return known


def _check_options(uri: str, options: dict[str, Any]) -> None:
    """Refuse a storage option the filesystem does not take, naming it (exit 2)."""
    known = _known_options(uri)
    if known is None:
        return
    for key in options:
        if key in known:
            continue
        if not known:
            raise _UsageError(f"unknown storage option {key!r}: local paths take no storage options")
        hint = ""
        if difflib.get_close_matches(key, ["region", "region_name"], n=1):
            hint = ' (the region goes in -o \'client_kwargs={"region_name": "..."}\' or AWS_DEFAULT_REGION)'
        elif close := difflib.get_close_matches(key, sorted(known), n=3):
            hint = f" (did you mean {' or '.join(close)}?)"
        raise _UsageError(f"unknown storage option {key!r} for s3://{hint}")


def _s3_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the CLI's short connect timeout and few retries filled in where the user set none."""
    config = options.get("config_kwargs", {})
    if not isinstance(config, dict):
        return options  # s3fs will say what is wrong with it
    merged = dict(config)
    merged.setdefault("connect_timeout", _S3_CONFIG_DEFAULTS["connect_timeout"])
    if "retries" not in merged and not (os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE")):
        merged["retries"] = dict(_S3_CONFIG_DEFAULTS["retries"])  # a copy: botocore rewrites it in place
    return {**options, "config_kwargs": merged}


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
        return parse_duration(text, "duration")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _snapshot_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a snapshot id (a whole number)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a snapshot id: snapshot ids start at 1")
    return value


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


@dataclass(frozen=True)
class _Arg:
    """One ``add_argument`` call: its flags (or positional name) and keyword arguments."""

    flags: tuple[str, ...]
    options: Mapping[str, Any]


def _arg(*flags: str, **options: Any) -> _Arg:
    return _Arg(flags, options)


@dataclass(frozen=True)
class _Command:
    """A subcommand: its name, what runs it, its help texts and its own arguments (after the common ones).
    A command with an ``epilog`` (an example) has its description and epilog printed as written."""

    name: str
    run: Callable[[lakefmt.Table, argparse.Namespace], None]
    help: str
    description: str
    epilog: str | None = None
    args: tuple[_Arg, ...] = ()


#: arguments every command takes
_COMMON_ARGS = (
    _arg("uri", help="table location: a path, file://, s3://bucket/path, memory://..."),
    _arg(
        "-o",
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec/s3fs storage option (repeatable)",
    ),
    _arg("--json", action="store_true", help="machine-readable JSON on stdout"),
)

_DRY_RUN = _arg("--dry-run", action="store_true", help="list what would be deleted; delete nothing")

#: the commands, in the order ``--help`` lists them
_COMMANDS: tuple[_Command, ...] = (
    _Command(
        "snapshots",
        _cmd_snapshots,
        help="snapshot history as a table",
        description="List every retained snapshot, oldest first.",
    ),
    _Command(
        "describe",
        _cmd_describe,
        help="schema, partitioning, latest snapshot, live files",
        description="Describe a table: schema, partition keys, options, latest snapshot, size.",
    ),
    _Command(
        "files",
        _cmd_files,
        help="live data files of a snapshot",
        description="List the data files a snapshot reads (the latest by default).",
        args=(_arg("--snapshot", type=_snapshot_id, default=None, metavar="N", help="snapshot id (default: latest)"),),
    ),
    _Command(
        "expire",
        _cmd_expire,
        help="expire old snapshots and delete files only they reference",
        description="Expire snapshots: never the latest; at least --retain-min are kept; at most --retain-max;\n"
        "those committed more than --older-than ago go. Data files, manifests and manifest lists that only\n"
        "expired snapshots reference are deleted, then the snapshot files. Time travel to an expired\n"
        "snapshot fails afterwards. Try --dry-run first.",
        epilog="example:\n  lakefmt expire s3://bucket/events --retain-min 10 --retain-max 500 \\\n"
        "      --older-than 7d --dry-run\n",
        args=(
            _arg("--retain-min", type=_positive, default=1, metavar="N", help="always keep this many (default 1)"),
            _arg("--retain-max", type=_positive, default=None, metavar="N", help="never keep more than this many"),
            _arg(
                "--older-than",
                type=_duration,
                default=None,
                metavar="AGE",
                help="expire snapshots older than AGE: 90m, 12h, 7d (default: only --retain-max applies)",
            ),
            _DRY_RUN,
        ),
    ),
    _Command(
        "orphan-clean",
        _cmd_orphan_clean,
        help="delete files no snapshot references",
        description="Delete files under the table root that no retained snapshot references (failed commits,\n"
        "interrupted writes, temp files) and that are older than --older-than, so files of commits in\n"
        "flight are never touched. Try --dry-run first.",
        epilog="example:\n  lakefmt orphan-clean /data/events --older-than 2d --dry-run\n",
        args=(
            _arg(
                "--older-than",
                type=_duration,
                default=DEFAULT_ORPHAN_OLDER_THAN,
                metavar="AGE",
                help="only files last modified before AGE ago: 90m, 12h, 7d "
                f"(default {format_duration_ms(DEFAULT_ORPHAN_OLDER_THAN_MS)})",
            ),
            _DRY_RUN,
        ),
    ),
)


def _add(parser: argparse.ArgumentParser, args: Sequence[_Arg]) -> None:
    for a in args:
        parser.add_argument(*a.flags, **a.options)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, built from the table :data:`_COMMANDS` (exposed for documentation and tests)."""
    parser = _Parser(
        prog="lakefmt",
        description="Inspect and maintain lakefmt tables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lakefmt {lakefmt.__version__}")
    common = _Parser(add_help=False)
    _add(common, _COMMON_ARGS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        p = sub.add_parser(
            command.name,
            parents=[common],
            help=command.help,
            description=command.description,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter if command.epilog else argparse.HelpFormatter,
        )
        _add(p, command.args)
        p.set_defaults(func=command.run)
    return parser


def _secrets(options: dict[str, Any]) -> list[str]:
    """Credential values that an error message must not show."""
    found = [os.environ.get(k, "") for k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")]
    stack: list[Any] = [options]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if isinstance(v, dict):
                    stack.append(v)
                elif isinstance(v, str) and re.search(r"secret|token|password|key", str(k), re.IGNORECASE):
                    found.append(v)
    return [v for v in found if len(v) >= 4]


def _one_line(message: str, options: dict[str, Any]) -> str:
    for secret in _secrets(options):
        message = message.replace(secret, "***")
    return " ".join(message.split())


def _endpoint(exc: BaseException, options: dict[str, Any]) -> str:
    """scheme://host:port of the endpoint a botocore connection error names."""
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url") or options.get("endpoint_url") or "")
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else (url or "the S3 endpoint")


def _failure(exc: Exception, uri: str, options: dict[str, Any]) -> str:
    """A one-line explanation of an exception that is not lakefmt's own."""
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, ImportError):
        if _scheme(uri) == "s3":
            return _s3fs_missing() or f"a dependency of s3fs cannot be imported ({exc}): {_S3_EXTRA}"
        return f"a filesystem for {uri} needs a package that is not installed: {exc}"
    if names & {"NoCredentialsError", "PartialCredentialsError"}:
        return (
            f"no usable credentials for {uri} ({exc}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
            "AWS_PROFILE, or pass -o key=... -o secret=...; -o anon=true reads a public bucket"
        )
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ProxyConnectionError"}:
        return f"cannot connect to {_endpoint(exc, options)} ({type(exc).__name__}); check -o endpoint_url"
    if isinstance(exc, TypeError) and (m := re.search(r"unexpected keyword argument '([^']+)'", str(exc))):
        return f"unknown storage option {m.group(1)!r} for {uri.split('://', 1)[0]}:// ({exc})"
    return f"{type(exc).__name__}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakefmt`` console script."""
    args = build_parser().parse_args(argv)

    def usage_error(message: str) -> int:
        prog = f"lakefmt {args.command}"
        print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
        return 2

    if getattr(args, "retain_max", None) is not None and args.retain_max < args.retain_min:
        return usage_error(f"--retain-max ({args.retain_max}) must be at least --retain-min ({args.retain_min})")
    try:
        _check_uri(args.uri)
        options = {**_env_storage_options(args.uri), **_storage_options(args.storage_option)}
        if _scheme(args.uri) == "s3":
            if (missing := _s3fs_missing()) is not None:
                print(f"lakefmt: error: {missing}", file=sys.stderr)
                return 1
            _check_options(args.uri, options)
            options = _s3_defaults(options)
        else:
            _check_options(args.uri, options)
    except (argparse.ArgumentTypeError, _UsageError) as exc:
        return usage_error(str(exc))
    try:
        table = lakefmt.open_table(args.uri, storage_options=options)
        args.func(table, args)
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("lakefmt: interrupted", file=sys.stderr)
        return 130
    except LakefmtError as exc:
        print(f"lakefmt: error: {_one_line(str(exc), options)}", file=sys.stderr)
        return 1
    except Exception as exc:  # storage clients raise many types; none of them deserves a traceback
        if os.environ.get("LAKEFMT_TRACEBACK"):
            raise
        print(f"lakefmt: error: {_one_line(_failure(exc, args.uri, options), options)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
