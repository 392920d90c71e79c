"""Points in time (``as_of``, ``--as-of``, Spark's ``asOf``/``timestampAsOf``/``startingTimestamp``), read by
one rule in every interface, and printed one way in messages. Pure: no I/O.

An instant is

* a ``datetime`` (one without a time zone is UTC, as on the command line and in Spark; never local time), or a
  ``date`` (its midnight, UTC);
* an ISO-8601 string: ``2026-11-30T23:59:59Z``, ``2026-11-30T23:59:59+01:00``, ``2026-11-30 23:59:59`` (no
  offset: UTC) or ``2026-11-30`` (midnight, UTC);
* a whole number of epoch milliseconds, as an ``int`` or a string of digits (what snapshots record).

A ``float`` is refused: ``time.time()`` is seconds, so no float is guessed to be seconds or milliseconds; write
``int(time.time() * 1000)`` or pass a ``datetime``. Messages print instants in ISO 8601, UTC
(:func:`format_instant`).
"""

from __future__ import annotations

import datetime
import numbers
import re

from lakefmt.errors import InvalidTimestampError

__all__ = ["EPOCH", "FORMS", "Instant", "format_instant", "parse_instant", "seconds_hint", "to_millis"]

#: What an interface may pass as an instant.
Instant = datetime.datetime | datetime.date | str | int

#: The start of epoch milliseconds.
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

#: The accepted forms, for error messages.
FORMS = (
    "a datetime (naive = UTC), an ISO-8601 string (2026-11-30T23:59:59Z; no offset = UTC) or whole epoch "
    "milliseconds (an int)"
)

_DIGITS = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|[+-]?\d+[eE][+-]?\d+")
_MS = datetime.timedelta(milliseconds=1)


def _float_refused(value: object, what: str) -> InvalidTimestampError:
    return InvalidTimestampError(
        f"{what} {value!r} is a float, which lakefmt does not guess the unit of (time.time() is seconds, snapshot "
        f"times are milliseconds): pass int(time.time() * 1000) for epoch milliseconds, or {FORMS}"
    )


def _datetime_millis(moment: datetime.datetime, what: str) -> int:
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=datetime.UTC)  # naive = UTC, in every interface
    try:
        return (moment - EPOCH) // _MS
    except (OverflowError, ValueError) as exc:
        raise InvalidTimestampError(f"{what} {moment!r} is not a usable point in time: {exc}") from exc


def parse_instant(text: str, what: str = "as_of") -> int:
    """An instant written as text, in epoch milliseconds: whole epoch milliseconds (digits) or an ISO-8601 date
    or date-time (``Z`` or an offset; without one, UTC). :class:`InvalidTimestampError` names the forms."""
    s = str(text).strip()
    if _DIGITS.fullmatch(s):
        return int(s)
    if _DECIMAL.fullmatch(s):
        raise _float_refused(s, what)
    try:
        moment = datetime.datetime.fromisoformat(s[:-1] + "+00:00" if s[-1:] in ("Z", "z") else s)
    except ValueError:
        raise InvalidTimestampError(
            f"{what} {text!r} is not a point in time: use ISO-8601 (2026-11-30T23:59:59Z; no offset = UTC) or "
            "whole epoch milliseconds"
        ) from None
    return _datetime_millis(moment, what)


def to_millis(value: object, what: str = "as_of") -> int:
    """``value`` (an :data:`Instant`) in epoch milliseconds, by the rules of this module."""
    if isinstance(value, datetime.datetime):
        return _datetime_millis(value, what)
    if isinstance(value, datetime.date):
        return _datetime_millis(datetime.datetime(value.year, value.month, value.day), what)
    if isinstance(value, str):
        return parse_instant(value, what)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        raise _float_refused(value, what)
    raise TypeError(f"{what} must be {FORMS}; got {value!r}")


def format_instant(millis: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, to the millisecond: ``2026-11-30T23:59:59.250Z`` (an instant
    outside years 1..9999 as its milliseconds, with the unit)."""
    try:
        moment = EPOCH + datetime.timedelta(milliseconds=millis)
    except OverflowError:
        return f"{millis} ms since 1970-01-01T00:00:00Z"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_hint(millis: int, earliest: int | None) -> str:
    """A hint for an instant that is probably epoch seconds given as milliseconds: it falls before March 1973
    while ``earliest`` (the earliest snapshot's time) does not; else ``""``."""
    if earliest is None or not 0 <= millis < 100_000_000_000 <= earliest:
        return ""
    return (
        f" (a number is epoch milliseconds: {millis} read as seconds would be {format_instant(millis * 1000)}; "
        "pass milliseconds, a datetime or an ISO-8601 string)"
    )
