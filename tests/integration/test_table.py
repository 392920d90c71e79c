"""The public API end to end: round trips of every Spark type, time travel, incremental reads, overwrite,
exactly-once commits, bounded metadata over many commits, and pruned scans equal to unpruned filtering."""

from __future__ import annotations

import datetime
import decimal
import math
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from helpers import create_table_in
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lakefmt
from lakefmt.errors import SnapshotNotFoundError

UTC = datetime.UTC


@dataclass
class _FastStore:
    kind: str
    base: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def uri(self) -> str:
        return f"{self.base}/{uuid.uuid4().hex}"


@pytest.fixture(params=["local", "memory"])
def fast_store(request: pytest.FixtureRequest, tmp_path: Any) -> _FastStore:
    """Local disk and memory only: for tests whose logic does not depend on the store (S3 runs the rest)."""
    if request.param == "local":
        return _FastStore("local", str(tmp_path))
    return _FastStore("memory", f"memory://lakefmt-{uuid.uuid4().hex}")


def _memory_table(schema: pa.Schema, **kwargs: Any) -> lakefmt.Table:
    return lakefmt.create_table(f"memory://lakefmt-test-{uuid.uuid4().hex}", schema, **kwargs)


def _norm(v: Any) -> Any:
    """A comparable form of a Python value: NaN equals NaN, -0.0 differs from 0.0, nested values too."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(_norm(x) for x in v)
    return v


def _rows(table: pa.Table, key: str = "id") -> list[Any]:
    """Rows sorted by ``key`` in a NaN-safe, order-independent comparable form."""
    return [_norm(r) for r in table.sort_by(key).to_pylist()]


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


# -- every Arrow type Spark produces ---------------------------------------------------------------

D = decimal.Decimal


def spark_types_table() -> pa.Table:
    """One column per Arrow type Spark emits (plus the large_* variants it uses with large var types), with
    nulls in every column and inside nested values, and extreme values."""
    n = 7
    item = pa.struct([("x", pa.list_(pa.int64())), ("y", pa.struct([("z", pa.int64())]))])
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "i8": pa.array([1, None, -128, 127, 0, None, 5], pa.int8()),
            "i16": pa.array([1, None, -32768, 32767, 0, None, 5], pa.int16()),
            "i32": pa.array([1, None, -(2**31), 2**31 - 1, 0, None, 5], pa.int32()),
            "i64": pa.array([1, None, -(2**63), 2**63 - 1, 0, None, 5], pa.int64()),
            "f32": pa.array([1.5, None, float("nan"), float("inf"), -0.0, None, -3.25], pa.float32()),
            "f64": pa.array([1.5, None, float("nan"), float("-inf"), -0.0, None, 5e300], pa.float64()),
            "s": pa.array(["a", None, "", "é😀日本", "x" * 1000, None, "\x00"], pa.string()),
            "ls": pa.array(["a", None, "", "é😀", "y" * 300, None, "z"], pa.large_string()),
            "b": pa.array([b"a", None, b"", b"\x00\xff", b"x" * 1000, None, b"z"], pa.binary()),
            "lb": pa.array([b"a", None, b"", b"\x00", b"q", None, b"z"], pa.large_binary()),
            "bo": pa.array([True, None, False, True, False, None, True]),
            "d": pa.array(
                [
                    datetime.date(2026, 1, 1),
                    None,
                    datetime.date(1, 1, 1),
                    datetime.date(9999, 12, 31),
                    datetime.date(1970, 1, 1),
                    None,
                    datetime.date(1969, 12, 31),
                ],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    datetime.datetime(2026, 1, 1, 12, 0, 0, 123456),
                    None,
                    datetime.datetime(1, 1, 1),
                    datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
                    datetime.datetime(1970, 1, 1),
                    None,
                    datetime.datetime(1969, 12, 31, 23, 59, 59),
                ],
                pa.timestamp("us"),
            ),
            "ts_utc": pa.array([0, None, -1, 2**50, 1, None, 5], pa.timestamp("us", tz="UTC")),
            "ts_la": pa.array([0, None, -1, 2**50, 1, None, 5], pa.timestamp("us", tz="America/Los_Angeles")),
            "dec": pa.array(
                [
                    D("1.5"),
                    None,
                    D("-9999999999999999999999999999.9999999999"),
                    D("0"),
                    D("1234567890123456789012345678.1234567890"),
                    None,
                    D("-0.0000000001"),
                ],
                pa.decimal128(38, 10),
            ),
            "dec_small": pa.array(
                [D("1.50"), None, D("-9.99"), D("0.00"), D("1.00"), None, D("7.77")], pa.decimal128(3, 2)
            ),
            "li": pa.array([[1, None], None, [], [2**31 - 1], [None], None, [1, 2, 3]], pa.list_(pa.int32())),
            "ll": pa.array([["a", None], None, [], ["b"], [None], None, ["c"]], pa.large_list(pa.string())),
            "st": pa.array(
                [
                    {"a": 1, "b": "x"},
                    None,
                    {"a": None, "b": None},
                    {"a": 2, "b": ""},
                    {"a": 3, "b": "y"},
                    None,
                    {"a": None, "b": "z"},
                ],
                pa.struct([("a", pa.int32()), ("b", pa.string())]),
            ),
            "m": pa.array(
                [[("k", 1)], None, [], [("a", None), ("b", 2)], [("c", 3)], None, [("d", 4)]],
                pa.map_(pa.string(), pa.int32()),
            ),
            "nest": pa.array(
                [
                    [{"x": [1], "y": {"z": 1}}],
                    None,
                    [None],
                    [],
                    [{"x": None, "y": None}],
                    None,
                    [{"x": [], "y": {"z": None}}],
                ],
                pa.list_(item),
            ),
            "nul": pa.nulls(n),
        }
    )


def test_round_trip_every_spark_type(store: Any) -> None:
    data = spark_types_table()
    t = create_table_in(store, data.schema)
    assert t.schema() == data.schema
    t.append(data)
    t.append(data.slice(2, 3).set_column(0, "id", pa.array([10, 11, 12], pa.int64())))
    expected = pa.concat_tables([data, data.slice(2, 3).set_column(0, "id", pa.array([10, 11, 12], pa.int64()))])

    reopened = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    for table in (t, reopened):
        out = table.scan().to_arrow()
        assert out.schema == data.schema
        assert [str(f.type) for f in out.schema] == [str(f.type) for f in data.schema]
        assert _rows(out) == _rows(expected)
        batches = list(table.scan().to_batches())
        assert _rows(pa.Table.from_batches(batches, schema=data.schema)) == _rows(expected)
        assert _rows(table.scan().to_dataset().to_table()) == _rows(expected)
    projected = t.scan(columns=["m", "id", "nest"]).to_arrow()
    assert projected.column_names == ["m", "id", "nest"]
    assert _rows(projected) == _rows(expected.select(["m", "id", "nest"]))


def test_round_trip_other_supported_types() -> None:
    """Types Spark does not emit but the format accepts must also round-trip (create_table accepted them)."""
    data = pa.table(
        {
            "id": pa.array([0, 1, 2], pa.int64()),
            "u8": pa.array([0, None, 255], pa.uint8()),
            "u16": pa.array([0, None, 65535], pa.uint16()),
            "u32": pa.array([0, None, 2**32 - 1], pa.uint32()),
            "u64": pa.array([0, None, 2**64 - 1], pa.uint64()),
            "f16": pa.array([1.5, None, -2.0], pa.float32()).cast(pa.float16()),
            "t32": pa.array([0, None, 86399], pa.time32("s")),
            "t64": pa.array([0, None, 86_399_999_999_000], pa.time64("ns")),  # as_py needs whole us
            "ts_s": pa.array([0, None, -1], pa.timestamp("s")),
            "ts_ms": pa.array([0, None, -1], pa.timestamp("ms", tz="Asia/Kolkata")),
            "ts_ns": pa.array([0, None, 4_611_686_018_427_387_000], pa.timestamp("ns")),
            "fb": pa.array([b"0123", None, b"\x00\x00\x00\x00"], pa.binary(4)),
            "d32": pa.array([D("1.25"), None, D("-99999.99")], pa.decimal32(7, 2)),
            "d64": pa.array([D("1.25"), None, D("-99999999999999.9999")], pa.decimal64(18, 4)),
            "d256": pa.array([D("1.25"), None, D("-1" + "0" * 60)], pa.decimal256(76, 2)),
            "mk": pa.array([[("a", 1)], None, []], pa.map_(pa.string(), pa.int8(), keys_sorted=True)),
        }
    )
    t = _memory_table(data.schema)
    t.append(data)
    t.append(data)
    out = t.scan().to_arrow()
    assert out.schema == data.schema
    assert _rows(out) == _rows(pa.concat_tables([data, data]))
    assert _ids(t.scan(filter=pc.field("d32") > D("0")).to_arrow()) == [0, 0]
    assert _ids(t.scan(filter=pc.field("u64") > pa.scalar(2**63, pa.uint64())).to_arrow()) == [2, 2]


def test_round_trip_partitioned_by_each_partition_type(fast_store: Any) -> None:
    store = fast_store
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "s": pa.array(["a", "b", None, "a", "", "b"]),
            "i": pa.array([-1, 0, 1, None, -1, 2**40], pa.int64()),
            "d": pa.array([datetime.date(2026, 11, 1), None, datetime.date(2026, 11, 2)] * 2, pa.date32()),
            "bo": pa.array([True, False, None, True, False, None]),
            "v": pa.array([1.0, 2.0, 3.0, None, float("nan"), -0.0]),
        }
    )
    t = create_table_in(store, data.schema, partition_by=["s", "i", "d", "bo"])
    t.append(data)
    assert _rows(t.scan().to_arrow()) == _rows(data)
    files = t.scan().files()
    assert len(files) == 6  # every row has a distinct partition
    assert all(f.path.count("/") == 4 for f in files)
    for f in files:
        assert set(f.partition) == {"s", "i", "d", "bo"}
    got = t.scan(filter=(pc.field("s") == "a") & (pc.field("i") == -1)).to_arrow()
    assert _ids(got) == [0]
    assert len(t.scan(filter=pc.field("i").is_null()).files()) == 1


# -- history: time travel and incremental reads ---------------------------------------------------


def _batch(ids: Iterable[int], dt: str = "a") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": pa.array([dt] * len(ids), pa.string())})


SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def test_time_travel_by_id_and_timestamp(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    assert t.latest_snapshot() is None
    assert t.snapshots() == []
    assert t.scan().to_arrow().num_rows == 0
    snaps = []
    for i in range(4):
        snap = t.append(_batch(range(10 * i, 10 * i + 3), dt=f"d{i % 2}"))
        assert snap is not None and snap.id == i + 1
        snaps.append(snap)
        time.sleep(0.005)  # distinct commit millis
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4]
    assert t.latest_snapshot() == snaps[-1]
    for k, snap in enumerate(snaps):
        expected = sorted(x for i in range(k + 1) for x in range(10 * i, 10 * i + 3))
        assert t.snapshot(snap.id) == snap
        assert _ids(t.scan(snapshot_id=snap.id).to_arrow()) == expected
        assert t.scan(as_of=snap.time_millis).snapshot.id == snap.id
        as_dt = datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=snap.time_millis)
        assert _ids(t.scan(as_of=as_dt).to_arrow()) == expected
        assert t.scan(as_of=as_dt + datetime.timedelta(microseconds=999)).snapshot.id == snap.id
        if k:
            assert t.scan(as_of=snap.time_millis - 1).snapshot.id == snap.id - 1
        assert snap.total_record_count == len(expected)
        assert snap.delta_record_count == 3
    assert t.scan(as_of=snaps[-1].time_millis + 10**9).snapshot.id == 4
    with pytest.raises(SnapshotNotFoundError):
        t.scan(as_of=snaps[0].time_millis - 1)
    with pytest.raises(SnapshotNotFoundError):
        t.scan(as_of=datetime.datetime(2000, 1, 1, tzinfo=UTC))
    # time travel honours filters and projections too
    old = t.scan(filter=pc.field("dt") == "d0", columns=["id"], snapshot_id=2).to_arrow()
    assert old.column_names == ["id"] and _ids(old) == [0, 1, 2]


def test_incremental_scans_give_only_what_the_range_added(fast_store: Any) -> None:
    store = fast_store
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    for i in range(6):
        t.append(_batch([i * 10, i * 10 + 1], dt="a" if i % 2 else "b"))
    for start in range(0, 6):
        for end in range(start, 7):
            if end == 0:
                continue
            got = _ids(t.scan(from_snapshot=start, to_snapshot=end).to_arrow())
            assert got == sorted(x for i in range(start, end) for x in (i * 10, i * 10 + 1)), (start, end)
    assert _ids(t.scan(from_snapshot=4).to_arrow()) == [40, 41, 50, 51]  # to the latest
    assert _ids(t.scan(from_snapshot=2, to_snapshot=5, filter=pc.field("dt") == "a").to_arrow()) == [30, 31]
    assert _ids(t.scan(from_snapshot=2, to_snapshot=5, filter=pc.field("id") > 35).to_arrow()) == [40, 41]
    with pytest.raises(ValueError):
        t.scan(from_snapshot=5, to_snapshot=3)
    with pytest.raises(SnapshotNotFoundError):
        t.scan(from_snapshot=1, to_snapshot=99)


def test_incremental_scan_across_an_overwrite(fast_store: Any) -> None:
    store = fast_store
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    t.append(_batch([1], "a"))  # 1
    t.append(_batch([2], "b"))  # 2
    t.append(_batch([3], "a"))  # 3
    t.overwrite(_batch([4], "a"), partition={"dt": "a"})  # 4: drops 1 and 3
    t.append(_batch([5], "a"))  # 5
    assert _ids(t.scan(from_snapshot=3, to_snapshot=5).to_arrow()) == [4, 5]
    assert _ids(t.scan(from_snapshot=3, to_snapshot=4).to_arrow()) == [4]
    # 3 added a file that 4 deleted within the range: not part of what the range added
    assert _ids(t.scan(from_snapshot=2, to_snapshot=4).to_arrow()) == [4]
    assert _ids(t.scan().to_arrow()) == [2, 4, 5]


# -- overwrite -------------------------------------------------------------------------------------


def test_overwrite_partition_and_whole_table(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    t.append(pa.concat_tables([_batch([1, 2], "a"), _batch([3], "b"), _batch([4], "c")]))
    t.append(_batch([5], "a"))
    snap = t.overwrite(_batch([10, 11], "a"), partition={"dt": "a"})
    assert snap is not None and snap.commit_kind == lakefmt.CommitKind.OVERWRITE
    assert _ids(t.scan().to_arrow()) == [3, 4, 10, 11]
    assert snap.total_record_count == 4 and snap.delta_record_count == -1
    assert _ids(t.scan(filter=pc.field("dt") == "a").to_arrow()) == [10, 11]
    # a partition that does not exist yet: just adds
    t.overwrite(_batch([20], "new"), partition={"dt": "new"})
    assert _ids(t.scan().to_arrow()) == [3, 4, 10, 11, 20]
    # empty data: the partition is emptied
    t.overwrite(_batch([], "b"), partition={"dt": "b"})
    assert _ids(t.scan().to_arrow()) == [4, 10, 11, 20]
    # the whole table, with data spanning partitions
    whole = t.overwrite(pa.concat_tables([_batch([100], "x"), _batch([101], "y")]))
    assert whole is not None
    assert _ids(t.scan().to_arrow()) == [100, 101]
    assert whole.total_record_count == 2 and whole.total_file_count == 2
    # history is intact
    assert _ids(t.scan(snapshot_id=2).to_arrow()) == [1, 2, 3, 4, 5]
    assert _ids(t.scan(snapshot_id=3).to_arrow()) == [3, 4, 10, 11]
    # the whole table with nothing
    t.overwrite(_batch([], "z"))
    assert t.scan().to_arrow().num_rows == 0
    assert t.latest_snapshot().total_record_count == 0  # type: ignore[union-attr]
    assert t.scan().files() == []


def test_overwrite_null_partition_and_unpartitioned_table(fast_store: Any) -> None:
    store = fast_store
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1, 2, 3], "dt": ["a", None, None]}))
    t.overwrite(pa.table({"id": [9], "dt": pa.array([None], pa.string())}), partition={"dt": None})
    assert sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "dt": "a"},
        {"id": 9, "dt": None},
    ]
    u = create_table_in(store, SCHEMA)
    u.append(_batch([1, 2]))
    u.overwrite(_batch([3]))
    assert _ids(u.scan().to_arrow()) == [3]


# -- exactly-once ----------------------------------------------------------------------------------


def _message(t: lakefmt.Table, ids: Iterable[int]) -> lakefmt.CommitMessage:
    w = t.new_writer()
    w.write(_batch(ids))
    return w.prepare_commit()


def test_exactly_once_per_commit_user_and_identifier(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options={"compaction.auto": "false"})  # ids counted
    c = t.new_committer(commit_user="job-42")
    msg = _message(t, [1, 2])
    snap = c.commit([msg], identifier=7)
    assert snap is not None and snap.commit_user == "job-42" and snap.commit_identifier == 7
    assert c.commit([msg], identifier=7) is None  # the same message again
    assert c.commit([_message(t, [3])], identifier=7) is None  # a re-executed batch: new files, same id
    assert c.commit([_message(t, [4])], identifier=5) is None  # below the last identifier: skipped
    assert [s.id for s in t.snapshots()] == [1]
    assert _ids(t.scan().to_arrow()) == [1, 2]
    # another committer object for the same user (a restarted driver) dedups too
    assert t.new_committer(commit_user="job-42").commit([_message(t, [5])], identifier=7) is None
    # other users are independent, and commit between job-42's commits
    assert t.new_committer(commit_user="job-43").commit([_message(t, [6])], identifier=7) is not None
    for i in range(2):
        t.append(_batch([100 + i]))
    assert t.new_committer(commit_user="job-42").commit([_message(t, [7])], identifier=7) is None
    assert t.commit_user_identifier("job-42") == 7
    snap8 = c.commit([_message(t, [8])], identifier=8)
    assert snap8 is not None and snap8.id == 5
    assert _ids(t.scan().to_arrow()) == [1, 2, 6, 8, 100, 101]

    reopened = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    c2 = reopened.new_committer(commit_user="job-42")
    for ident in (0, 7, 8):
        assert c2.commit([_message(reopened, [99])], identifier=ident) is None
    assert c2.commit([_message(reopened, [9])], identifier=9) is not None
    assert reopened.new_committer(commit_user="job-43").commit([_message(reopened, [99])], identifier=7) is None
    assert len(reopened.snapshots()) == 6
    assert _ids(reopened.scan().to_arrow()) == [1, 2, 6, 8, 9, 100, 101]


def test_one_off_commits_are_never_deduplicated(fast_store: Any) -> None:
    store = fast_store
    t = create_table_in(store, SCHEMA)
    c = t.new_committer()
    assert c.commit([_message(t, [1])], identifier=0) is not None
    assert c.commit([_message(t, [2])], identifier=0) is not None
    assert t.new_committer().commit([_message(t, [3])], identifier=0) is not None
    assert _ids(t.scan().to_arrow()) == [1, 2, 3]


def test_commit_of_nothing_makes_no_snapshot(fast_store: Any) -> None:
    store = fast_store
    t = create_table_in(store, SCHEMA)
    w = t.new_writer()
    assert t.new_committer(commit_user="u").commit([w.prepare_commit()], identifier=1) is None
    assert t.snapshots() == []


def test_messages_from_many_writers_commit_as_one_snapshot() -> None:
    t = _memory_table(SCHEMA, partition_by=["dt"], options={"manifest.merge-min-count": "3"})
    messages = []
    for k in range(12):
        w = t.new_writer()
        w.write(_batch([k], dt=f"d{k % 3}"))
        messages.append(w.prepare_commit())
    snap = t.new_committer(commit_user="spark").commit(messages, identifier=1)
    assert snap is not None and snap.delta_record_count == 12 and snap.total_file_count == 12
    assert len(t.snapshots()) == 1
    assert _ids(t.scan().to_arrow()) == list(range(12))
    # the per-task manifests were merged into the delta list (all fit in one target-size manifest)
    assert len(t._store.manifest_list(snap.delta_manifest_list)) == 1


# -- bounded metadata over many commits ------------------------------------------------------------


def test_thousand_commits_keep_manifests_bounded_and_reads_correct() -> None:
    min_count, full_threshold = 10, 20
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32())])
    t = _memory_table(
        schema,
        partition_by=["p"],
        options={
            "manifest.merge-min-count": str(min_count),
            "manifest.full-compaction-threshold": str(full_threshold),
            "write.fsync": "false",
            "compaction.auto": "false",  # one data file per row, one snapshot per commit
        },
    )
    model: dict[int, list[int]] = {}
    committer = t.new_committer(commit_user="stream")
    for i in range(1, 1001):
        p = i % 10
        row = pa.table({"id": [i], "p": pa.array([p], pa.int32())})
        if i % 37 == 0:
            assert t.overwrite(row, partition={"p": p}) is not None
            model[p] = [i]
        else:
            w = t.new_writer()
            w.write(row)
            assert committer.commit([w.prepare_commit()], identifier=i) is not None
            model.setdefault(p, []).append(i)
        if i % 100 == 0:
            latest = t.latest_snapshot()
            assert latest is not None and latest.id == i
            base = t._store.manifest_list(latest.base_manifest_list)
            delta = t._store.manifest_list(latest.delta_manifest_list)
            # < min_count small manifests survive a base merge, + the delta (adds, and deletes of an overwrite)
            assert len(base) + len(delta) <= min_count + 1, (i, len(base), len(delta))
            assert sum(m.num_deleted_files for m in base) < full_threshold
            assert sum(m.file_size for m in base + delta) < 64 * 1024
            expected = sorted(x for ids in model.values() for x in ids)
            assert _ids(t.scan().to_arrow()) == expected
            assert latest.total_record_count == len(expected)
            assert latest.total_file_count == len(expected) == len(t.scan().files())
            assert _ids(t.scan(filter=pc.field("p") == 3).to_arrow()) == sorted(model[3])
    assert len(t.snapshots()) == 1000
    # snapshot 37 overwrote partition 7 (ids 7, 17, 27) with id 37
    assert _ids(t.scan(snapshot_id=37).to_arrow()) == sorted([x for x in range(1, 37) if x % 10 != 7] + [37])


# -- pruning never changes results -----------------------------------------------------------------

PRUNE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("k", pa.int32()),
        ("x", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
    ]
)
P_VALUES = ["a", "", "/", "é", None]  # few partitions, so files hold several rows and ranges matter
K_VALUES = [-1, 0, None]
X_VALUES = [-(2**40), -5, -1, 0, 1, 3, 7, 2**40, None]
F_VALUES = [float("nan"), float("-inf"), float("inf"), -2.5, -0.0, 0.0, 1.0, 3.5, None]
S_VALUES = ["", "a", "ab", "b", "zz", "é", "x" * 300, None]
B_VALUES = [True, False, None]
D_VALUES = [datetime.date(1969, 12, 31), datetime.date(1970, 1, 1), datetime.date(2026, 11, 1), None]
POOLS: dict[str, list[Any]] = {
    "p": P_VALUES,
    "k": K_VALUES,
    "x": X_VALUES,
    "f": F_VALUES,
    "s": S_VALUES,
    "b": B_VALUES,
    "d": D_VALUES,
}

_row = st.fixed_dictionaries({c: st.sampled_from(v) for c, v in POOLS.items()})
_batches = st.lists(st.lists(_row, min_size=1, max_size=12), min_size=1, max_size=4)


def _leaf(col: str) -> st.SearchStrategy[pc.Expression]:
    literal = st.sampled_from([v for v in POOLS[col] if v is not None])
    field = pc.field(col)
    ops = [
        literal.map(lambda v: field == v),
        literal.map(lambda v: field != v),
        literal.map(lambda v: field < v),
        literal.map(lambda v: field <= v),
        literal.map(lambda v: field > v),
        literal.map(lambda v: field >= v),
        st.just(field.is_null()),
        st.just(field.is_valid()),
        st.lists(literal, min_size=1, max_size=3).map(
            lambda vs: field.isin(pa.array(vs, PRUNE_SCHEMA.field(col).type))
        ),
    ]
    if col == "f":
        ops.append(st.just(field.is_nan()))
    return st.one_of(ops)


_leaves = st.sampled_from(sorted(POOLS)).flatmap(_leaf)
_filters = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda ab: ab[0] & ab[1]),
        st.tuples(inner, inner).map(lambda ab: ab[0] | ab[1]),
        inner.map(lambda a: ~a),
    ),
    max_leaves=4,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # examples are slow to shrink; messages say enough
)
@given(_batches, st.lists(_filters, min_size=2, max_size=5), st.booleans())
def test_pruned_scans_equal_filtering_the_full_table(
    batches: list[list[dict[str, Any]]], filters: list[pc.Expression], partitioned: bool
) -> None:
    t = _memory_table(PRUNE_SCHEMA, partition_by=["p", "k"] if partitioned else None)
    next_id = 0
    for rows in batches:
        for r in rows:
            r["id"] = next_id
            next_id += 1
        t.append(pa.Table.from_pylist(rows, schema=PRUNE_SCHEMA))
    full = t.scan().to_arrow()
    assert full.num_rows == next_id
    for i, expr in enumerate(filters):
        expected = full.filter(expr)
        scan = t.scan(filter=expr)
        got = scan.to_arrow()
        assert _rows(got) == _rows(expected), f"{expr}: got ids {_ids(got)}, expected {_ids(expected)}"
        if i == 0:  # the other outputs once per example: they share the plan
            assert scan.count() == expected.num_rows
            assert _rows(pa.Table.from_batches(scan.to_batches(), schema=PRUNE_SCHEMA)) == _rows(expected)
            assert _ids(t.scan(filter=expr, columns=["id"]).to_arrow()) == _ids(expected)


@pytest.mark.parametrize(
    "expr",
    [
        pc.field("f").is_nan(),
        ~(pc.field("f") < 0),
        pc.field("f") != float("-inf"),
        ~(pc.field("f") < float("nan")),
        ~(pc.field("x") <= float("nan")),
        pc.field("f") != float("nan"),
    ],
    ids=str,
)
def test_nan_rows_and_nan_literals_are_never_pruned_away(expr: pc.Expression) -> None:
    """Parquet row-group min/max leave NaN out, and pyarrow orders a NaN literal above every number: either
    would let a pushed-down filter drop matching rows."""
    t = _memory_table(PRUNE_SCHEMA)
    rows = [{"id": 0, "f": float("nan"), "x": 1}, {"id": 1, "f": float("-inf"), "x": 2}]
    t.append(pa.Table.from_pylist(rows, schema=PRUNE_SCHEMA))
    t.append(pa.Table.from_pylist([{"id": 2, "f": 1.0, "x": 3}], schema=PRUNE_SCHEMA))
    full = t.scan().to_arrow()
    expected = _ids(full.filter(expr))
    assert expected  # each case matches some rows
    assert _ids(t.scan(filter=expr).to_arrow()) == expected
    assert _ids(pa.Table.from_batches(t.scan(filter=expr).to_batches(), schema=PRUNE_SCHEMA)) == expected
    assert t.scan(filter=expr).count() == len(expected)
    assert _ids(t.scan(filter=expr, columns=["id"]).to_arrow()) == expected


def test_pruning_skips_files_by_partition_and_by_min_max() -> None:
    t = _memory_table(PRUNE_SCHEMA, partition_by=["p"])
    for i in range(6):
        rows = [
            {
                "id": i * 10 + j,
                "p": "a" if i % 2 else "b",
                "x": i * 100 + j,
                "f": float(-i),
                "k": 0,
                "s": None,
                "b": None,
                "d": None,
            }
            for j in range(3)
        ]
        t.append(pa.Table.from_pylist(rows, schema=PRUNE_SCHEMA))
    assert len(t.scan().files()) == 6
    assert len(t.scan(filter=pc.field("p") == "a").files()) == 3
    assert len(t.scan(filter=pc.field("x") >= 400).files()) == 2
    assert len(t.scan(filter=(pc.field("x") >= 400) & (pc.field("p") == "b")).files()) == 1
    assert len(t.scan(filter=pc.field("f") < -3.5).files()) == 2
    assert len(t.scan(filter=pc.field("s").is_valid()).files()) == 0
    assert len(t.scan(filter=pc.field("x") == 10**9).files()) == 0
    assert t.scan(filter=pc.field("x") == 10**9).to_arrow().num_rows == 0
    # NaN makes a file's float range unknown: it is never pruned on that column
    t.append(pa.Table.from_pylist([{"id": 99, "p": "a", "f": float("nan"), "x": 0}], schema=PRUNE_SCHEMA))
    assert _ids(t.scan(filter=pc.field("f").is_nan()).to_arrow()) == [99]
    assert _ids(t.scan(filter=pc.field("f") < -4.5).to_arrow()) == [50, 51, 52]


def test_scan_outputs_agree() -> None:
    t = _memory_table(SCHEMA, partition_by=["dt"])
    t.append(pa.concat_tables([_batch(range(5), "a"), _batch(range(5, 8), "b")]))
    t.append(_batch(range(8, 10), "a"))
    scan = t.scan(filter=pc.field("dt") == "a")
    dataset = scan.to_dataset()
    assert isinstance(dataset, ds.Dataset)
    assert _ids(dataset.to_table(filter=scan.filter)) == [0, 1, 2, 3, 4, 8, 9]
    files = scan.files()
    assert Counter(f.partition["dt"] for f in files) == {"a": 2}
    assert sum(f.row_count for f in files) == 7
    assert all(f.file_size > 0 and f.full_path.endswith(f.path) for f in files)
    assert _ids(pa.Table.from_batches(list(scan.to_batches()))) == [0, 1, 2, 3, 4, 8, 9]
    assert t.scan().count() == 10


def test_plan_tasks_packs_the_scan_files_in_order_to_a_split_size() -> None:
    t = _memory_table(SCHEMA, partition_by=["dt"])
    for i in range(7):
        t.append(_batch(range(i * 10, i * 10 + 1 + i), f"d{i % 3}"))
    scan = t.scan()
    files = scan.files()
    assert len(files) == 7
    # every file a task of its own, all files in one task, and in between: consecutive files until the split
    assert [task.files for task in scan.plan_tasks(1)] == [(f,) for f in files]
    (everything,) = scan.plan_tasks(sum(f.file_size for f in files) + 1)
    assert everything.files == tuple(files) and everything.size == sum(f.file_size for f in files)
    split = files[0].file_size + files[1].file_size
    tasks = scan.plan_tasks(split)
    assert [f for task in tasks for f in task.files] == files
    assert all(task.size >= split for task in tasks[:-1])
    assert all(task.size - task.files[-1].file_size < split for task in tasks)
    assert tasks[0].paths == [files[0].path, files[1].path]
    # pruning applies first; a scan of nothing plans no task
    pruned = t.scan(filter=pc.field("dt") == "d1")
    assert [f for task in pruned.plan_tasks(split) for f in task.files] == pruned.files()
    assert t.scan(filter=pc.field("dt") == "none").plan_tasks(split) == []
    with pytest.raises(ValueError, match="split_size"):
        scan.plan_tasks(0)
