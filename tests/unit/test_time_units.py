"""Issue 22, "Time and units: one meaning everywhere": a number of seconds is a duration in Python and nothing
else; text (the CLI, duration strings, table options, Spark options) must carry its unit; an instant is a
datetime (naive = UTC), an ISO-8601 string or whole epoch milliseconds, and a float is refused rather than
guessed at; errors print instants in ISO 8601, UTC."""

from __future__ import annotations

import datetime

import pytest

from lakefmt.cli import build_parser
from lakefmt.errors import InvalidOptionError, InvalidTimestampError
from lakefmt.options import TableOptions
from lakefmt.spec.instants import format_instant, parse_instant, to_millis
from lakefmt.units import duration_ms, parse_duration_ms

UTC = datetime.UTC
MOMENT_MS = 1_795_314_883_376  # 2026-11-22T02:34:43.376Z


@pytest.mark.parametrize("text", ["5", "250", " 12 ", "0"])
def test_a_duration_written_as_a_bare_number_is_refused_with_the_accepted_forms(text: str) -> None:
    for parse in (parse_duration_ms, duration_ms):
        with pytest.raises(InvalidOptionError) as info:
            parse(text)
        message = str(info.value)
        assert "unit" in message and "7d" in message and "PT1H" in message, message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", 250),
        ("90s", 90_000),
        ("30min", 1_800_000),
        ("30m", 1_800_000),
        ("12h", 43_200_000),
        ("7d", 7 * 86_400_000),
        ("PT1H", 3_600_000),
        ("pt30m", 1_800_000),
        ("P7D", 7 * 86_400_000),
        ("P1DT12H", 36 * 3_600_000),
        ("PT1.5S", 1_500),
    ],
)
def test_durations_with_a_unit_and_iso_8601(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected
    assert duration_ms(text) == expected


def test_a_python_number_is_seconds() -> None:
    assert duration_ms(5) == 5_000
    assert duration_ms(0.25) == 250


def test_the_cli_refuses_a_bare_number_of_older_than(capsys: pytest.CaptureFixture[str]) -> None:
    """``lakefmt expire T --older-than 5`` read 5 as milliseconds and expired the whole history."""
    for command in ("expire", "orphan-clean"):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args([command, "/some/table", "--older-than", "5"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "--older-than" in err and "unit" in err and "5d" in err, err
    args = build_parser().parse_args(["expire", "/some/table", "--older-than", "PT12H"])
    assert args.older_than == datetime.timedelta(hours=12)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["expire", "--help"])
    assert "PT1H" in capsys.readouterr().out


def test_table_options_refuse_a_bare_duration_when_set_and_read_stored_ones_as_the_format_says() -> None:
    with pytest.raises(InvalidOptionError, match=r"snapshot\.time-retained.*unit"):
        TableOptions.check_keys({"snapshot.time-retained": "3600"})
    TableOptions.check_keys({"snapshot.time-retained": "1h"})
    # a table written before keeps working: the format reads stored plain digits as milliseconds
    assert TableOptions.from_map({"snapshot.time-retained": "3600000"}).snapshot_time_retained_ms == 3_600_000


# -- instants ----------------------------------------------------------------------------------------


def test_a_naive_datetime_is_utc_everywhere() -> None:
    naive = datetime.datetime(2026, 11, 22, 2, 34, 43, 376_000)
    assert to_millis(naive) == MOMENT_MS == to_millis(naive.replace(tzinfo=UTC))
    assert to_millis(naive) == parse_instant("2026-11-22T02:34:43.376")
    offset = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    assert to_millis(naive.replace(tzinfo=UTC).astimezone(offset)) == MOMENT_MS


@pytest.mark.parametrize(
    "text", ["2026-11-22T02:34:43.376Z", "2026-11-22T03:34:43.376+01:00", "2026-11-22 02:34:43.376", "1795314883376"]
)
def test_an_iso_string_or_digits_are_an_instant_in_python_too(text: str) -> None:
    assert to_millis(text) == MOMENT_MS


def test_a_date_is_its_midnight_utc() -> None:
    assert to_millis(datetime.date(2026, 11, 22)) == 1_795_305_600_000 == to_millis("2026-11-22")


def test_ints_are_epoch_milliseconds() -> None:
    assert to_millis(MOMENT_MS) == MOMENT_MS


@pytest.mark.parametrize("value", [1_795_710_225.7838752, 1_795_314_883.376, 1.795314883376e12, 1e300, float("nan")])
def test_a_float_is_refused_never_read_as_milliseconds(value: float) -> None:
    """``scan(as_of=time.time())`` read float seconds as milliseconds (an instant in January 1970)."""
    with pytest.raises(InvalidTimestampError) as info:
        to_millis(value)
    message = str(info.value)
    assert "float" in message and "int(time.time() * 1000)" in message and "ISO-8601" in message, message


def test_text_that_is_no_instant_names_the_forms() -> None:
    with pytest.raises(InvalidTimestampError, match=r"ISO-8601.*epoch milliseconds") as info:
        to_millis("yesterday")
    assert "yesterday" in str(info.value)
    with pytest.raises(InvalidTimestampError, match="float"):
        parse_instant("1795314883.376")


def test_instants_print_as_iso_8601_utc() -> None:
    assert format_instant(MOMENT_MS) == "2026-11-22T02:34:43.376Z"
    assert format_instant(1_795_305_600_000) == "2026-11-22T00:00:00.000Z"
    assert "ms" in format_instant(2**62)  # beyond year 9999: the milliseconds themselves, with their unit
