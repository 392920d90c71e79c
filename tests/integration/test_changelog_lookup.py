"""``changelog-producer=lookup``: a commit that replaces or deletes rows stores its change rows when it is made.

Two twin tables take the same random mix of upserts (with keys twice in one batch), deletes by key and by filter,
CDC rows, MERGE and compactions: one derives its feed (``none``), the other stores it (``lookup``); their feeds
must hold the same rows. The stored feed reads no replaced row out of an older file, survives the expiration of
those files, and its files live and die with their snapshot (expire, tags, orphan-clean)."""

from __future__ import annotations

import random
import shutil
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError, SnapshotNotFoundError
from lakefmt.maintenance.report import FileClass
from lakefmt.read.rows_at import RowReader

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.string())])
OPTS = {"bucket": "2", "compaction.auto": "false", "snapshot.num-retained.min": "1000"}


def _rows(items: list[tuple[int, str, str | None]]) -> pa.Table:
    return pa.table({n: [r[i] for r in items] for i, n in enumerate(SCHEMA.names)}, schema=SCHEMA)


def _twins(root: Any, **extra: str) -> tuple[lakefmt.Table, lakefmt.Table]:
    def make(name: str, producer: str) -> lakefmt.Table:
        options = {**OPTS, **extra, "changelog-producer": producer}
        return lakefmt.create_table(str(root / name), SCHEMA, primary_key=["k", "dt"], partition_by=["dt"],
                                    options=options)  # fmt: skip

    return make("derived", "none"), make("stored", "lookup")


def _feed(t: lakefmt.Table, start: int = 0) -> list[tuple[Any, ...]]:
    rows = t.changes(from_snapshot=start).to_pylist()
    return sorted((r["_commit_snapshot"], r["_change_type"], r["k"], r["dt"], r["v"]) for r in rows)


def _random_history(t: lakefmt.Table, seed: int, merges: bool = True) -> None:
    rng = random.Random(seed)
    for step in range(14):
        op = rng.choice(["upsert", "upsert", "delete_keys", "delete", *(["merge"] if merges else []), "compact"])
        keys = [(rng.randrange(30), rng.choice("ab")) for _ in range(rng.randrange(1, 12))]
        if op == "upsert":
            t.upsert(_rows([(k, dt, f"{step}-{k}-{i}") for i, (k, dt) in enumerate(keys)]))
        elif op == "delete_keys":
            t.delete_keys(pa.table({"k": [k for k, _ in keys], "dt": [dt for _, dt in keys]}))
        elif op == "delete":
            t.delete(f"(k = {step} OR k > {25 - step % 3}) AND dt = 'a'")
        elif op == "merge":
            source = _rows([(k, dt, f"m{step}-{k}") for k, dt in dict.fromkeys(keys)])
            (
                t.merge(source, "t.k = s.k AND t.dt = s.dt", source_alias="s", target_alias="t")
                .when_matched_update_all(predicate="s.k > 12")
                .when_matched_delete()
                .when_not_matched_insert_all()
                .execute()
            )
        else:
            t.compact(min_files=1)


@pytest.mark.parametrize(
    ("seed", "engine"), [(1, "deduplicate"), (2, "deduplicate"), (3, "partial-update"), (4, "aggregation")]
)
def test_a_stored_feed_equals_the_derived_one(tmp_path: Any, seed: int, engine: str) -> None:
    """Under every merge engine that rewrites rows: the merged rows are the post-images."""
    derived, stored = _twins(tmp_path, **{"merge-engine": engine})
    _random_history(derived, seed, merges=engine == "deduplicate")
    _random_history(stored, seed, merges=engine == "deduplicate")
    assert _feed(stored) == _feed(derived)
    assert stored.to_arrow().sort_by("k").equals(derived.to_arrow().sort_by("k"))
    # exactly the commits that replaced or deleted a row stored their changes (never a compaction)
    replacing = {f[0] for f in _feed(derived) if f[1] != "insert"}
    storing = {s.id for s in stored.snapshots() if s.changelog_manifest_list is not None}
    assert replacing and storing == replacing
    assert not any(s.changelog_manifest_list for s in derived.snapshots())
    for s in stored.snapshots():
        if s.changelog_manifest_list is not None:
            assert s.operation.value in ("UPSERT", "DELETE", "MERGE") and s.changelog_record_count > 0


