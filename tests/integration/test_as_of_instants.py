"""Issue 22, "Time and units": every interface takes an instant by one rule (a datetime, naive = UTC; an
ISO-8601 string; whole epoch milliseconds; a float refused), and the errors print instants in ISO 8601, UTC."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, sorted_ids

import lakefmt
from lakefmt.errors import InvalidTimestampError, SnapshotNotFoundError, TagNotFoundError
from lakefmt.spec.instants import format_instant

SCHEMA = pa.schema([("id", pa.int64())])


def _two_snapshots(store: Any) -> lakefmt.Table:
    t = create_table_in(store, SCHEMA)
    t.append(pa.table({"id": [1]}, schema=SCHEMA))
    time.sleep(0.01)
    t.append(pa.table({"id": [2]}, schema=SCHEMA))
    return t


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time 5:30 hours east of UTC, so that reading a naive datetime as local time shows."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_as_of_takes_iso_strings_and_naive_datetimes_as_utc(store: Any, far_from_utc: None) -> None:
    t = _two_snapshots(store)
    first = t.snapshot(1).time_millis
    assert t.scan(as_of=format_instant(first)).snapshot.id == 1
    assert sorted_ids(t, as_of=format_instant(first)) == [1]
    naive = datetime.datetime.fromtimestamp(first / 1000, datetime.UTC).replace(tzinfo=None)
    assert t.scan(as_of=naive).snapshot.id == 1  # it used to be read as local time: 5:30 h earlier, no snapshot
    assert t.plan_restore(as_of=format_instant(first)).target.id == 1
    assert t.restore(as_of=naive) is not None and sorted_ids(t) == [1]


def test_as_of_refuses_float_seconds(store: Any) -> None:
    t = _two_snapshots(store)
    with pytest.raises(InvalidTimestampError, match=r"int\(time\.time\(\) \* 1000\)"):
        t.scan(as_of=time.time())  # type: ignore[arg-type]
    with pytest.raises(InvalidTimestampError, match="float"):
        t.restore(as_of=float(t.snapshot(1).time_millis))  # type: ignore[arg-type]


def test_no_snapshot_at_an_instant_prints_it_in_iso_8601(store: Any) -> None:
    t = _two_snapshots(store)
    first = t.snapshot(1).time_millis
    with pytest.raises(SnapshotNotFoundError) as info:
        t.scan(as_of=first - 1)
    message = str(info.value)
    assert format_instant(first - 1) in message and format_instant(first) in message, message
    assert "since the epoch" not in message and str(first) not in message
    with pytest.raises(SnapshotNotFoundError, match="seconds") as info:  # whole seconds where milliseconds go
        t.scan(as_of=first // 1000)
    assert format_instant(first // 1000) in str(info.value)


def test_an_expired_tag_says_when_it_expired(store: Any) -> None:
    t = _two_snapshots(store)
    tag = t.create_tag("brief", 1, retain=0.05)
    time.sleep(0.1)
    with pytest.raises(TagNotFoundError) as info:
        t.scan(tag="brief")
    assert tag.expires_millis is not None and format_instant(tag.expires_millis) in str(info.value)
    assert " ms ago" not in str(info.value)
