"""Key tables (format version 3): creating one, upsert, delete by key, delete by filter (deletion vectors), append
as upsert, the committer's upserts with exactly-once replay, and merge-on-read deletes on a table without a key.

Every check reads the table back and holds it to a plain dict of key -> row: at most one live row per key, the
snapshot's ``total_record_count`` equal to the live rows, and time travel to each earlier snapshot reading its
state then. The basics run over local disk, memory and S3 (moto); the rest over local disk and memory."""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.commit.types import CommitOutcome
from lakefmt.errors import (
    DeletionVectorsError,
    InvalidOptionError,
    KeyTableError,
    SchemaEvolutionError,
    SchemaMismatchError,
    UnsupportedTypeError,
)
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import CommitKind
from lakefmt.write.writer import TableWriter

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string()), ("ts", pa.int64())])
#: a composite key of a string and an int, in partitions, over several buckets
WIDE = pa.schema([("dt", pa.string()), ("name", pa.string()), ("n", pa.int32()), ("v", pa.int64())])
WIDE_KEY = ("dt", "name", "n")

Key = tuple[Any, ...]


@dataclass
class _Fast:
    base: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def uri(self) -> str:
        return f"{self.base}/{uuid.uuid4().hex}"


@pytest.fixture(params=["local", "memory"])
def fast(request: pytest.FixtureRequest, tmp_path: Any) -> _Fast:
    """Local disk and memory: the store does not change what these tests check (the basics run on S3 too)."""
    return _Fast(str(tmp_path) if request.param == "local" else f"memory://lakefmt-{uuid.uuid4().hex}")


def key_table(store: Any, schema: pa.Schema = SCHEMA, **kwargs: Any) -> lakefmt.Table:
    kwargs.setdefault("primary_key", ["k"])
    return create_table_in(store, schema, **kwargs)


def data(schema: pa.Schema, **columns: Sequence[Any]) -> pa.Table:
    """Rows of ``schema`` (columns not given are null)."""
    n = len(next(iter(columns.values())))
    return pa.table({f.name: pa.array(columns.get(f.name, [None] * n), f.type) for f in schema}, schema=schema)


def by_key(table: lakefmt.Table, keys: Sequence[str] = ("k",), **scan: Any) -> dict[Key, dict[str, Any]]:
    """The rows a scan reads, by key; fails on two live rows for one key."""
    out: dict[Key, dict[str, Any]] = {}
    for row in table.scan(**scan).to_arrow().to_pylist():
        key = tuple(row[c] for c in keys)
        assert key not in out, f"two live rows for key {key}: {out[key]} and {row}"
        out[key] = row
    return out


def check(table: lakefmt.Table, model: dict[Key, dict[str, Any]], keys: Sequence[str] = ("k",)) -> None:
    """The table (opened anew: no cache) holds exactly ``model``; the latest snapshot counts its live rows."""
    fresh = lakefmt.Table(table.io, MetaStore(table.io))  # no metadata cached
    assert by_key(fresh, keys) == model
    latest = fresh.latest_snapshot()
    assert (latest.total_record_count if latest else 0) == len(model)
    assert fresh.scan().count() == len(model)


def values(table: lakefmt.Table, **scan: Any) -> dict[int, str | None]:
    return {k[0]: r["v"] for k, r in by_key(table, **scan).items()}


# -- creating a key table ---------------------------------------------------------------------------------------
def test_create_makes_key_columns_non_null_and_version_3(fast: Any) -> None:
    nullable = pa.schema([pa.field("k", pa.int64(), nullable=True), ("v", pa.string())])
    t = key_table(fast, nullable, options={"bucket": "4"})
    schema = t.table_schema()
    assert schema.format_version == 3 and schema.primary_keys == ("k",) and t.primary_key == ("k",)
    assert not schema.arrow_schema.field("k").nullable and schema.arrow_schema.field("v").nullable
    reopened = lakefmt.open_table(t.uri, storage_options=fast.storage_options)
    assert reopened.primary_key == ("k",) and reopened.options["bucket"] == "4"
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        t.upsert(data(nullable, k=[1, None], v=["a", "b"]))
    assert t.latest_snapshot() is None


