"""The rules the API, the CLI and the Spark source share, each kept in one place: durations and the orphan-age
default (lakefmt.options) and instants written as text (lakefmt.read.scan.parse_as_of)."""

from __future__ import annotations

import datetime
import inspect

import pytest

import lakefmt
import lakefmt.table
from lakefmt.cli import build_parser
from lakefmt.errors import InvalidTimestampError
from lakefmt.maintenance import orphans
from lakefmt.options import InvalidOptionError
from lakefmt.read.scan import parse_as_of
from lakefmt.units import (
    DEFAULT_ORPHAN_OLDER_THAN,
    DEFAULT_ORPHAN_OLDER_THAN_MS,
    duration_ms,
    format_duration_ms,
    parse_duration,
    parse_duration_ms,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime.timedelta(days=2), 2 * 86_400_000),
        ("90m", 5_400_000),
        ("250ms", 250),  # a string carries its unit ("250" is refused: tests/unit/test_time_units.py)
        (3, 3000),  # a number: seconds
        (1.5, 1500),
        (0, 0),
    ],
)
def test_duration_ms(value: lakefmt.table.Duration, expected: int) -> None:
    assert duration_ms(value) == expected
    assert lakefmt.table.duration_ms(value) == expected  # the old public name still works


def test_duration_ms_refusals_name_the_argument() -> None:
    with pytest.raises(InvalidOptionError, match="older_than"):
        duration_ms("7 weeks")
    with pytest.raises(ValueError, match="negative"):
        duration_ms(-1)
    with pytest.raises(TypeError):
        duration_ms(True)


def test_parse_duration_and_its_inverse() -> None:
    assert parse_duration("12h") == datetime.timedelta(hours=12)
    with pytest.raises(InvalidOptionError, match="too long"):
        parse_duration("99999999999999999999d")
    for text in ("1d", "12h", "90m", "45s", "250ms", "0ms"):
        assert format_duration_ms(parse_duration_ms(text)) == text
    assert format_duration_ms(86_400_000 * 7) == "7d"


def test_one_orphan_age_default() -> None:
    assert datetime.timedelta(days=1) == DEFAULT_ORPHAN_OLDER_THAN
    assert DEFAULT_ORPHAN_OLDER_THAN_MS == 86_400_000 == orphans.DEFAULT_OLDER_THAN_MS
    assert inspect.signature(lakefmt.Table.remove_orphan_files).parameters["older_than"].default == (
        DEFAULT_ORPHAN_OLDER_THAN
    )
    assert inspect.signature(orphans.remove_orphan_files).parameters["older_than_ms"].default == (
        DEFAULT_ORPHAN_OLDER_THAN_MS
    )
    args = build_parser().parse_args(["orphan-clean", "/some/table"])
    assert args.older_than == DEFAULT_ORPHAN_OLDER_THAN


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1795314883376", 1_795_314_883_376),
        (" 12 ", 12),
        ("-5", -5),
        ("2026-11-22T02:34:43.376Z", 1_795_314_883_376),
        ("2026-11-22T02:34:43.376+00:00", 1_795_314_883_376),
        ("2026-11-22T03:34:43.376+01:00", 1_795_314_883_376),
        ("2026-11-22T02:34:43.376", 1_795_314_883_376),  # no offset: UTC
        ("2026-11-22", 1_795_305_600_000),
    ],
)
def test_parse_as_of(text: str, expected: int) -> None:
    assert parse_as_of(text) == expected


def test_parse_as_of_refuses_text_that_is_no_instant() -> None:
    with pytest.raises(InvalidTimestampError, match="yesterday") as info:
        parse_as_of("yesterday")
    assert isinstance(info.value, ValueError)
