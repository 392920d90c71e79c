"""What the SQL functions (:mod:`.sql_tables`, :mod:`.sql_procedures`) share: opening the table an argument names,
checking the other arguments, and turning a failure into one line Spark shows.

A Python UDTF runs in a Python worker Spark starts (an executor's for ``eval``, a planner's for ``analyze``), and
Spark shows whatever that worker raises as ``PythonException`` (or ``AnalysisException`` at analysis) with the
worker's Python traceback. :class:`reported` cuts that traceback to the line that raised and prefixes the message
with the call, so Spark shows ``lakefmt.errors.<ErrorType>: lakefmt_<name>('uri', ...): <what is wrong>`` under one
frame: lakefmt's errors and bad
arguments (``ValueError``, ``TypeError``); anything else (a bug) passes unchanged, whole traceback included.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar, Literal

import lakefmt
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = ["TableFunction", "check_count", "check_snapshot", "check_text", "open_uri", "reported", "timestamp_ms"]


class TableFunction:
    """Base of lakefmt's UDTFs: ``storage_options`` (fsspec/s3fs, for every table the functions open) are set on
    the subclasses :func:`pyspark_lakefmt.register` registers."""

    storage_options: ClassVar[Mapping[str, str]] = {}


class reported:
    """``with reported(function, *args):`` a lakefmt error, a ``ValueError`` or a ``TypeError`` raised inside leaves
    with its message prefixed by the call (``lakefmt_files('/data/t', 9): ...``) and its traceback cut to the line
    that raised it: the exception keeps its type, and Spark shows that line, the type and the message. (pyspark hides
    its worker's frames above the first frame outside ``.../pyspark``, a prefix that ``.../pyspark_lakefmt`` shares:
    an error raised in lakefmt shows one frame; one raised here, the worker's frames too.) Anything else passes
    untouched."""

    def __init__(self, function: str, *args: Any) -> None:
        self.call = f"{function}({', '.join(repr(a) for a in args)})"

    def __enter__(self) -> reported:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if isinstance(exc, lakefmt.LakefmtError | ValueError | TypeError):
            exc.args = (f"{self.call}: {exc}",)
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            exc.with_traceback(tb)  # the line that raised it alone: lakefmt's frames in between are not the user's
            exc.__suppress_context__ = True
        return False


def check_text(value: Any, what: str) -> str:
    """``value`` as a non-empty string; ``ValueError`` naming ``what`` otherwise (a NULL, a number)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


def check_count(value: Any, what: str, *, minimum: int = 0) -> int | None:
    """``value`` as a whole number of at least ``minimum`` (a string of digits too), None for a NULL."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be a whole number from {minimum}, got {value!r}")
    return value


def check_snapshot(value: Any, what: str, *, minimum: int = 1) -> int:
    """``value`` as a snapshot id (``'3'`` too), checked by lakefmt (:class:`lakefmt.InvalidSnapshotIdError` below
    ``minimum``, ``TypeError`` for what is not a whole number)."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    return check_snapshot_id(value, what, minimum=minimum)


#: a SQL table's name as it is written in a query: ``ev``, ``db.ev``, ``spark_catalog.db.ev`` (back-quoted parts too)
_SQL_NAME = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)){0,2}$")


def open_uri(uri: Any, storage_options: Mapping[str, str] | None) -> lakefmt.Table:
    """The table at ``uri`` (a path, ``file:/...`` or an fsspec URL such as ``s3://bucket/t``). An argument that holds
    no table and reads as a SQL table's name (``'ev'``) is refused with :class:`lakefmt.NotATableError` saying that
    a location is needed: a UDTF runs in a Python worker, which cannot look a name up in Spark's catalog."""
    text = check_text(uri, "the table uri (first argument)")
    try:
        return lakefmt.open_table(text, storage_options=storage_options)
    except lakefmt.NotATableError as exc:
        if not _SQL_NAME.match(text) or isinstance(exc, lakefmt.BucketNotFoundError):
            raise
        raise lakefmt.NotATableError(
            f"{text!r} is not a lakefmt table's location ({exc}). lakefmt's SQL functions take the table's "
            "location (a path or a URI such as 's3://bucket/ev'), not a SQL table's name: they run in a Python "
            "worker, which cannot look names up in Spark's catalog. Give the location the SQL table was declared "
            f"with (CREATE TABLE {text} USING lakefmt LOCATION '...'); in Python, "
            f"pyspark_lakefmt.table_location(spark, {text!r}) returns it"
        ) from None


def timestamp_ms(millis: int) -> datetime.datetime:
    """Epoch milliseconds as an aware UTC ``datetime`` (Spark's TIMESTAMP)."""
    return datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC)
