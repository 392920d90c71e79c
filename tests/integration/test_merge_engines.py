"""Merge engines on key tables, end to end: ``merge-engine`` = ``aggregation``, ``partial-update``, ``first-row``
through ``Table.upsert``, ``Table.append``, the writer and committer (several messages), overwrites, compaction and
a commit that lands after another writer's; the change feed's update images; and at most one live row per key after
every commit. Writers racing for one snapshot id: ``tests/faults/test_merge_engine_races.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import SchemaEvolutionError, SchemaMismatchError

SCHEMA = pa.schema(
    [("id", pa.int64()), ("total", pa.int64()), ("hits", pa.int64()), ("top", pa.float64()), ("name", pa.string())]
)
AGG = {
    "merge-engine": "aggregation",
    "fields.total.aggregate-function": "sum",
    "fields.hits.aggregate-function": "count",
    "fields.top.aggregate-function": "max",
}


def batch(
    ids: list[int],
    total: list[Any] | None = None,
    hits: list[Any] | None = None,
    top: list[Any] | None = None,
    name: list[Any] | None = None,
) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "total": total or [None] * n,
            "hits": hits or [None] * n,
            "top": top or [None] * n,
            "name": name or [None] * n,
        },
        schema=SCHEMA,
    )


def live(table: lakefmt.Table) -> dict[int, dict[str, Any]]:
    """The table's rows by key, checked: one row per key, and the snapshot's record count equal to them."""
    rows = table.to_arrow().to_pylist()
    out = {r["id"]: r for r in rows}
    assert len(out) == len(rows), "two live rows for one key"
    snap = table.latest_snapshot()
    assert snap is not None and snap.total_record_count == len(rows)
    return out


def agg_table(tmp_path: Path, **options: str) -> lakefmt.Table:
    return lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"], options={**AGG, **options})


def test_aggregation_across_upserts_and_appends(tmp_path: Path) -> None:
    table = agg_table(tmp_path, bucket="2")
    table.upsert(batch([1, 2, 1], total=[5, 7, 1], hits=[0, 0, None], top=[1.0, 2.0, 3.0], name=["a", "b", None]))
    assert live(table) == {
        1: {"id": 1, "total": 6, "hits": 1, "top": 3.0, "name": "a"},
        2: {"id": 2, "total": 7, "hits": 1, "top": 2.0, "name": "b"},
    }
    table.append(batch([1, 3], total=[10, None], hits=[9, 9], top=[0.5, None], name=[None, "c"]))
    table.upsert(batch([3, 3, 2], total=[1, 2, None], hits=[None, 1, 1], name=["d", None, None]))
    got = live(table)
    assert got[1] == {"id": 1, "total": 16, "hits": 2, "top": 3.0, "name": "a"}
    assert got[2] == {"id": 2, "total": 7, "hits": 2, "top": 2.0, "name": "b"}
    assert got[3] == {"id": 3, "total": 3, "hits": 2, "top": None, "name": "d"}
    # the earlier snapshots read as they were
    assert table.scan(snapshot_id=1).to_arrow().num_rows == 2
    # compaction folds the files and vectors, and changes no value
    table.compact()
    assert live(table) == got


def test_partial_update_through_upsert_and_append(tmp_path: Path) -> None:
    table = lakefmt.create_table(
        str(tmp_path / "p"), SCHEMA, primary_key=["id"], options={"merge-engine": "partial-update", "bucket": "3"}
    )
    table.upsert(batch([1, 2], total=[1, 2], name=["a", "b"]))
    table.append(batch([1, 1, 4], total=[None, 10, None], top=[0.5, None, 4.0]))
    table.upsert(pa.table({"id": [2], "name": ["B"]}))  # a partial row: the columns left out keep their values
    assert live(table) == {
        1: {"id": 1, "total": 10, "hits": None, "top": 0.5, "name": "a"},
        2: {"id": 2, "total": 2, "hits": None, "top": None, "name": "B"},
        4: {"id": 4, "total": None, "hits": None, "top": 4.0, "name": None},
    }


def test_only_merging_engines_take_partial_rows(tmp_path: Path) -> None:
    table = agg_table(tmp_path)
    table.upsert(batch([1], total=[5], name=["a"]))
    table.upsert(pa.table({"id": [1, 1], "total": [1, 2]}))
    assert live(table)[1] == {"id": 1, "total": 8, "hits": 0, "top": None, "name": "a"}  # no non-null hits
    # under deduplicate a nullable column left out is written as nulls (the rule of every writer): the old values go
    plain = lakefmt.create_table(str(tmp_path / "d"), SCHEMA, primary_key=["id"])
    plain.upsert(batch([1], total=[5], name=["a"]))
    plain.upsert(pa.table({"id": [1], "total": [1]}))
    assert live(plain)[1] == {"id": 1, "total": 1, "hits": None, "top": None, "name": None}
    with pytest.raises(SchemaMismatchError, match="missing column"):
        plain.upsert(pa.table({"total": [1]}))  # a key column is never nullable


def test_first_row_keeps_the_first_row_written(tmp_path: Path) -> None:
    table = lakefmt.create_table(
        str(tmp_path / "f"), SCHEMA, primary_key=["id"], options={"merge-engine": "first-row", "bucket": "2"}
    )
    table.upsert(batch([1, 1, 2], total=[1, 2, 3], name=[None, "later", "b"]))
    before = live(table)
    assert before == {
        1: {"id": 1, "total": 1, "hits": None, "top": None, "name": None},
        2: {"id": 2, "total": 3, "hits": None, "top": None, "name": "b"},
    }
    snap = table.append(batch([1, 2, 5], total=[9, 9, 5]))
    assert snap is not None
    changes = table.changes(from_snapshot=snap.id - 1).to_pylist()  # the rows ignored are no change
    assert [(r["_change_type"], r["id"]) for r in changes] == [("insert", 5)]
    got = live(table)
    assert got[1] == before[1] and got[2] == before[2] and got[5]["total"] == 5
    # a delete by key ends the first row; the next one written is the key's first row again
    table.delete_keys(pa.table({"id": [1]}))
    table.upsert(batch([1], total=[42]))
    assert live(table)[1]["total"] == 42


def test_committer_messages_fold_in_commit_order(tmp_path: Path) -> None:
    table = lakefmt.create_table(
        str(tmp_path / "c"), SCHEMA, primary_key=["id"], options={**AGG, "fields.name.aggregate-function": "last_value"}
    )
    table.upsert(batch([1], total=[100], name=["live"]))
    messages = []
    for i in range(3):  # three tasks, each with rows of key 1
        with table.new_writer() as writer:
            writer.write(batch([1, 2], total=[i, 1], name=[f"task{i}", None]))
            messages.append(writer.prepare_commit())
    committer = table.new_committer("job")
    assert committer.commit(messages, identifier=1) is not None
    assert committer.commit(messages, identifier=1) is None  # exactly once: a replay adds nothing
    got = live(table)
    assert got[1]["total"] == 103 and got[1]["name"] == "task2"  # the last message's row is the last value
    assert got[2]["total"] == 3 and got[2]["name"] is None


def test_a_commit_planned_after_a_concurrent_one_keeps_both(tmp_path: Path) -> None:
    """Files written before another writer's commit lands are merged with the live row of the snapshot the commit
    lands on, not the one the writer started from."""
    table = agg_table(tmp_path)
    table.upsert(batch([1, 2], total=[1, 1]))
    with table.new_writer() as writer:
        writer.write(batch([1, 2], total=[10, 10]))
        message = writer.prepare_commit()
    lakefmt.open_table(table.uri).upsert(batch([1], total=[100]))  # lands first
    table.new_committer().commit([message], identifier=0)
    got = live(table)
    assert got[1]["total"] == 111 and got[2]["total"] == 11


def test_changes_show_an_aggregated_key_as_an_update(tmp_path: Path) -> None:
    table = agg_table(tmp_path)
    table.upsert(batch([1, 2], total=[1, 2]))
    table.upsert(batch([1, 1, 3], total=[10, 20, 3]))
    rows = table.changes(from_snapshot=1).to_pylist()
    got = sorted((r["_change_type"], r["id"], r["total"]) for r in rows)
    assert got == [("insert", 3, 3), ("update_postimage", 1, 31), ("update_preimage", 1, 1)]


def test_overwrite_folds_the_new_rows_among_themselves(tmp_path: Path) -> None:
    table = agg_table(tmp_path)
    table.upsert(batch([1, 2], total=[1, 2]))
    table.overwrite(batch([1, 1, 3], total=[5, 6, 7]))
    got = live(table)
    assert {k: r["total"] for k, r in got.items()} == {1: 11, 3: 7}


def test_partitioned_composite_key(tmp_path: Path) -> None:
    schema = pa.schema([("dt", pa.string()), ("k", pa.int32()), ("n", pa.int64())])
    table = lakefmt.create_table(
        str(tmp_path / "w"),
        schema,
        partition_by=["dt"],
        primary_key=["dt", "k"],
        options={"merge-engine": "aggregation", "fields.n.aggregate-function": "sum", "bucket": "2"},
    )
    for _ in range(3):
        table.upsert(pa.table({"dt": ["a", "a", "b", "b"], "k": [1, 2, 1, 1], "n": [1, 2, 3, 4]}, schema=schema))
    rows = table.to_arrow().to_pylist()
    assert sorted((r["dt"], r["k"], r["n"]) for r in rows) == [("a", 1, 3), ("a", 2, 6), ("b", 1, 21)]


def test_schema_changes_keep_the_engine_valid(tmp_path: Path) -> None:
    table = agg_table(
        tmp_path, **{"fields.default-aggregate-function": "sum"}, **{"fields.name.aggregate-function": "last_value"}
    )
    renamed = pytest.raises(SchemaEvolutionError, match=r"fields\.total\.aggregate-function")
    with renamed, table.update_schema() as u:
        u.rename_column("total", "amount")
    with pytest.raises(SchemaEvolutionError, match="sum needs a numeric column"), table.update_schema() as u:
        u.add_column("note", pa.string())
    with table.update_schema() as u:
        u.add_column("extra", pa.int32())
    rows = batch([1, 1], total=[1, 1]).append_column("extra", pa.array([2, 3], pa.int32()))
    table.upsert(rows)
    assert live(table)[1]["extra"] == 5 and live(table)[1]["total"] == 2
