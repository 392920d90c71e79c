"""Change-data input into key tables (``rowkind.field``): a Debezium-shaped change log of a source table replayed
batch by batch, through ``Table.append``, ``Table.upsert`` and ``apply_key_changes``, must leave the key table
equal to the source's state, which the test computes on its own by replaying the events into a dict; each batch's
change feed must name what the batch did (deletes, updates as pre- and post-images, inserts). A table fed from
another's change feed (Delta's and Paimon's spellings) mirrors it. Bad row kinds change nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from cdc_log import KEY, SCHEMA, Key, Row, change_log, flatten, replay
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.errors import InvalidOptionError, InvalidRowKindError, SchemaEvolutionError
from lakefmt.rewrite.keys.upsert import apply_key_changes


def live(table: lakefmt.Table) -> dict[Key, Row]:
    out: dict[Key, Row] = {}
    for r in table.to_arrow().to_pylist():
        key = (r["id"], r["region"])
        assert key not in out, f"two live rows for {key}"
        out[key] = r
    latest = table.latest_snapshot()
    assert (latest.total_record_count if latest else 0) == len(out)
    return out


def expected_changes(before: dict[Key, Row], after: dict[Key, Row], touched: set[Key]) -> list[tuple[Any, ...]]:
    """What the change feed of one batch must hold: deletes, updates (pre and post image), inserts."""
    out: list[tuple[Any, ...]] = []
    for key in touched:
        old, new = before.get(key), after.get(key)
        if old is not None and new is None:
            out.append(("delete", *key, old["qty"]))
        elif old is not None and new is not None:
            out += [("update_preimage", *key, old["qty"]), ("update_postimage", *key, new["qty"])]
        elif new is not None:
            out.append(("insert", *key, new["qty"]))
    return sorted(out)


Apply = Callable[[lakefmt.Table, pa.Table], Any]
PATHS: dict[str, Apply] = {
    "append": lambda t, rows: t.append(rows),
    "upsert": lambda t, rows: t.upsert(rows),
    "apply_key_changes": lambda t, rows: apply_key_changes(t, rows, None, operation="cdc"),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("ordered", [True, False], ids=["in-log-order", "shuffled-by-lsn"])
def test_debezium_change_log_replays_to_the_source_state(local_store: Any, path: str, ordered: bool) -> None:
    """In log order the last change of a key wins by row order; shuffled, by ``sequence.field`` (the log
    position)."""
    options = {"bucket": "2", "rowkind.field": "op", "rowkind.format": "debezium", "write.fsync": "false"}
    if not ordered:
        options["sequence.field"] = "lsn"
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEY), partition_by=["region"], options=options)
    rnd = random.Random(7)
    state: dict[Key, Row] = {}
    for batch in change_log(seed=11, batches=4, per_batch=40):
        rows = flatten(batch)
        if not ordered:
            rows = rows.take(pa.array(rnd.sample(range(rows.num_rows), rows.num_rows)))
        before_id = t.latest_snapshot().id if t.latest_snapshot() else 0
        new_state = replay(state, batch)
        PATHS[path](t, rows)
        assert live(t) == new_state
        touched = {(r["id"], r["region"]) for r in rows.to_pylist()}
        feed = t.changes(from_snapshot=before_id, columns=["id", "region", "qty"]).to_pylist()
        got = sorted((r["_change_type"], r["id"], r["region"], r["qty"]) for r in feed)
        assert got == expected_changes(state, new_state, touched)
        state = new_state
    assert len(t.snapshots()) == 4


def test_changes_on_every_store(store: Any) -> None:
    """Local disk, memory and S3 (moto): two batches of changes through a committer of two writers, the changes of
    one key split between them (as Spark tasks split them), settled by ``sequence.field``."""
    options = {"bucket": "2", "rowkind.field": "op", "sequence.field": "lsn"}
    t = create_table_in(store, SCHEMA, primary_key=list(KEY), options=options)
    state: dict[Key, Row] = {}
    for i, batch in enumerate(change_log(seed=3, batches=2, per_batch=30, keys=8)):
        rows = flatten(batch)
        messages = []
        for half in (rows.filter(pa.array([j % 2 == i for j in range(rows.num_rows)])),
                     rows.filter(pa.array([j % 2 != i for j in range(rows.num_rows)]))):  # fmt: skip
            with t.new_writer() as writer:
                writer.write(half)
                messages.append(writer.prepare_commit())
        t.new_committer("cdc-job").commit(messages, identifier=i)
        state = replay(state, batch)
        assert live(t) == state
    assert t.new_committer("cdc-job").commit([], identifier=1) is None  # a replay of the last batch: skipped


@pytest.mark.parametrize("row_kinds", [False, True], ids=["delta-spelling", "paimon-spelling"])
def test_a_table_fed_from_another_tables_change_feed_mirrors_it(local_store: Any, row_kinds: bool) -> None:
    """The change feed of a key table, written into another key table whose ``rowkind.field`` is the feed's kind
    column (ordered by ``_commit_snapshot``; an update's pre-image is ignored), holds the same rows."""
    src_schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    src = create_table_in(local_store, src_schema, primary_key=["id"], options={"write.fsync": "false"})
    kind = "_row_kind" if row_kinds else "_change_type"
    mirror_schema = pa.schema([*src_schema, pa.field(kind, pa.string()), pa.field("_commit_snapshot", pa.int64())])
    fmt = "paimon" if row_kinds else "delta"
    options = {"rowkind.field": kind, "rowkind.format": fmt, "sequence.field": "_commit_snapshot"}
    mirror = create_table_in(local_store, mirror_schema, primary_key=["id"], options=options)
    src.upsert(pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}, schema=src_schema))
    src.upsert(pa.table({"id": [2, 5], "v": ["b2", "e"]}, schema=src_schema))
    src.delete_keys(pa.table({"id": [3, 5]}))
    src.upsert(pa.table({"id": [3, 2], "v": ["c again", "b3"]}, schema=src_schema))
    feed = src.changes(row_kinds=row_kinds).drop_columns(["_commit_timestamp"])
    assert set(feed.column(kind).to_pylist()) == (
        {"+I", "-U", "+U", "-D"} if row_kinds else {"insert", "update_preimage", "update_postimage", "delete"}
    )
    rnd = random.Random(3)
    mirror.append(feed.take(pa.array(rnd.sample(range(feed.num_rows), feed.num_rows))))  # any order: by sequence
    assert {r["id"]: r["v"] for r in live_rows(mirror)} == {r["id"]: r["v"] for r in live_rows(src)}


