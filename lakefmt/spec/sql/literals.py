"""SQL text's literal values: numbers, dates and timestamps read from text exactly, and ``CAST(literal AS type)``
folded to a value with Spark's meaning or refused (:mod:`lakefmt.spec.sql.tree` builds the tree; the rules are
written in ``docs/filters.md``).

A cast gives Spark's value (its ANSI mode, where a cast that fails is an error) or is refused; it never guesses:

* to ``TINYINT`` .. ``BIGINT``: a whole number within the type's range (Spark would truncate ``2.5`` to 2: refused);
* to ``DECIMAL(p, s)`` (``DECIMAL`` is ``DECIMAL(10, 0)``): a number with at most ``s`` decimal places and ``p``
  digits (Spark rounds ``1.005`` to ``1.01`` at scale 2: refused); a double is refused (write it without exponent);
* to ``DOUBLE``: the nearest double; to ``FLOAT``: the nearest float32 (as Spark), compared as that double; a number
  beyond either's range is refused;
* to ``STRING``: Spark's text of text, integers, booleans (``true``), dates (``2026-01-02``) and decimals written
  plainly (``1.50``); doubles and timestamps (whose text depends on Java's formatting and the session's time zone)
  are refused.
"""

from __future__ import annotations

import datetime
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow, Rounded
from fractions import Fraction
from math import isfinite
from typing import Any

from lakefmt.errors import InvalidPredicateError

__all__ = ["EXACT", "Stamp", "cast_value", "number_of", "parse_date", "parse_stamp"]

#: decimal arithmetic on literals: exact or refused (Python's default context rounds to 28 digits); 100 digits hold
#: any value of a decimal256 (76 digits) and any product of two decimal128 values
EXACT = Context(prec=100, Emin=-999999, Emax=999999, traps=[Inexact, Rounded, Overflow, InvalidOperation])
#: the longest integer literal read (Python refuses to read more than 4300 digits; no column type holds 1000)
MAX_DIGITS = 1000
#: the integer CAST types and their widths (Spark's ANSI cast fails outside their range)
_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_NUMBERS = ("int", "decimal", "double")
_STAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(Z|[+-]\d{2}:?\d{2})?"
)


@dataclass(frozen=True)
class Stamp:
    """A timestamp literal: ``ns`` nanoseconds after 1970-01-01 00:00, in UTC if ``zoned``, else on the wall clock;
    ``text`` as written."""

    ns: int
    zoned: bool
    text: str


def _short(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def number_of(text: str) -> int | Decimal | float | None:
    """``text`` as a number: an integer, a decimal (``2.5``) or a double (``2.5e0``, ``nan``, ``inf``); None: not
    one. An integer of more than :data:`MAX_DIGITS` digits, or a double written beyond a double's range
    (``1e400``), is an :class:`InvalidPredicateError` naming it."""
    t = text.strip()
    if re.fullmatch(r"[+-]?\d+", t):
        if len(t.lstrip("+-")) > MAX_DIGITS:
            raise InvalidPredicateError(f"the number {_short(t)} has more than {MAX_DIGITS} digits")
        return int(t)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)", t):
        return Decimal(t)  # exact: the constructor does not round
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+", t):
        x = float(t)
        if not isfinite(x):
            raise InvalidPredicateError(f"the number {_short(t)} is beyond the range of a double")
        return x
    if re.fullmatch(r"[+-]?(nan|inf|infinity)", t, re.IGNORECASE):
        return float(t)
    return None