def test_the_stored_feed_reads_no_older_file(tmp_path: Any, monkeypatch: Any) -> None:
    _, stored = _twins(tmp_path)
    stored.upsert(_rows([(k, "a", "old") for k in range(100)]))
    start = stored.version()
    stored.upsert(_rows([(k, "a", "new") for k in range(0, 100, 3)]))
    stored.delete_keys(pa.table({"k": [1, 2], "dt": ["a", "a"]}))

    def refuse(self: RowReader, requests: Any) -> pa.Table:
        raise AssertionError("the feed read replaced rows out of older files")

    monkeypatch.setattr(RowReader, "take", refuse)
    kinds = [f[1] for f in _feed(stored, start)]
    assert (kinds.count("update_preimage"), kinds.count("update_postimage"), kinds.count("delete")) == (34, 34, 2)


def test_a_stored_feed_needs_no_snapshot_before_its_range(tmp_path: Any) -> None:
    """A derived feed of snapshot 2 reads the rows it replaced through snapshot 1; a stored one needs only 2."""
    for t in _twins(tmp_path):
        t.upsert(_rows([(k, "a", "v0") for k in range(20)]))
        t.upsert(_rows([(k, "a", "v1") for k in range(5)]))
        expected = _feed(t, 1)
        t.compact(min_files=1)
        t.expire_snapshots(retain_max=2, retain_min=1)
        assert [s.id for s in t.snapshots()] == [2, 3]
        if t.options["changelog-producer"] == "none":
            with pytest.raises(SnapshotNotFoundError, match=r"need snapshot 1 \(the files its successor replaced"):
                t.changes(from_snapshot=1)
        else:
            assert len(expected) == 10 and _feed(t, 1) == expected


def test_changelog_files_live_and_expire_with_their_snapshot(tmp_path: Any) -> None:
    _, stored = _twins(tmp_path)
    stored.upsert(_rows([(k, "a", "v0") for k in range(10)]))
    for i in range(1, 4):
        stored.upsert(_rows([(k, "a", f"v{i}") for k in range(3)]))

    def files() -> list[str]:
        return stored.io.list("changelog")

    assert len(files()) == 3
    stored.create_tag("keep", snapshot_id=3)
    assert stored.remove_orphan_files(older_than=0).total_files == 0
    assert len(files()) == 3
    report = stored.expire_snapshots(retain_max=1)
    assert report.expired_snapshots == [1, 2, 3]
    left = files()
    assert len(left) == 2  # snapshot 4's, and the one tagged snapshot 3 stored; snapshot 2's went
    assert report.count(FileClass.CHANGELOG) == 1
    assert stored.changes(from_tag="keep").num_rows == 6
    stored.delete_tag("keep")
    stored.remove_orphan_files(older_than=0)
    assert len(files()) == 1


@pytest.mark.parametrize("damage", ["not parquet", "no row kind", "kind out of range", "null kind", "no column"])
def test_a_corrupt_changelog_is_named(tmp_path: Any, damage: str) -> None:
    _, stored = _twins(tmp_path)
    stored.upsert(_rows([(1, "a", "x"), (2, "a", "z")]))
    stored.upsert(_rows([(1, "a", "y")]))
    (name,) = stored.io.list("changelog")
    path = f"changelog/{name}"
    table = pq.read_table(stored.io.full_path(path))
    kinds = table.column("_lakefmt_row_kind")
    if damage == "no row kind":
        table = table.drop_columns(["_lakefmt_row_kind"])
    elif damage == "kind out of range":
        table = table.set_column(table.num_columns - 1, "_lakefmt_row_kind", pa.array([7] * len(kinds), pa.int8()))
    elif damage == "null kind":
        table = table.set_column(table.num_columns - 1, "_lakefmt_row_kind", pa.nulls(len(kinds), pa.int8()))
    elif damage == "no column":
        table = table.drop_columns(["v"])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    stored.io.write(path, b"PAR1 not parquet" if damage == "not parquet" else sink.getvalue().to_pybytes(), sync=False)
    with pytest.raises(CorruptMetadataError, match=f"changelog file {path}"):
        stored.changes()
    assert stored.to_arrow().num_rows == 2  # the table's rows are not the changelog's


def test_a_stored_changelog_reads_under_a_later_schema(tmp_path: Any) -> None:
    _, stored = _twins(tmp_path)
    stored.upsert(_rows([(1, "a", "x"), (2, "b", "y")]))
    stored.upsert(_rows([(1, "a", "x2")]))
    with stored.update_schema() as u:
        u.add_column("extra", pa.int32())
        u.rename_column("v", "value")
    rows = stored.changes(from_snapshot=1).to_pylist()
    assert [(r["_change_type"], r["k"], r["value"], r["extra"]) for r in rows] == [
        ("update_preimage", 1, "x", None),
        ("update_postimage", 1, "x2", None),
    ]