@pytest.mark.parametrize("key_type", [pa.float64(), pa.float32(), pa.decimal128(10, 2), pa.list_(pa.int64())])
def test_create_refuses_a_key_type_that_cannot_be_a_key(fast: Any, key_type: pa.DataType) -> None:
    uri = fast.uri()
    with pytest.raises(UnsupportedTypeError, match=r"primary key 'k' has type .*key columns must be integer"):
        lakefmt.create_table(uri, pa.schema([("k", key_type), ("v", pa.int64())]), primary_key=["k"])
    with pytest.raises(lakefmt.NotATableError):
        lakefmt.open_table(uri)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"primary_key": ["k"], "partition_by": ["dt"]}, UnsupportedTypeError, "must include every partition key"),
        ({"primary_key": ["nope"]}, UnsupportedTypeError, "'nope' is not a column"),
        ({"primary_key": ["k", "k"]}, UnsupportedTypeError, "repeat"),
        ({"options": {"bucket": "4"}}, InvalidOptionError, "bucket is for key tables"),
        ({"options": {"sequence.field": "ts"}}, InvalidOptionError, "sequence.field is for key tables"),
        ({"primary_key": ["k"], "options": {"sequence.field": "nope"}}, InvalidOptionError, "not a column"),
        ({"primary_key": ["k"], "options": {"sequence.field": "v"}}, InvalidOptionError, "integer, date or timestamp"),
        ({"primary_key": ["k"], "options": {"bucket": "0"}}, InvalidOptionError, "bucket"),
        ({"primary_key": ["k"], "options": {"bucket": "3000000000"}}, InvalidOptionError, "more than 2147483647"),
        ({"primary_key": ["k"], "options": {"bucket": str(2**64 + 5)}}, InvalidOptionError, "more than 2147483647"),
    ],
)
def test_create_refuses(fast: Any, kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    schema = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("ts", pa.int64())])
    uri = fast.uri()
    with pytest.raises(error, match=match):
        lakefmt.create_table(uri, schema, **kwargs)
    with pytest.raises(lakefmt.NotATableError):
        lakefmt.open_table(uri)


def test_a_table_with_more_buckets_than_a_manifest_numbers_is_not_written(fast: Any) -> None:
    """A key table whose ``bucket`` option is past the 32-bit bucket numbers (created before create_table checked
    it) refuses its writers before any file is written, naming the option; it stays readable."""
    t = create_table_in(fast, SCHEMA, primary_key=["k"], options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=[1], v=["a"]))
    current = MetaStore(t.io).latest_schema()
    schema = dataclasses.replace(current, options={**current.options, "bucket": "3000000000"})
    files = [f.path for f in t.io.walk()]
    with pytest.raises(InvalidOptionError, match=r"bucket \(3000000000\).*cannot be written"):
        TableWriter(t.io, schema)
    assert [f.path for f in t.io.walk()] == files
    assert t.to_arrow().to_pylist() == [{"k": 1, "v": "a", "ts": None}]


def test_delete_keys_refuses_a_column_named_twice(fast: Any) -> None:
    t = create_table_in(fast, SCHEMA, primary_key=["k"])
    t.upsert(data(SCHEMA, k=[1], v=["a"]))
    twice = pa.Table.from_arrays([pa.array([1]), pa.array([1])], names=["k", "k"])
    with pytest.raises(SchemaMismatchError, match=r"delete_keys: column\(s\) 'k' appear more than once"):
        t.delete_keys(twice)
    assert t.to_arrow().to_pylist() == [{"k": 1, "v": "a", "ts": None}] and len(t.snapshots()) == 1