def live_rows(t: lakefmt.Table) -> list[Row]:
    return t.to_arrow().to_pylist()


def test_update_before_images_are_ignored(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEY), options={"rowkind.field": "op"})
    t.append(pa.Table.from_pylist([{"id": 1, "region": "eu", "qty": 1, "op": "+I", "lsn": 1}], schema=SCHEMA))
    before = [{"id": 1, "region": "eu", "qty": 1, "op": "-U", "lsn": 2}]
    assert t.append(pa.Table.from_pylist(before, schema=SCHEMA)) is None  # nothing but a before-image
    assert t.upsert(pa.Table.from_pylist(before, schema=SCHEMA)) is None
    # a before-image after the new row (out of order) does not undo the update
    rows = [{"id": 1, "region": "eu", "qty": 5, "op": "+U", "lsn": 3}, {**before[0], "lsn": 3}]
    t.upsert(pa.Table.from_pylist(rows, schema=SCHEMA))
    assert [(r["qty"], r["op"]) for r in live_rows(t)] == [(5, "+U")]
    assert len(t.snapshots()) == 2


@pytest.mark.parametrize(
    ("op", "match"),
    [("X", r"unknown row kind\(s\) 'X'"), (None, r"have no row kind"), ("+I", r"unknown row kind\(s\) '\+I'")],
)
@pytest.mark.parametrize("path", list(PATHS))
def test_a_bad_row_kind_changes_nothing(local_store: Any, path: str, op: str | None, match: str) -> None:
    options = {"rowkind.field": "op", "rowkind.format": "debezium"}
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEY), options=options)
    t.append(pa.Table.from_pylist([{"id": 1, "region": "eu", "qty": 1, "op": "c", "lsn": 1}], schema=SCHEMA))
    listing = file_listing(t.io)
    rows = [{"id": 1, "region": "eu", "qty": 2, "op": "d", "lsn": 2}, {"id": 2, "region": "us", "qty": 3, "op": op}]
    with pytest.raises(InvalidRowKindError, match=match):
        PATHS[path](t, pa.Table.from_pylist(rows, schema=SCHEMA))
    assert file_listing(t.io) == listing and [r["qty"] for r in live_rows(t)] == [1]


@pytest.mark.parametrize("path", list(PATHS))
def test_data_without_the_row_kind_column_is_refused_naming_it(local_store: Any, path: str) -> None:
    """The row kind column missing altogether (not null in some rows) is said so, and nothing is written."""
    options = {"rowkind.field": "op", "rowkind.format": "debezium"}
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEY), options=options)
    t.append(pa.Table.from_pylist([{"id": 1, "region": "eu", "qty": 1, "op": "c", "lsn": 1}], schema=SCHEMA))
    listing = file_listing(t.io)
    rows = pa.Table.from_pylist([{"id": 2, "region": "us", "qty": 3, "lsn": 2}])
    with pytest.raises(InvalidRowKindError, match=r"the data has no column 'op' \(the table's rowkind.field\)"):
        PATHS[path](t, rows)
    assert file_listing(t.io) == listing and [r["qty"] for r in live_rows(t)] == [1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"options": {"rowkind.field": "op"}}, "rowkind.field is for key tables"),
        ({"primary_key": ["id"], "options": {"rowkind.field": "nope"}}, "'nope', which is not a column"),
        ({"primary_key": ["id"], "options": {"rowkind.field": "qty"}}, "of type int64; it must be a string column"),
        ({"primary_key": ["id", "op"], "options": {"rowkind.field": "op"}}, "a primary-key column"),
        ({"primary_key": ["id"], "options": {"rowkind.format": "delta"}}, "rowkind.format .* set rowkind.field"),
        ({"primary_key": ["id"], "options": {"rowkind.field": "op", "rowkind.format": "x"}}, "rowkind.format is one"),
        (
            {"primary_key": ["id"], "options": {"rowkind.field": "op", "merge-engine": "partial-update"}},
            "rowkind.field needs merge-engine=deduplicate",
        ),
    ],
)
def test_create_refuses_bad_rowkind_options(local_store: Any, kwargs: dict[str, Any], match: str) -> None:
    uri = local_store.uri()
    with pytest.raises(InvalidOptionError, match=match):
        lakefmt.create_table(uri, SCHEMA, **kwargs)
    with pytest.raises(lakefmt.NotATableError):
        lakefmt.open_table(uri)


def test_the_rowkind_column_cannot_be_dropped_or_renamed(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"rowkind.field": "op"})
    for change in (lambda u: u.delete_column("op"), lambda u: u.rename_column("op", "kind")):
        with pytest.raises(SchemaEvolutionError, match=r"rowkind\.field"), t.update_schema() as u:
            change(u)
    assert t.table_schema().id == 0