def test_a_missing_changelog_file_is_derived_instead(tmp_path: Any) -> None:
    """A tool that did not know changelog files (an older orphan-clean) removed one: the feed derives those
    changes from the files and vectors, as for a table that stores none."""
    derived, stored = _twins(tmp_path)
    for t in (derived, stored):
        t.upsert(_rows([(k, "a", "v0") for k in range(10)]))
        t.upsert(_rows([(k, "a", "v1") for k in range(4)]))
        t.delete_keys(pa.table({"k": [8], "dt": ["a"]}))
    for name in stored.io.list("changelog"):
        stored.io.delete(f"changelog/{name}")
    assert _feed(stored) == _feed(derived) and len(_feed(stored)) == 10 + 8 + 1


def test_input_stores_the_rows_given(tmp_path: Any) -> None:
    """``changelog-producer=input``: the feed is the input as written (each row's own kind; plain upserts are
    inserts; a delete by key is its key), not what it did to the table."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "cdc"), schema, primary_key=["k"], options={
        **OPTS, "changelog-producer": "input", "rowkind.field": "op", "rowkind.format": "debezium",
    })  # fmt: skip
    t.upsert(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"], "op": ["r", "c", "c"]}, schema=schema))
    t.upsert(pa.table({"k": [2, 3, 4], "v": ["B", None, "d"], "op": ["u", "d", "c"]}, schema=schema))
    t.delete_keys(pa.table({"k": [1]}))
    rows = [(r["_commit_snapshot"], r["_change_type"], r["k"], r["v"]) for r in t.changes().to_pylist()]
    assert rows == [
        (1, "insert", 1, "a"), (1, "insert", 2, "b"), (1, "insert", 3, "c"),
        (2, "update_postimage", 2, "B"), (2, "delete", 3, None), (2, "insert", 4, "d"),
        (3, "delete", 1, None),
    ]  # fmt: skip
    assert sorted((r["k"], r["v"]) for r in t.to_arrow().to_pylist()) == [(2, "B"), (4, "d")]
    assert all(s.changelog_manifest_list for s in t.snapshots())


def test_a_table_created_again_at_the_same_place_gets_its_own_rows(tmp_path: Any) -> None:
    """The writer's cache of row groups is per table and schema: a table dropped and created again at the same
    location with other columns stores its own rows."""
    uri = str(tmp_path / "t")
    first = lakefmt.create_table(uri, SCHEMA, primary_key=["k", "dt"], options={**OPTS, "changelog-producer": "lookup"})
    first.upsert(_rows([(1, "a", "x")]))
    first.upsert(_rows([(1, "a", "y")]))
    shutil.rmtree(uri)
    other = pa.schema([pa.field("k", pa.int64(), False), pa.field("dt", pa.string(), False), ("w", pa.int64())])
    again = lakefmt.create_table(uri, other, primary_key=["k", "dt"], options={**OPTS, "changelog-producer": "lookup"})
    again.upsert(pa.table({"k": [1], "dt": ["a"], "w": [5]}, schema=other))
    again.upsert(pa.table({"k": [1], "dt": ["a"], "w": [6]}, schema=other))
    rows = [(r["_change_type"], r["w"]) for r in again.changes(from_snapshot=1).to_pylist()]
    assert rows == [("update_preimage", 5), ("update_postimage", 6)]


@pytest.mark.parametrize("write", ["upsert", "append", "writer"])
def test_input_stores_what_upsert_writes_on_every_path(tmp_path: Any, write: str) -> None:
    """Found: with ``changelog-producer=input``, ``upsert`` and ``append`` stored different rows for one batch:
    for k=[1, 2, 1] (v 10, 20, 11) upsert stored (1, 11), (2, 20) and append (1, 10), (1, 11), (2, 20), a row
    that never was live. The planner now records the rows that lose to a later row of their key (and updates'
    before-images), and the stored input leaves them out on every path: append, a job's writer, upsert."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64()), ("op", pa.string())])
    t = lakefmt.create_table(str(tmp_path / write), schema, primary_key=["k"], options={
        **OPTS, "changelog-producer": "input", "rowkind.field": "op",
    })  # fmt: skip
    batch = pa.table(
        {"k": [1, 2, 1, 3, 3], "v": [10, 20, 11, 30, 31], "op": ["+I", "+I", "+I", "-U", "+U"]}, schema=schema
    )
    if write == "writer":
        with t.new_writer() as writer:
            writer.write(batch)
            message = writer.prepare_commit()
        assert t.new_committer("job").commit(message, 1) is not None
    else:
        getattr(t, write)(batch)
    stored = sorted((r["_row_kind"], r["k"], r["v"]) for r in t.changes(0, row_kinds=True).to_pylist())
    assert stored == [("+I", 1, 11), ("+I", 2, 20), ("+U", 3, 31)]
    assert sorted((r["k"], r["v"]) for r in t.to_arrow().to_pylist()) == [(1, 11), (2, 20), (3, 31)]
