"""Consumers, the pure parts: the consumer file's codec and its refusals (hostile bytes), the id rules, and how
holds cap an expiration (never more deleted than without them)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefmt.errors import CorruptMetadataError, InvalidConsumerIdError, UnsupportedFormatVersionError
from lakefmt.maintenance import FileClass, Hold, apply_holds, classify, select_expired
from lakefmt.options import InvalidOptionError, TableOptions
from lakefmt.spec import CommitKind, Consumer, Snapshot, layout
from lakefmt.spec.consumer import MAX_SNAPSHOT_ID, check_consumer_id, parse_consumer_name


def _snap(i: int, time_millis: int = 0) -> Snapshot:
    return Snapshot(
        id=i,
        schema_id=0,
        base_manifest_list="b",
        base_manifest_list_size=0,
        delta_manifest_list="d",
        delta_manifest_list_size=0,
        commit_user="u",
        commit_identifier=i,
        commit_kind=CommitKind.APPEND,
        time_millis=time_millis,
        total_record_count=0,
        delta_record_count=0,
    )


# -- the file ----------------------------------------------------------------------------------------------------


def test_consumer_file_round_trip_and_layout() -> None:
    c = Consumer("silver-job", 42, 1_795_000_000_123)
    data = c.to_json()
    assert orjson.loads(data) == {
        "version": 1,
        "consumerId": "silver-job",
        "nextSnapshot": 42,
        "timeMillis": 1_795_000_000_123,
    }
    assert Consumer.from_json(data) == c
    assert layout.consumer_path("silver-job") == "consumer/consumer-silver-job"
    assert parse_consumer_name("consumer-silver-job") == "silver-job"
    # unknown fields are ignored (a later version may add optional ones)
    assert Consumer.from_json(orjson.dumps({**orjson.loads(data), "owner": "x"})) == c


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b'{"version":1,"consumerId":"a","nextSnap',  # truncated
        b"[1, 2]",
        b"\x00\x01garbage",
        b'{"version":1,"consumerId":"a","nextSnapshot":-1,"timeMillis":1}',
        b'{"version":1,"consumerId":"a","nextSnapshot":9223372036854775808,"timeMillis":1}',
        b'{"version":1,"consumerId":"a","nextSnapshot":1.5,"timeMillis":1}',
        b'{"version":1,"consumerId":"a","nextSnapshot":true,"timeMillis":1}',
        b'{"version":1,"consumerId":"a","nextSnapshot":"7","timeMillis":1}',
        b'{"version":1,"consumerId":"a","timeMillis":1}',
        b'{"version":1,"consumerId":"a","nextSnapshot":3}',
        b'{"version":1,"consumerId":"../a","nextSnapshot":3,"timeMillis":1}',
        b'{"consumerId":"a","nextSnapshot":3,"timeMillis":1}',
    ],
)
def test_hostile_consumer_files_are_corrupt_never_a_position(data: bytes) -> None:
    with pytest.raises(CorruptMetadataError, match="consumer file"):
        Consumer.from_json(data)


def test_a_newer_format_version_is_refused_as_such() -> None:
    with pytest.raises(UnsupportedFormatVersionError, match="upgrade lakefmt"):
        Consumer.from_json(b'{"version":99,"consumerId":"a","nextSnapshot":3,"timeMillis":1}')


def test_extreme_but_valid_positions_parse() -> None:
    """0 (holds everything) and the largest id (holds nothing) are positions, not corruption."""
    for n in (0, MAX_SNAPSHOT_ID):
        assert Consumer.from_json(Consumer("a", n, 0).to_json()).next_snapshot == n


# -- ids ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("good", ["a", "silver", "Silver_job-2.v1", "_x", "0", "a" * 200, "a..b"])
def test_valid_consumer_ids(good: str) -> None:
    assert check_consumer_id(good) == good
    assert parse_consumer_name(f"consumer-{good}") == good


BAD_IDS = ["", ".", "..", "../x", "a/b", "a\\b", "/abs", "-x", ".hidden", "a b", "x\n", "a\x00", "\x7f", "a*", "é"]


@pytest.mark.parametrize("bad", [*BAD_IDS, "a" * 201])
def test_invalid_consumer_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidConsumerIdError, match="consumer id"):
        check_consumer_id(bad)
    assert parse_consumer_name(f"consumer-{bad}") is None


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidConsumerIdError):
        check_consumer_id(7)


@pytest.mark.parametrize("name", ["LATEST", ".consumer-a.tmp-0123", "consumer", "consumer-", "notes.txt", "x-a"])
def test_other_names_are_not_consumers(name: str) -> None:
    assert parse_consumer_name(name) is None


def test_consumer_files_are_their_own_kind_in_reports() -> None:
    assert classify("consumer/consumer-silver") is FileClass.CONSUMER
    assert classify("consumer/.consumer-silver.tmp-0123456789abcdef0123456789abcdef") is FileClass.TEMP


# -- expiration time ---------------------------------------------------------------------------------------------


def test_expiration_time_option_and_expired() -> None:
    assert TableOptions.from_map({}).consumer_expiration_ms is None
    assert TableOptions.from_map({"consumer.expiration-time": "7d"}).consumer_expiration_ms == 7 * 86_400_000
    with pytest.raises(InvalidOptionError, match=r"consumer\.expiration-time"):
        TableOptions.from_map({"consumer.expiration-time": "soon"})
    c = Consumer("a", 3, 1_000_000)
    assert not c.expired(None, 10**15)  # unset: never
    assert not c.expired(60_000, 1_060_000)  # exactly the expiration time: still live
    assert c.expired(60_000, 1_060_001)
    assert not c.expired(60_000, 0)  # recorded "in the future" (a fast clock): live, the safe side


# -- holds -------------------------------------------------------------------------------------------------------


def test_holds_cap_the_expired_run_and_say_how_much_each_kept() -> None:
    snaps = [_snap(i) for i in range(3, 11)]  # retained 3..10
    count, held = apply_holds(snaps, 6, [Hold("consumer", "a", 5), Hold("consumer", "b", 7)])
    assert count == 2  # 3 and 4 expire; 5.. kept by "a"
    assert [(h.hold.name, h.snapshots) for h in held] == [("a", 4), ("b", 2)]
    assert held[0].to_dict() == {"kind": "consumer", "name": "a", "snapshot_id": 5, "snapshots_held": 4}
    assert apply_holds(snaps, 6, [Hold("consumer", "z", 0)])[0] == 0  # at 0: everything
    assert apply_holds(snaps, 6, [Hold("consumer", "z", 1)])[0] == 0  # below the earliest: everything
    for past_the_latest in (11, MAX_SNAPSHOT_ID):  # nothing held
        count, held = apply_holds(snaps, 6, [Hold("consumer", "z", past_the_latest)])
        assert count == 6 and held[0].snapshots == 0
    assert apply_holds(snaps, 6, []) == (6, ())


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 30),
    retain_max=st.integers(1, 30),
    positions=st.lists(st.integers(-5, 40), max_size=4),
)
def test_holds_never_expire_more_than_the_rules_alone(n: int, retain_max: int, positions: list[int]) -> None:
    snaps = [_snap(i) for i in range(1, n + 1)]
    alone = select_expired(snaps, 1, retain_max, None, 0)
    count, held = apply_holds(snaps, alone, [Hold("consumer", str(i), p) for i, p in enumerate(positions)])
    assert 0 <= count <= alone
    for h in held:
        assert all(s.id < h.hold.snapshot_id for s in snaps[:count])  # no held snapshot expires
        assert h.snapshots == sum(1 for s in snaps[:alone] if s.id >= h.hold.snapshot_id)