def test_upsert_and_delete_keys_need_a_key_table(fast: Any) -> None:
    t = create_table_in(fast, SCHEMA)
    t.append(data(SCHEMA, k=[1], v=["a"]))
    with pytest.raises(KeyTableError, match="no primary key"):
        t.upsert(data(SCHEMA, k=[1], v=["b"]))
    with pytest.raises(KeyTableError, match="no primary key"):
        t.delete_keys(pa.table({"k": [1]}))
    assert t.to_arrow().to_pylist() == [{"k": 1, "v": "a", "ts": None}]
    assert len(t.snapshots()) == 1


# -- upsert ---------------------------------------------------------------------------------------------------
def test_upsert_inserts_replaces_and_deletes_by_key(store: Any) -> None:
    """The basics, on every store: insert, replace, last-wins within a call, delete_keys, delete(filter), time
    travel to every snapshot."""
    t = key_table(store, options={"bucket": "2"})
    history: list[tuple[int, dict[int, str | None]]] = []

    def step(snap: lakefmt.Snapshot | None, expected: dict[int, str | None]) -> None:
        assert snap is not None
        assert values(t) == expected
        history.append((snap.id, dict(expected)))
        assert snap.total_record_count == len(expected)

    step(t.upsert(data(SCHEMA, k=[1, 2, 3], v=["a", "b", "c"])), {1: "a", 2: "b", 3: "c"})
    step(t.upsert(data(SCHEMA, k=[2, 4, 2], v=["B", "d", "BB"])), {1: "a", 2: "BB", 3: "c", 4: "d"})
    step(t.delete_keys(pa.table({"k": [1, 99]})), {2: "BB", 3: "c", 4: "d"})
    step(t.delete(pc.field("v") == "c"), {2: "BB", 4: "d"})
    step(t.append(data(SCHEMA, k=[1, 4, 4], v=["again", "D", "DD"])), {1: "again", 2: "BB", 4: "DD"})
    check(t, {(k,): {"k": k, "v": v, "ts": None} for k, v in history[-1][1].items()})
    for sid, expected in history:
        assert values(t, snapshot_id=sid) == expected, f"time travel to snapshot {sid}"
    kinds = [s.properties.get("lakefmt.operation") for s in t.snapshots()]
    assert kinds == ["upsert", "upsert", "delete", "delete", "upsert"]


def test_nothing_to_do_commits_nothing(fast: Any) -> None:
    t = key_table(fast)
    assert t.upsert(data(SCHEMA, k=[], v=[])) is None
    assert t.delete_keys(pa.table({"k": pa.array([], pa.int64())})) is None
    assert t.delete_keys(pa.table({"k": [1]})) is None  # no live row
    assert t.delete(pc.field("k") == 1) is None
    t.upsert(data(SCHEMA, k=[1], v=["a"]))
    assert t.delete_keys(pa.table({"k": [2]})) is None
    assert t.delete(pc.field("k") == 2) is None
    committer = t.new_committer("job")
    assert committer.commit([], identifier=1) is None
    assert committer.last_result is not None and committer.last_result.outcome is CommitOutcome.NOTHING_TO_COMMIT
    assert len(t.snapshots()) == 1


def test_upsert_last_row_of_a_key_wins_within_a_call(fast: Any) -> None:
    t = key_table(fast, options={"bucket": "3"})
    ks = [5, 1, 5, 2, 1, 5, 3]
    vs = [f"v{i}" for i in range(len(ks))]
    t.upsert(data(SCHEMA, k=ks, v=vs))
    assert values(t) == {5: "v5", 1: "v4", 2: "v3", 3: "v6"}
    t.append(data(SCHEMA, k=ks, v=[v.upper() for v in vs]))  # append on a key table: the same upsert
    assert values(t) == {5: "V5", 1: "V4", 2: "V3", 3: "V6"}
    check(t, {(k,): {"k": k, "v": v, "ts": None} for k, v in values(t).items()})


