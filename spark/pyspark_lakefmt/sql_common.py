"""What the SQL functions (:mod:`.sql_tables`, :mod:`.sql_procedures`) share: opening the table an argument names,
checking the other arguments, and turning a failure into one line Spark shows.

A Python UDTF runs in a Python worker Spark starts (an executor's for ``eval``, a planner's for ``analyze``), and
Spark shows whatever that worker raises as ``PythonException`` (or ``AnalysisException`` at analysis) with the
worker's Python traceback. :func:`reported` keeps that traceback to the function's own frame and the message to
``lakefmt_<name>('uri', ...): <ErrorType>: <what is wrong>``: lakefmt's errors and bad arguments (``ValueError``,
``TypeError``) are raised again that way; anything else (a bug) passes unchanged, whole traceback included.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import lakefmt

__all__ = ["TableFunction", "check_count", "check_snapshot", "check_text", "open_uri", "reported", "timestamp_ms"]


class TableFunction:
    """Base of lakefmt's UDTFs: ``storage_options`` (fsspec/s3fs, for every table the functions open) are set on
    the subclasses :func:`pyspark_lakefmt.register` registers."""

    storage_options: ClassVar[Mapping[str, str]] = {}


def _call(function: str, args: tuple[Any, ...]) -> str:
    return f"{function}({', '.join(repr(a) for a in args)})"


@contextmanager
def reported(function: str, *args: Any) -> Iterator[None]:
    """Raise a lakefmt error, a ``ValueError`` or a ``TypeError`` inside as one :class:`lakefmt.LakefmtError` naming
    the call (``function`` and its ``args``), the error's type and its message, without the frames below."""
    try:
        yield
    except (lakefmt.LakefmtError, ValueError, TypeError) as exc:
        kind = type(exc).__name__
        raise lakefmt.LakefmtError(f"{_call(function, args)}: {kind}: {exc}") from None


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


def check_snapshot(value: Any, what: str) -> int:
    """``value`` as a snapshot id (a whole number from 1; ``'3'`` too); ``ValueError`` otherwise."""
    checked = check_count(value, what, minimum=1)
    if checked is None:
        raise ValueError(f"{what} must be a snapshot id (a whole number from 1), got NULL")
    return checked


def open_uri(uri: Any, storage_options: Mapping[str, str] | None) -> lakefmt.Table:
    """The table at ``uri`` (a path, ``file:/...`` or an fsspec URL such as ``s3://bucket/t``)."""
    return lakefmt.open_table(check_text(uri, "the table uri (first argument)"), storage_options=storage_options)


def timestamp_ms(millis: int) -> datetime.datetime:
    """Epoch milliseconds as an aware UTC ``datetime`` (Spark's TIMESTAMP)."""
    return datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC)
