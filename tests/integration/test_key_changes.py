"""``apply_key_changes``: upserts and deletes by key on a key table, in one snapshot.

Each check reads the table back and holds it to a dict of key -> row computed here; the change feed of the one
snapshot names every change; bad input leaves the table as it was (no snapshot, no file); a lost race re-plans
the deletes and the upserts together on the winner's snapshot."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.errors import InvalidOptionError, KeyTableError, SchemaMismatchError
from lakefmt.rewrite.keys.planners import UpsertPlanner
from lakefmt.rewrite.keys.upsert import apply_key_changes
from lakefmt.spec import CommitKind

SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("seq", pa.int64())])
KEYS = ("k", "dt")


def rows(*items: tuple[int, str, str | None, int | None]) -> pa.Table:
    return pa.table({n: [r[i] for r in items] for i, n in enumerate(SCHEMA.names)}, schema=SCHEMA)


def live(table: lakefmt.Table) -> dict[tuple[int, str], tuple[str, int]]:
    out: dict[tuple[int, str], tuple[str, int]] = {}
    for r in table.to_arrow().to_pylist():
        key = (r["k"], r["dt"])
        assert key not in out, f"two live rows for {key}"
        out[key] = (r["v"], r["seq"])
    latest = table.latest_snapshot()
    assert (latest.total_record_count if latest else 0) == len(out)
    return out


@pytest.fixture
def table(local_store: Any) -> lakefmt.Table:
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEYS), partition_by=["dt"], options={"bucket": "3"})
    t.upsert(rows(*[(k, dt, f"{k}{dt}", 0) for k in range(6) for dt in ("a", "b")]))
    return t


def test_upserts_and_deletes_in_one_snapshot(table: lakefmt.Table) -> None:
    model = live(table)
    before = table.latest_snapshot().id
    upserts = rows((1, "a", "new1a", 1), (7, "b", "new7b", 1), (7, "b", "last7b", 1), (2, "b", "new2b", 1))
    deletes = pa.table({"k": [3, 4, 99], "dt": ["a", "b", "a"], "ignored": [1, 2, 3]})  # 99: no live row
    snap = apply_key_changes(table, upserts, deletes, operation="merge")

    assert snap is not None and snap.id == before + 1 and len(table.snapshots()) == before + 1
    assert snap.commit_kind is CommitKind.APPEND and snap.properties["lakefmt.operation"] == "merge"
    model.update({(1, "a"): ("new1a", 1), (7, "b"): ("last7b", 1), (2, "b"): ("new2b", 1)})
    del model[(3, "a")], model[(4, "b")]
    assert live(table) == model
    feed = table.changes(from_snapshot=before).to_pylist()
    got = sorted((r["_change_type"], r["k"], r["dt"], r["v"]) for r in feed)
    assert got == sorted(
        [
            ("delete", 3, "a", "3a"),
            ("delete", 4, "b", "4b"),
            ("update_preimage", 1, "a", "1a"),
            ("update_postimage", 1, "a", "new1a"),
            ("update_preimage", 2, "b", "2b"),
            ("update_postimage", 2, "b", "new2b"),
            ("insert", 7, "b", "last7b"),
        ]
    )


def test_deletes_alone_and_nothing_to_do(table: lakefmt.Table) -> None:
    model = live(table)
    snap = apply_key_changes(table, None, pa.table({"k": [5], "dt": ["a"]}), operation="delete")
    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    assert snap.properties["lakefmt.operation"] == "delete"
    del model[(5, "a")]
    assert live(table) == model
    count = len(table.snapshots())
    assert apply_key_changes(table, None, pa.table({"k": [5, 42], "dt": ["a", "a"]})) is None  # no live row
    assert apply_key_changes(table, None, None) is None
    assert apply_key_changes(table, SCHEMA.empty_table(), pa.table({"k": pa.array([], pa.int64()), "dt": []})) is None
    assert len(table.snapshots()) == count and live(table) == model


def test_rows_as_dicts(table: lakefmt.Table) -> None:
    model = live(table)
    upserts = [{"k": 1, "dt": "b", "v": "dict", "seq": 4}]
    snap = apply_key_changes(table, upserts, {"k": [0, 2], "dt": ["a", "a"]}, operation="dicts")
    assert snap is not None and snap.properties["lakefmt.operation"] == "dicts"
    model[(1, "b")] = ("dict", 4)
    del model[(0, "a")], model[(2, "a")]
    assert live(table) == model


def test_sequence_field_decides_upserts_but_not_deletes(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=list(KEYS), options={"sequence.field": "seq"})
    t.upsert(rows((1, "a", "v1", 10), (2, "a", "v2", 10), (3, "a", "v3", 10)))
    apply_key_changes(t, rows((1, "a", "older", 5), (2, "a", "newer", 11)), pa.table({"k": [3], "dt": ["a"]}))
    assert live(t) == {(1, "a"): ("v1", 10), (2, "a"): ("newer", 11)}


@pytest.mark.parametrize(
    ("upserts", "deletes", "error", "match"),
    [
        (rows((1, "a", "x", 1)), pa.table({"k": [1], "dt": ["a"]}), KeyTableError, "both upserted and deleted.*k=1"),
        (None, pa.table({"k": [1]}), SchemaMismatchError, "needs the key column.*dt"),
        (None, pa.table({"k": ["one"], "dt": ["a"]}), SchemaMismatchError, "apply_key_changes deletes"),
        (pa.table({"k": [1]}), None, SchemaMismatchError, "dt"),
    ],
)
def test_bad_input_changes_nothing(
    table: lakefmt.Table, upserts: Any, deletes: Any, error: type[Exception], match: str
) -> None:
    model, files = live(table), file_listing(table.io)
    with pytest.raises(error, match=match):
        apply_key_changes(table, upserts, deletes)
    with pytest.raises(InvalidOptionError, match="operation"):
        apply_key_changes(table, rows((1, "a", "x", 1)), None, operation="")
    assert live(table) == model and file_listing(table.io) == files


def test_needs_a_key_table(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA)
    with pytest.raises(KeyTableError, match="apply_key_changes needs a key table"):
        apply_key_changes(t, rows((1, "a", "x", 1)), None)


def test_a_lost_race_plans_deletes_and_upserts_again(table: lakefmt.Table, monkeypatch: Any) -> None:
    """A concurrent upsert lands between this commit's plan and its publish, on keys it deletes and upserts: the
    commit loses the snapshot id, plans again on the winner's snapshot, and lands after it."""
    other = lakefmt.open_table(table.uri)
    plan = UpsertPlanner.plan
    plans: list[int | None] = []

    def racing(self: UpsertPlanner, latest: Any, schema: Any, added: Any) -> Any:
        out = plan(self, latest, schema, added)
        if self.deletes is not None:
            plans.append(latest.id if latest else None)
            if len(plans) == 1:  # the competitor commits now, before this commit publishes
                other.upsert(rows((3, "a", "theirs3a", 2), (1, "a", "theirs1a", 2), (8, "a", "theirs8a", 2)))
        return out

    monkeypatch.setattr(UpsertPlanner, "plan", racing)
    model = live(table)
    start = table.latest_snapshot().id
    snap = apply_key_changes(table, rows((1, "a", "mine1a", 3)), pa.table({"k": [3, 8], "dt": ["a", "a"]}))
    assert plans == [start, start + 1]  # planned again on the competitor's snapshot
    assert snap is not None and snap.id == start + 2
    model[(1, "a")] = ("mine1a", 3)
    del model[(3, "a")]  # its new row, the competitor's, is deleted too, as is key 8 that only the competitor wrote
    assert live(table) == model