def test_upsert_many_batches_last_wins_across_them(fast: Any) -> None:
    """Rows given as several batches (and a reader): order across batches counts, as within one."""
    t = key_table(fast, options={"bucket": "2"})
    b1 = data(SCHEMA, k=[1, 2], v=["a1", "b1"]).to_batches()[0]
    b2 = data(SCHEMA, k=[2, 1], v=["b2", "a2"]).to_batches()[0]
    t.upsert([b1, b2])
    assert values(t) == {1: "a2", 2: "b2"}
    t.append(pa.RecordBatchReader.from_batches(SCHEMA, [b2, b1]))
    assert values(t) == {1: "a1", 2: "b1"}


def test_sequence_field_orders_versions_within_and_across_calls(fast: Any) -> None:
    t = key_table(fast, options={"sequence.field": "ts", "bucket": "2"})
    # within a call: the largest ts wins, whatever the order; a tie: the last
    t.upsert(data(SCHEMA, k=[1, 1, 2, 2, 3, 3], v=["a5", "a3", "b1", "b2", "c7", "c7'"], ts=[5, 3, 1, 2, 7, 7]))
    assert values(t) == {1: "a5", 2: "b2", 3: "c7'"}
    # across calls: a smaller ts than the live row's loses; an equal one wins; a larger one wins
    t.upsert(data(SCHEMA, k=[1, 2, 3], v=["a4", "b2'", "c8"], ts=[4, 2, 8]))
    assert values(t) == {1: "a5", 2: "b2'", 3: "c8"}
    # the committer's path and append follow the same rule
    t.append(data(SCHEMA, k=[1, 3], v=["a6", "c1"], ts=[6, 1]))
    assert values(t) == {1: "a6", 2: "b2'", 3: "c8"}
    assert {k[0]: r["ts"] for k, r in by_key(t).items()} == {1: 6, 2: 2, 3: 8}
    check(t, by_key(t))


