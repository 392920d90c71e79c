"""What the CLI prints: rows as JSON or an aligned text table, a progress bar on stderr, the summary of a
maintenance report, human-readable sizes, and one-line failure messages (credentials masked)."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from lakefmt.cli.storage import _S3_EXTRA, _s3fs_missing, _scheme, _secrets
from lakefmt.io.storage import storage_error
from lakefmt.maintenance import FileClass, MaintenanceReport


def _when(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(millis: int) -> str:
    """ISO-8601 in UTC with milliseconds: ``2026-11-01T08:30:00.250+00:00``."""
    when = datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
    return when.isoformat(timespec="milliseconds")


def _beside(row: dict[str, Any], after: str, key: str, value: Any) -> dict[str, Any]:
    """``row`` with ``key: value`` placed right after the key ``after`` (an ISO-8601 time beside its
    milliseconds); existing keys keep their places and values, since scripts read them."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        out[k] = v
        if k == after:
            out[key] = value
    out.setdefault(key, value)
    return out


def _report_json(report: MaintenanceReport) -> dict[str, Any]:
    """A maintenance report for ``--json``: the report's own dict, plus ``retained_snapshots``, the ids of every
    snapshot kept, as a list (``kept_snapshots`` is the pair first, last: ``[4, 6]`` means 4, 5 and 6)."""
    out = report.to_dict()
    kept = report.kept_snapshots
    retained = list(range(kept[0], kept[1] + 1)) if kept else []
    return _beside(out, "kept_snapshots", "retained_snapshots", retained)


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
        dry = report.dry_run
        expired, retained = ("would expire", "would retain") if dry else ("expired", "retained")
        held_verb = "would hold back" if dry else "held back"
        if report.expired_snapshots:
            ids = report.expired_snapshots
            print(f"{expired} snapshots {ids[0]}..{ids[-1]} ({len(ids)})", end="")
        else:
            print("no snapshot to expire", end="")
        if report.kept_snapshots:
            print(f"; {retained} {report.kept_snapshots[0]}..{report.kept_snapshots[1]}")
        else:
            print()
        if report.kept_reason:
            print(report.kept_reason)
        for held in report.held_back:
            n = held.snapshots
            if not n:
                continue  # --json lists every hold
            print(
                f"{held.hold.kind} {held.hold.name!r} (from snapshot {held.hold.snapshot_id}) "
                f"{held_verb} {n} snapshot{'' if n == 1 else 's'}"
            )
        if report.expired_consumers:
            names = ", ".join(repr(c) for c in report.expired_consumers)
            print(f"{verb} the records of consumers past consumer.expiration-time: {names}")
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


def _one_line(message: str, options: dict[str, Any]) -> str:
    for secret in _secrets(options):
        message = message.replace(secret, "***")
    return " ".join(message.split())


def _failure(exc: Exception, uri: str, options: dict[str, Any]) -> str:
    """A one-line explanation of an exception that is not lakefmt's own."""
    if isinstance(exc, ImportError):
        if _scheme(uri) == "s3":
            return _s3fs_missing() or f"a dependency of s3fs cannot be imported ({exc}): {_S3_EXTRA}"
        return f"a filesystem for {uri} needs a package that is not installed: {exc}"
    explained = storage_error(exc, uri, options)  # the core's messages: the same in Python and here
    if explained is not None:
        return str(explained)
    return f"{type(exc).__name__}: {exc}"
