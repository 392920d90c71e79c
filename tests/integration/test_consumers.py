"""Consumers on every backend: a reader's recorded position (``consumer/consumer-<id>``) holds snapshots back
from expiration (by ``lakefmt expire``, the API and the expiration after commits) until it is older than
``consumer.expiration-time``; orphan-clean never deletes a record; hostile records never make expire delete
more than it would without consumers."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.errors import CorruptMetadataError, UnsupportedFormatVersionError
from lakefmt.maintenance import FileClass, apply_expiration, plan_expiration
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64())])
HOUR_S = 3600

#: for tests whose logic does not depend on the backend: S3 (moto) costs ~20 ms a request
local_and_memory = pytest.mark.parametrize("store", ["local", "memory"], indirect=True)


def _table(store: Any, commits: int = 6, **options: str) -> lakefmt.Table:
    """A table with ``commits`` appends, one snapshot each (no automatic compaction: the ids are the tests')."""
    t = create_table_in(store, SCHEMA, options={"compaction.auto": "false", **options})
    for i in range(commits):
        t.append(pa.table({"id": [i]}))
    return t


def _ids(t: lakefmt.Table) -> list[int]:
    return [s.id for s in t.snapshots()]


def _at(t: lakefmt.Table, seconds_ago: float) -> lakefmt.Table:
    """The same table, with a clock ``seconds_ago`` behind (consumer records then look that old)."""
    return lakefmt.Table(t.io, t._store, clock=lambda: time.time() - seconds_ago)


# -- the API -----------------------------------------------------------------------------------------------------


def test_record_move_list_and_delete_consumers(store: Any) -> None:
    t = _table(store, commits=2)
    assert t.consumers() == []
    before = int(time.time() * 1000)
    t.set_consumer("silver", 2)
    t.set_consumer("gold", 1)
    t.set_consumer("silver", 3)  # moves in place
    other = lakefmt.open_table(t.uri, storage_options=store.storage_options)  # another process's view
    got = other.consumers()
    assert [(c.consumer_id, c.next_snapshot) for c in got] == [("gold", 1), ("silver", 3)]
    assert all(before <= c.time_millis <= int(time.time() * 1000) for c in got)
    assert isinstance(got[0], lakefmt.Consumer)
    files = file_listing(t.io)
    assert {p for p in files if p.startswith("consumer/")} == {"consumer/consumer-gold", "consumer/consumer-silver"}
    record = orjson.loads(t.io.read("consumer/consumer-silver"))
    assert record == {"version": 1, "consumerId": "silver", "nextSnapshot": 3, "timeMillis": got[1].time_millis}
    t.set_consumer("silver", 1)  # a stream restarted from an older checkpoint may move back
    assert other.consumers()[1].next_snapshot == 1

    assert other.consumer("silver") == other.consumers()[1] and other.consumer("nobody") is None
    other.delete_consumer("silver")
    assert [c.consumer_id for c in t.consumers()] == ["gold"]
    with pytest.raises(lakefmt.ConsumerNotFoundError, match=r"no consumer 'silver' \(its consumers: gold\)"):
        t.delete_consumer("silver")
    for bad in ("", "..", "../silver", "a/b", "x\n"):
        with pytest.raises(lakefmt.InvalidConsumerIdError):
            t.set_consumer(bad, 1)
        with pytest.raises(lakefmt.InvalidConsumerIdError):
            t.delete_consumer(bad)
    with pytest.raises(lakefmt.InvalidSnapshotIdError, match="1 or more"):
        t.set_consumer("gold", 0)
    with pytest.raises(TypeError):
        t.set_consumer("gold", True)  # type: ignore[arg-type]
    assert [(c.consumer_id, c.next_snapshot) for c in t.consumers()] == [("gold", 1)]


# -- expiration --------------------------------------------------------------------------------------------------


def test_expire_keeps_every_snapshot_a_consumer_still_needs(store: Any) -> None:
    t = _table(store)  # snapshots 1..6, one row each
    t.set_consumer("silver", 3)  # has read 1 and 2
    t.set_consumer("gold", 5)
    report = t.expire_snapshots(retain_max=1)
    assert report.expired_snapshots == [1, 2] and report.kept_snapshots == (3, 6)
    assert [(h.hold.name, h.hold.snapshot_id, h.snapshots) for h in report.held_back] == [
        ("gold", 5, 1),
        ("silver", 3, 3),
    ]
    assert report.to_dict()["held_back"][1] == {
        "kind": "consumer",
        "name": "silver",
        "snapshot_id": 3,
        "snapshots_held": 3,
    }
    assert _ids(t) == [3, 4, 5, 6]
    # what silver has still to read is all there
    assert sorted(t.scan(from_snapshot=2, to_snapshot=6).to_arrow().column("id").to_pylist()) == [2, 3, 4, 5]
    t.set_consumer("silver", 7)  # caught up: one past the latest
    t.delete_consumer("gold")
    assert t.expire_snapshots(retain_max=1).expired_snapshots == [3, 4, 5]
    assert _ids(t) == [6]


@local_and_memory
def test_expiration_after_commits_respects_consumers(store: Any) -> None:
    t = _table(store, commits=0, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    t.append(pa.table({"id": [0]}))
    t.set_consumer("slow", 1)
    for i in range(1, 6):
        t.append(pa.table({"id": [i]}))
    assert _ids(t) == [1, 2, 3, 4, 5, 6]  # nothing expired: slow has not read snapshot 1
    t.set_consumer("slow", 5)
    t.append(pa.table({"id": [6]}))
    assert _ids(t) == [5, 6, 7]  # max 2, but slow still needs 5


@local_and_memory
def test_a_consumer_past_its_expiration_time_stops_holding_and_is_deleted(store: Any) -> None:
    t = _table(store, **{"consumer.expiration-time": "1h"})
    _at(t, 2 * HOUR_S).set_consumer("gone", 1)  # last recorded two hours ago
    t.set_consumer("live", 4)
    assert _ids(t) == [1, 2, 3, 4, 5, 6]

    dry = t.expire_snapshots(retain_max=1, dry_run=True)
    assert dry.expired_snapshots == [1, 2, 3] and dry.expired_consumers == ["gone"]
    assert dry.deleted[FileClass.CONSUMER] == [("consumer/consumer-gone", len(t.io.read("consumer/consumer-gone")))]
    assert [c.consumer_id for c in t.consumers()] == ["gone", "live"]  # a dry run deletes nothing

    report = t.expire_snapshots(retain_max=1)
    assert report.expired_snapshots == [1, 2, 3] and report.expired_consumers == ["gone"]
    assert [h.hold.name for h in report.held_back] == ["live"]  # "gone" held nothing
    assert [c.consumer_id for c in t.consumers()] == ["live"]
    assert report.to_dict()["expired_consumers"] == ["gone"]
    assert report.to_dict()["files"]["consumers"]["count"] == 1

    # recording the same position again renews a consumer
    _at(t, 2 * HOUR_S).set_consumer("live", 4)
    t.set_consumer("live", 4)
    assert t.expire_snapshots(retain_max=1).expired_snapshots == []


@local_and_memory
def test_a_consumer_that_moves_after_the_plan_keeps_its_record(store: Any) -> None:
    """Expiration deletes a stale record only if it still holds what the plan read: a consumer that came back
    meanwhile is not erased."""
    t = _table(store, commits=3, **{"consumer.expiration-time": "1h"})
    _at(t, 2 * HOUR_S).set_consumer("back", 2)
    plan = plan_expiration(t._store, retain_max=1)
    assert [c.consumer_id for c in plan.expired_consumers] == ["back"]
    t.set_consumer("back", 3)  # the consumer records a new position between plan and apply
    report = apply_expiration(t.io, t._store, plan)
    assert report.expired_consumers == [] and FileClass.CONSUMER not in report.deleted
    assert [(c.consumer_id, c.next_snapshot) for c in t.consumers()] == [("back", 3)]


def test_orphan_clean_never_deletes_consumer_records(store: Any) -> None:
    t = _table(store, commits=2)
    t.set_consumer("a", 2)
    t.set_consumer("b", 1)
    t.io.write("consumer/readme", b"not a consumer, but in consumer/: kept")
    t.io.write("consumer/consumer-a b", b"an id another version might allow: kept")
    tmp = t.io.new_temp_name(layout.consumer_path("a"))
    t.io.write(tmp, b'{"version":1,"consu')  # an interrupted local write's temp file: garbage
    report = t.remove_orphan_files(older_than=0)
    assert report.paths == [tmp]
    assert {p for p in file_listing(t.io) if p.startswith("consumer/")} == {
        "consumer/consumer-a",
        "consumer/consumer-b",
        "consumer/readme",
        "consumer/consumer-a b",
    }
    assert [c.consumer_id for c in t.consumers()] == ["a", "b"]  # the odd names are not consumers


# -- hostile records ---------------------------------------------------------------------------------------------


def _deleted_without_consumers(t: lakefmt.Table, retain_max: int) -> set[str]:
    plan = plan_expiration(t._store, retain_max=retain_max, holds=())
    return {d.path for d in plan.deletions}


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"version":1,"consumerId":"bad","nextSnap',
        b'{"version":1,"consumerId":"bad","nextSnapshot":-4,"timeMillis":1}',
        b'{"version":1,"consumerId":"bad","nextSnapshot":"3","timeMillis":1}',
        b'{"version":1,"consumerId":"other","nextSnapshot":3,"timeMillis":1}',  # another consumer's copy
        b"\xff\xfe garbage",
    ],
    ids=["empty", "truncated", "negative", "string", "wrong-id", "binary"],
)
def test_an_unreadable_record_stops_expiration_with_a_clear_error(local_store: Any, content: bytes) -> None:
    t = _table(local_store, **{"consumer.expiration-time": "1h"})
    t.set_consumer("fine", 2)
    _at(t, 2 * HOUR_S).set_consumer("stale", 1)
    t.io.write("consumer/consumer-bad", content)
    before = file_listing(t.io)
    for dry_run in (True, False):
        with pytest.raises(CorruptMetadataError, match=r"consumer/consumer-bad.*lakefmt consumers URI --delete"):
            t.expire_snapshots(retain_max=1, dry_run=dry_run)
    assert file_listing(t.io) == before  # nothing deleted: not even the stale consumer's record
    with pytest.raises(CorruptMetadataError, match="consumer-bad"):
        t.consumers()
    assert t.consumer("fine") is not None  # one consumer's record does not depend on the others'
    with pytest.raises(CorruptMetadataError, match="consumer-bad"):
        t.consumer("bad")
    t.append(pa.table({"id": [99]}))  # commits go on
    t.delete_consumer("bad")  # the way out the error names
    assert t.expire_snapshots(retain_max=1).expired_snapshots == [1]  # "fine" holds from 2