def test_sequence_field_null_is_smallest(fast: Any) -> None:
    """A null sequence value loses to any other, within a call and against the live row; of nulls alone the last
    wins. (A key whose rows all had null values vanished from an upsert, and a null beat a live value.)"""
    t = key_table(fast, options={"sequence.field": "ts", "bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 1, 2, 2, 3], v=["a", "a'", "b0", "b", "c"], ts=[None, None, 0, None, 4]))
    assert values(t) == {1: "a'", 2: "b0", 3: "c"}
    t.upsert(data(SCHEMA, k=[1, 2, 3], v=["A", "B", "C"], ts=[None, None, None]))
    assert values(t) == {1: "A", 2: "b0", 3: "c"}  # null vs null: the new row; null vs 0 or 4: the live row
    t.upsert(data(SCHEMA, k=[1], v=["A1"], ts=[-5]))
    assert values(t) == {1: "A1", 2: "b0", 3: "c"}
    check(t, by_key(t))


def test_sequence_field_of_timestamps_and_dates(fast: Any) -> None:
    schema = pa.schema([("k", pa.string()), ("v", pa.int64()), ("at", pa.timestamp("us", "UTC")), ("d", pa.date32())])
    utc = datetime.UTC
    for column in ("at", "d"):
        t = key_table(fast, schema, options={"sequence.field": column})
        day = datetime.date(2026, 1, 2)
        at = [datetime.datetime(2026, 1, 1, tzinfo=utc), datetime.datetime(2025, 1, 1, tzinfo=utc)]
        t.upsert(data(schema, k=["x", "x"], v=[1, 2], at=at, d=[day, day - datetime.timedelta(days=1)]))
        assert [r["v"] for r in by_key(t).values()] == [1]
        t.upsert(data(schema, k=["x"], v=[3], at=at[1:], d=[day - datetime.timedelta(days=2)]))
        assert [r["v"] for r in by_key(t).values()] == [1]


def test_composite_keys_over_partitions_and_buckets(fast: Any) -> None:
    """A key of a string and an int in partitions, 4 buckets: random upserts, delete_keys and deletes against a
    dict."""
    t = create_table_in(fast, WIDE, partition_by=["dt"], primary_key=list(WIDE_KEY), options={"bucket": "4"})
    assert not t.table_schema().arrow_schema.field("dt").nullable
    rnd = random.Random(7)
    model: dict[Key, dict[str, Any]] = {}
    names = ["ann", "bob", "", "zoë", "a,b"]
    snapshots: list[tuple[int, dict[Key, dict[str, Any]]]] = []
    for step in range(12):
        n = rnd.randint(1, 12)
        rows = [
            {"dt": rnd.choice("xyz"), "name": rnd.choice(names), "n": rnd.randint(-2, 2), "v": step * 100 + i}
            for i in range(n)
        ]
        op = rnd.choice(["upsert", "upsert", "delete_keys", "delete"])
        if op == "upsert":
            snap = t.upsert(pa.Table.from_pylist(rows, schema=WIDE))
            for r in rows:
                model[(r["dt"], r["name"], r["n"])] = r
        elif op == "delete_keys":
            snap = t.delete_keys(pa.Table.from_pylist(rows, schema=WIDE).drop_columns(["v"]))
            gone = {(r["dt"], r["name"], r["n"]) for r in rows}
            assert (snap is None) == (not gone & set(model))
            model = {k: r for k, r in model.items() if k not in gone}
        else:
            dt = rnd.choice("xyz")
            snap = t.delete((pc.field("dt") == dt) & (pc.field("n") >= 0))
            before = len(model)
            model = {k: r for k, r in model.items() if not (k[0] == dt and k[2] >= 0)}
            assert (snap is None) == (before == len(model))
        if snap is not None:
            snapshots.append((snap.id, dict(model)))
        assert by_key(t, WIDE_KEY) == model
    check(t, model, WIDE_KEY)
    files = t.files()
    assert {f.partition["dt"] for f in files} <= set("xyz")
    assert len({(f.partition["dt"], f.path.split("/")[1]) for f in files}) > 3, "rows in one bucket only"
    for sid, expected in snapshots:
        assert by_key(t, WIDE_KEY, snapshot_id=sid) == expected, f"time travel to snapshot {sid}"
    # filters read through the vectors: no deleted row comes back under a filter or a projection
    got = t.scan(filter=pc.field("dt") == "x", columns=["name", "n"]).to_arrow().to_pylist()
    assert sorted((r["name"], r["n"]) for r in got) == sorted((k[1], k[2]) for k in model if k[0] == "x")


@pytest.mark.parametrize(
    ("key_type", "keys"),
    [
        (pa.bool_(), [True, False]),
        (pa.int8(), [-128, 127]),
        (pa.uint64(), [0, (1 << 64) - 1]),
        (pa.binary(), [b"", b"\x00\xff"]),
        (pa.large_string(), ["", "é"]),
        (pa.date32(), [datetime.date(1, 1, 1), datetime.date(9999, 12, 31)]),
        (pa.timestamp("ns"), [datetime.datetime(1970, 1, 1), datetime.datetime(2262, 1, 1)]),
        (pa.time64("us"), [datetime.time(0), datetime.time(23, 59, 59, 999999)]),
    ],
)
def test_every_key_type_upserts_and_deletes(tmp_path: Any, key_type: pa.DataType, keys: list[Any]) -> None:
    schema = pa.schema([("k", key_type), ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"], options={"bucket": "3"})
    t.upsert(pa.table({"k": pa.array([*keys, keys[0]], key_type), "v": [1, 2, 3]}))
    t.upsert(pa.table({"k": pa.array(keys[1:], key_type), "v": [20]}))
    assert sorted(t.to_arrow().column("v").to_pylist()) == [3, 20]
    t.delete_keys(pa.table({"k": pa.array(keys[:1], key_type)}))
    assert t.to_arrow().column("v").to_pylist() == [20]
    assert t.latest_snapshot().total_record_count == 1  # type: ignore[union-attr]


def test_upsert_conforms_its_input_like_append(fast: Any) -> None:
    """Columns in another order and a narrower integer type are conformed; a missing key column is refused."""
    t = key_table(fast)
    t.upsert(pa.table({"v": ["a"], "ts": pa.array([1], pa.int32()), "k": pa.array([1], pa.int32())}))
    assert values(t) == {1: "a"}
    with pytest.raises(SchemaMismatchError):
        t.upsert(pa.table({"v": ["b"], "ts": [1]}))
    with pytest.raises(SchemaMismatchError, match="key column"):
        t.delete_keys(pa.table({"v": ["a"]}))
    assert values(t) == {1: "a"} and len(t.snapshots()) == 1


def test_delete_keys_ignores_other_columns_and_repeated_keys(fast: Any) -> None:
    t = key_table(fast, options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 2, 3], v=["a", "b", "c"]))
    snap = t.delete_keys(data(SCHEMA, k=[2, 2, 3, 2], v=["x", "y", "z", "w"]))
    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    assert values(t) == {1: "a"}
    assert snap.total_record_count == 1
    t.upsert(data(SCHEMA, k=[2], v=["back"]))  # a deleted key comes back by an upsert
    check(t, {(1,): {"k": 1, "v": "a", "ts": None}, (2,): {"k": 2, "v": "back", "ts": None}})


def test_delete_filter_on_a_key_table_marks_vectors(fast: Any) -> None:
    """A delete by filter on a key table rewrites no data file: it adds deletion vectors."""
    t = key_table(fast, options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=list(range(10)), v=[str(i) for i in range(10)], ts=list(range(10))))
    before = {f.path for f in t.files()}
    snap = t.delete((pc.field("ts") >= 3) & (pc.field("ts") < 7))
    assert snap is not None and snap.properties.get("lakefmt.operation") == "delete"
    assert {f.path for f in t.files()} == before  # no data file rewritten
    assert sorted(values(t)) == [0, 1, 2, 7, 8, 9]
    assert t.delete(pc.field("ts") == 4) is None  # already deleted
    t.upsert(data(SCHEMA, k=[4], v=["new"], ts=[4]))  # the key comes back
    assert sorted(values(t)) == [0, 1, 2, 4, 7, 8, 9]
    check(t, by_key(t))
    with pytest.raises(DeletionVectorsError):
        t.scan().to_dataset()


def test_merge_on_read_delete_on_a_table_without_a_key(store: Any) -> None:
    """``write.delete.mode=merge-on-read``: deletes mark vectors (duplicates of a row are rows like any other)."""
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    options = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"}  # the vectors stay
    t = create_table_in(store, schema, partition_by=["dt"], options=options)
    assert t.table_schema().format_version == 3 and t.primary_key == ()
    t.append(pa.table({"id": [1, 2, 3, 1], "dt": ["a", "a", "b", "b"]}))
    t.append(pa.table({"id": [1, 4], "dt": ["a", "a"]}))
    data_files = {f.path for f in t.files()}
    snap = t.delete(pc.field("id") == 1)
    assert snap is not None and snap.total_record_count == 3
    assert {f.path for f in t.files()} == data_files
    assert sorted(t.to_arrow().column("id").to_pylist()) == [2, 3, 4]
    store_ = MetaStore(t.io)
    live = ents.live_entries(store_, store_.latest_snapshot())
    assert ents.vector_files(live).num_rows == 2  # one vector file per partition touched
    t.append(pa.table({"id": [1], "dt": ["b"]}))
    assert t.delete(pc.field("dt") == "a") is not None
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 3]
    assert t.latest_snapshot().total_record_count == 2  # type: ignore[union-attr]
    assert sorted(t.to_arrow(snapshot_id=snap.id).column("id").to_pylist()) == [2, 3, 4]
    with pytest.raises(KeyTableError):
        t.upsert(pa.table({"id": [1], "dt": ["a"]}))