def parse_stamp(value: str) -> Stamp | None:
    """``yyyy-mm-dd[( |T)hh:mm[:ss[.fffffffff]]][Z|+hh:mm]`` as a :class:`Stamp` (None: not of that form)."""
    m = _STAMP.fullmatch(value.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        day = datetime.date(int(y), int(mo), int(d))
        clock = datetime.time(int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    seconds = (day.toordinal() - 719163) * 86400 + clock.hour * 3600 + clock.minute * 60 + clock.second
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            return None
        seconds -= sign * (hours * 3600 + minutes * 60)
    return Stamp(seconds * 10**9 + int((frac or "").ljust(9, "0")), zone is not None, value)


def parse_date(value: str) -> datetime.date | None:
    """``yyyy-mm-dd`` as a date (None: not of that form)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        return None
    try:
        return datetime.date.fromisoformat(value.strip())
    except ValueError:
        return None


def cast_value(value: Any, kind: str, to: str, params: list[int],
               fail: Callable[[str], InvalidPredicateError]) -> tuple[Any, str]:
    """``CAST(value AS to(params))`` of a literal of ``kind`` (not NULL) as ``(value, kind)`` (see the module
    docstring); ``fail(why)`` makes the error for a refused cast."""
    text = value if kind == "text" else None
    bad = fail(f"the value is not exactly of type {to}")
    if to == "DATE":
        day = parse_date(text) if text is not None else (value if kind == "date" else None)
        if day is None:
            raise fail("expected a date as 'yyyy-mm-dd'")
        return day, "date"
    if to in ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ"):
        stamp = parse_stamp(text) if text is not None else None
        if kind == "date":
            stamp = parse_stamp(value.isoformat())
        if stamp is None:
            raise fail("expected a timestamp as 'yyyy-mm-dd hh:mm:ss[.fffffffff][+hh:mm]'")
        if to == "TIMESTAMPNTZ" and stamp.zoned:
            raise fail("a TIMESTAMP_NTZ has no time zone")
        return stamp, "timestamp"
    if to in _INT_BITS or to in ("DECIMAL", "DOUBLE", "FLOAT"):
        try:
            number = number_of(text) if text is not None else (value if kind in _NUMBERS else None)
        except InvalidPredicateError as exc:
            raise fail(str(exc)) from None
        if number is None:
            raise bad
        return _cast_number(number, to, params, fail), "int" if to in _INT_BITS else (
            "decimal" if to == "DECIMAL" else "double")
    if to == "TEXT":
        return spark_text(value, kind, fail), "text"
    if to == "BOOLEAN" and (kind == "bool" or (text or "").strip().lower() in ("true", "false")):
        return (value if kind == "bool" else text.strip().lower() == "true"), "bool"  # type: ignore[union-attr]
    raise bad


def _cast_number(number: int | Decimal | float, to: str, params: list[int],
                 fail: Callable[[str], InvalidPredicateError]) -> Any:
    if isinstance(number, float) and not isfinite(number):
        if to in ("DOUBLE", "FLOAT"):
            return number
        raise fail(f"{number} is not a finite number")
    if to == "DOUBLE":
        try:
            x = float(number)
        except OverflowError:
            x = float("inf")
        if not isfinite(x):
            raise fail(f"{number} is beyond the range of a double")
        return x
    if to == "FLOAT":
        f = nearest_float32(number)
        if f is None:
            raise fail(f"{number} is beyond the range of a FLOAT")
        return f
    exact = Fraction(number)
    if to == "DECIMAL":
        p, s = (params + [10, 0][len(params):])[:2]
        if not 1 <= p <= 38 or not 0 <= s <= p:
            raise fail(f"DECIMAL({p}, {s}) is not a decimal type (precision 1..38, scale 0..precision)")
        if isinstance(number, float):
            raise fail("a double cast to a DECIMAL: write the number without an exponent (1.5, not 1.5e0)")
        scaled = exact * 10**s
        if scaled.denominator != 1:
            raise fail(f"{number} has more than {s} decimal places: the cast would round it (Spark rounds half up)")
        if abs(scaled.numerator) >= 10**p:
            raise fail(f"{number} does not fit DECIMAL({p}, {s})")
        return Decimal(scaled.numerator).scaleb(-s, context=EXACT)
    if exact.denominator != 1:
        raise fail(f"{number} is not a whole number: the cast would drop its fraction")
    bits = _INT_BITS[to]
    if not -(2 ** (bits - 1)) <= exact.numerator < 2 ** (bits - 1):
        raise fail(f"{exact.numerator} is outside the range of {to}")
    return exact.numerator


def nearest_float32(number: int | Decimal | float) -> float | None:
    """The float32 nearest ``number`` (ties to even), as a double; None beyond a float32's range. A double is
    rounded once (Java's ``(float) d``); an integer or a decimal from its exact value (``BigDecimal.floatValue``),
    not through a double."""
    try:
        x = float(number)
        f: float = struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return None
    if isinstance(number, float) or (f == 0 and number == 0):
        return f
    exact, sign = abs(Fraction(number)), -1 if number < 0 else 1
    bits = struct.unpack("<I", struct.pack("<f", abs(f)))[0]
    best: tuple[Fraction, int, int] | None = None
    for b in (bits - 1, bits, bits + 1):  # rounding through a double can land one step off
        if b < 0 or b >= 0x7F800000:
            continue
        c = Fraction(struct.unpack("<f", struct.pack("<I", b))[0])
        key = (abs(c - exact), b % 2, b)
        best = key if best is None or key < best else best
    assert best is not None
    return sign * float(struct.unpack("<f", struct.pack("<I", best[2]))[0])


def spark_text(value: Any, kind: str, fail: Callable[[str], InvalidPredicateError]) -> str:
    """Spark's ``CAST(value AS STRING)``, or refused where lakefmt cannot give it exactly."""
    if kind == "text":
        return str(value)
    if kind == "int":
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "date":
        return str(value.isoformat())
    if kind == "decimal" and value.as_tuple().exponent <= 0 and value.adjusted() >= -6:
        return str(value.copy_abs() if value.is_zero() else value)  # Java's BigDecimal text; no negative zero
    raise fail(f"the text of {'a double' if kind == 'double' else 'a ' + kind} is Java's and Spark's (formatting, "
               "time zone); write the text literal instead")
