"""Sizes and durations written as text, and the duration rules the API and the CLI share.

Sizes accept ``b``, ``kb``, ``mb``, ``gb`` suffixes (binary multiples); durations accept ``ms``, ``s``, ``m``
or ``min``, ``h``, ``d`` and ISO-8601 (``PT1H``, ``P7D``). A duration written as text must carry its unit: a bare
number is refused wherever it is typed (only a number in Python, not text, is a duration: seconds). Also the home of
the orphan-age default (:data:`DEFAULT_ORPHAN_OLDER_THAN`). Imports only :mod:`lakefmt.errors`.
"""

from __future__ import annotations

import datetime
import math
import numbers
import re

from lakefmt.errors import InvalidOptionError

__all__ = [
    "DEFAULT_ORPHAN_OLDER_THAN",
    "DEFAULT_ORPHAN_OLDER_THAN_MS",
    "DURATION_FORMS",
    "MAX_DURATION_MS",
    "Duration",
    "duration_ms",
    "format_duration_ms",
    "parse_duration",
    "parse_duration_ms",
    "parse_size",
]

_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|k|mb|m|gb|g|kib|mib|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_ISO_DURATION = re.compile(
    r"^\s*P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,3})?)S)?)?\s*$",
    re.IGNORECASE,
)
_ISO_MS = {"w": 7 * 86_400_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000}
#: The forms a duration written as text takes, for messages and help texts.
DURATION_FORMS = "500ms, 90s, 30min (or 30m), 12h, 7d, or ISO-8601 such as PT1H, P7D"
_MAX_TIMEDELTA_MS = datetime.timedelta.max // datetime.timedelta(milliseconds=1)

#: A duration as the API takes it: a ``timedelta``, a duration string (``"90m"``, ``"12h"``, ``"7d"``) or seconds.
Duration = datetime.timedelta | str | int | float

#: Orphan removal deletes an unreferenced file only when it was last modified longer ago than this, by default,
#: so the files of a commit in flight are never touched (a writer must publish within it: format §17).
DEFAULT_ORPHAN_OLDER_THAN = datetime.timedelta(days=1)
DEFAULT_ORPHAN_OLDER_THAN_MS = DEFAULT_ORPHAN_OLDER_THAN // datetime.timedelta(milliseconds=1)


def parse_size(text: str, key: str = "size") -> int:
    """``"8mb"`` -> 8388608."""
    m = _SIZE.match(str(text))
    if m is None:
        raise InvalidOptionError(f"{key}: {text!r} is not a size (examples: 512kb, 8mb, 1gb)")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _SIZE_UNITS[unit]


def parse_duration_ms(text: str, key: str = "duration") -> int:
    """A duration written as text, in milliseconds: ``"7d"`` -> 604800000, ``"PT1H"`` -> 3600000. A bare number
    (``"5"``) is refused: its unit would be a guess (``--older-than 5`` used to mean 5 milliseconds)."""
    s = str(text).strip()
    if s.isdigit():
        raise InvalidOptionError(
            f"{key}: {text!r} has no unit: write {s}s, {s}min, {s}h or {s}d (durations: {DURATION_FORMS})"
        )
    m = _DURATION.match(s)
    if m is not None:
        return int(m.group(1)) * _DURATION_MS[m.group(2).lower()]
    iso = _ISO_DURATION.match(s)
    if iso is None or not any(iso.groupdict().values()) or s.upper().endswith("T"):
        raise InvalidOptionError(f"{key}: {text!r} is not a duration ({DURATION_FORMS})")
    parts = iso.groupdict()
    ms = sum(int(parts[u]) * _ISO_MS[u] for u in ("w", "d", "h", "m") if parts[u])
    return ms + (round(float(parts["s"]) * 1000) if parts["s"] else 0)


def parse_duration(text: str, key: str = "duration") -> datetime.timedelta:
    """``"90m"`` -> ``timedelta(minutes=90)``; a duration too long for a ``timedelta`` is refused."""
    ms = parse_duration_ms(text, key)
    if ms > _MAX_TIMEDELTA_MS:
        raise InvalidOptionError(f"{text!r} is too long (at most {datetime.timedelta.max.days}d)")
    return datetime.timedelta(milliseconds=ms)


def format_duration_ms(ms: int) -> str:
    """The inverse of :func:`parse_duration_ms` in the largest unit that fits exactly: 86400000 -> ``"1d"``."""
    for unit in ("d", "h", "m", "s"):
        if ms and ms % _DURATION_MS[unit] == 0:
            return f"{ms // _DURATION_MS[unit]}{unit}"
    return f"{ms}ms"


def duration_ms(value: Duration, what: str = "older_than") -> int:
    """Milliseconds of a timedelta, a duration string with its unit (``"7d"``, ``"PT12H"``; a string without
    one is refused) or a number of seconds; never negative."""
    if isinstance(value, datetime.timedelta):
        seconds: float = value.total_seconds()
    elif isinstance(value, str):
        ms = parse_duration_ms(value, what)
        if ms < 0:
            raise InvalidOptionError(f"{what} must not be negative, got {value!r}")
        return ms
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy's integers and floats too
        seconds = float(value) if not isinstance(value, numbers.Integral) else int(value)
    else:
        raise TypeError(f"a duration must be a timedelta, a string like '7d' or seconds, got {value!r}")
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise InvalidOptionError(f"{what} must be a finite number of seconds, got {value!r}")
    if seconds < 0:
        raise InvalidOptionError(f"{what} must not be negative, got {value!r}")
    ms = int(seconds * 1000)
    if ms > MAX_DURATION_MS:
        raise InvalidOptionError(
            f"{what} must be a positive duration of at most about 292 million years (int64 milliseconds), "
            f"got {value!r}"
        )
    return ms


#: the longest duration taken: what an int64 of milliseconds holds
MAX_DURATION_MS = 2**63 - 1