# -- the committer ------------------------------------------------------------------------------------------
def _message(t: lakefmt.Table, rows: pa.Table) -> lakefmt.CommitMessage:
    with t.new_writer() as writer:
        writer.write(rows)
        return writer.prepare_commit()


def test_committer_upserts_later_message_wins_and_replay_is_skipped(store: Any) -> None:
    t = key_table(store, options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 2, 3], v=["a", "b", "c"]))
    m1 = _message(t, data(SCHEMA, k=[1, 2, 2], v=["m1", "m1-2", "m1-2'"]))
    m2 = _message(t, data(SCHEMA, k=[2, 4], v=["m2", "m2-4"]))
    m3 = _message(t, data(SCHEMA, k=[4, 1], v=["m3-4", "m3"]))
    committer = t.new_committer("job")
    snap = committer.commit([m1, m2, m3], identifier=1)
    assert snap is not None and snap.properties.get("lakefmt.operation") == "upsert"
    expected = {1: "m3", 2: "m2", 3: "c", 4: "m3-4"}
    assert values(t) == expected and snap.total_record_count == 4
    # a replay of the same (user, identifier), with new files: skipped, the table as it was
    replay = [_message(t, data(SCHEMA, k=[1, 3], v=["replay", "replay"]))]
    again = t.new_committer("job")
    assert again.commit(replay, identifier=1) is None
    assert again.last_result is not None and again.last_result.outcome is CommitOutcome.ALREADY_COMMITTED
    t.discard(replay)
    assert values(t) == expected and t.latest_snapshot().id == snap.id  # type: ignore[union-attr]
    # an earlier identifier is skipped too; the next one lands
    assert again.commit([_message(t, data(SCHEMA, k=[3], v=["old"]))], identifier=0) is None
    assert again.commit([_message(t, data(SCHEMA, k=[3], v=["next"]))], identifier=2) is not None
    assert values(t) == {**expected, 3: "next"}
    assert t.commit_user_identifier("job") == 2
    check(t, by_key(t))