def test_a_record_from_a_newer_format_stops_expiration(local_store: Any) -> None:
    t = _table(local_store)
    t.io.write("consumer/consumer-new", b'{"version":99,"consumerId":"new","nextSnapshot":1,"timeMillis":1}')
    before = file_listing(t.io)
    with pytest.raises(UnsupportedFormatVersionError, match=r"version 99.*upgrade lakefmt"):
        t.expire_snapshots(retain_max=1)
    assert file_listing(t.io) == before
    with pytest.raises(UnsupportedFormatVersionError):
        t.consumers()


@pytest.mark.parametrize("next_snapshot", [0, 1, 4, 7, 10**12, (1 << 63) - 1])
def test_extreme_positions_never_expire_more_than_without_consumers(local_store: Any, next_snapshot: int) -> None:
    t = _table(local_store)  # 1..6
    t.io.write(
        "consumer/consumer-x",
        orjson.dumps({"version": 1, "consumerId": "x", "nextSnapshot": next_snapshot, "timeMillis": 1}),
    )
    without = _deleted_without_consumers(t, retain_max=1)
    plan = plan_expiration(t._store, retain_max=1)
    assert {d.path for d in plan.deletions} <= without
    assert plan.expired == tuple(range(1, min(max(next_snapshot, 1), 6)))


def test_automatic_expiration_with_an_unreadable_record_keeps_everything(local_store: Any) -> None:
    t = _table(local_store, commits=2, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    assert _ids(t) == [2]
    t.io.write("consumer/consumer-bad", b"{")
    for i in range(3):
        assert t.append(pa.table({"id": [i]})) is not None  # the commit lands; expiration is skipped
    assert _ids(t) == [2, 3, 4, 5]
    t.delete_consumer("bad")
    t.append(pa.table({"id": [9]}))
    assert _ids(t) == [6]


def test_consumer_time_is_the_tables_clock_and_survives_a_reopen(local_store: Any) -> None:
    t = _table(local_store, commits=1)
    past = _at(t, 10 * HOUR_S)
    past.set_consumer("c", 2)
    recorded = lakefmt.open_table(t.uri).consumers()[0].time_millis
    assert abs(recorded - (time.time() - 10 * HOUR_S) * 1000) < 60_000