def test_committer_sequence_field_beats_message_order(fast: Any) -> None:
    t = key_table(fast, options={"sequence.field": "ts", "bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 2], v=["live1", "live2"], ts=[10, 10]))
    m1 = _message(t, data(SCHEMA, k=[1, 2, 3], v=["m1", "m1", "m1"], ts=[20, 5, 9]))
    m2 = _message(t, data(SCHEMA, k=[1, 3], v=["m2", "m2"], ts=[15, 9]))
    assert t.new_committer("job").commit([m1, m2], identifier=1) is not None
    assert values(t) == {1: "m1", 2: "live2", 3: "m2"}  # 20 > 15; 5 < live 10; a tie: the later message
    check(t, by_key(t))


def test_committer_of_a_key_table_from_the_table_only(fast: Any) -> None:
    """The committer that knows how to mark old rows comes from ``Table.new_committer``; a bare Committer is
    refused rather than appending a second row for a key."""
    from lakefmt.commit.committer import Committer

    t = key_table(fast)
    t.upsert(data(SCHEMA, k=[1], v=["a"]))
    bare = Committer(t.io, MetaStore(t.io), "job")
    with pytest.raises(KeyTableError, match="new_committer"):
        bare.commit([_message(t, data(SCHEMA, k=[1], v=["b"]))], identifier=1)
    assert values(t) == {1: "a"}


def test_overwrite_of_a_key_table(fast: Any) -> None:
    """An overwrite replaces the rows and settles two rows of one key among its own data (the last wins)."""
    t = key_table(fast, options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 2, 3], v=["a", "b", "c"]))
    t.overwrite(data(SCHEMA, k=[2, 5, 2], v=["x", "y", "z"]))
    assert values(t) == {2: "z", 5: "y"}
    check(t, by_key(t))


def test_many_files_per_bucket_stay_one_row_per_key(fast: Any) -> None:
    """Tiny row groups and files: a write rolls many files per bucket, and keys repeat across them."""
    t = key_table(
        fast,
        options={"bucket": "2", "write.row-group-rows": "3", "target-file-size": "1", "compaction.auto": "false"},
    )
    rnd = random.Random(3)
    model: dict[int, str] = {}
    for step in range(6):
        ks = [rnd.randint(0, 15) for _ in range(20)]
        vs = [f"{step}-{i}" for i in range(20)]
        t.upsert(data(SCHEMA, k=ks, v=vs)) if step % 2 else t.append(data(SCHEMA, k=ks, v=vs))
        model.update(zip(ks, vs, strict=True))
        assert values(t) == model
    assert len(t.files()) > 6
    check(t, by_key(t))


def test_reads_of_a_snapshot_with_vectors_in_every_form(fast: Any) -> None:
    """to_batches, the Arrow stream, pandas and count read through the vectors as to_arrow does."""
    t = key_table(fast, options={"bucket": "2"})
    t.upsert(data(SCHEMA, k=[1, 2, 3, 4], v=["a", "b", "c", "d"]))
    t.upsert(data(SCHEMA, k=[2, 3], v=["B", "C"]))
    t.delete_keys(pa.table({"k": [4]}))
    want = {1: "a", 2: "B", 3: "C"}
    scan = t.scan()
    got = pa.Table.from_batches(list(scan.to_batches()), schema=scan.schema.arrow_schema)
    assert dict(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True)) == want
    streamed = pa.table(t)
    assert dict(zip(streamed.column("k").to_pylist(), streamed.column("v").to_pylist(), strict=True)) == want
    frame = t.scan().to_pandas()
    assert dict(zip(frame["k"], frame["v"], strict=True)) == want
    assert t.scan().count() == 3 and t.scan(filter=pc.field("k") >= 2).count() == 2


@pytest.mark.parametrize("change", ["rename", "drop"])
def test_a_schema_change_keeps_the_sequence_field_usable(fast: Any, change: str) -> None:
    """Renaming or dropping the sequence.field column is refused, or the table goes on upserting (a renamed column
    still ordering the versions of a key)."""
    t = key_table(fast, options={"sequence.field": "ts"})
    t.upsert(data(SCHEMA, k=[1, 2], v=["a", "b"], ts=[5, 5]))
    update = t.update_schema()
    try:
        (update.rename_column("ts", "ts2") if change == "rename" else update.delete_column("ts")).commit()
    except SchemaEvolutionError as exc:
        assert "sequence.field" in str(exc)
        t.upsert(data(SCHEMA, k=[1, 2], v=["A", "B"], ts=[1, 9]))  # refused: the table is as it was, and upserts
        assert {k[0]: r["v"] for k, r in by_key(t).items()} == {1: "a", 2: "B"}
        return
    names = t.table_schema().arrow_schema.names
    rows = {"k": [1, 2], "v": ["A", "B"]}
    if change == "rename":
        rows["ts2"] = [1, 9]  # type: ignore[list-item]
    t.upsert(pa.table(rows))
    got = {k[0]: r["v"] for k, r in by_key(t).items()}
    assert got == ({1: "a", 2: "B"} if change == "rename" else {1: "A", 2: "B"}), names


def test_delete_keys_checks_its_columns_with_no_rows_too(fast: Any) -> None:
    """Keys without the key columns are refused also when there are none (as an upsert's rows are); no keys are
    nothing to do."""
    t = key_table(fast)
    with pytest.raises(SchemaMismatchError, match="key column"):
        t.delete_keys(pa.table({"v": pa.array([], pa.string())}))
    with pytest.raises(SchemaMismatchError):
        t.upsert(pa.table({"v": pa.array([], pa.string())}))
    assert t.delete_keys(pa.table({"k": pa.array([], pa.int32())})) is None
    assert t.delete_keys([]) is None
    assert t.latest_snapshot() is None
