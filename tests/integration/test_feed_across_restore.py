"""The change feed and incremental reads across a restore, which resets data files' deletion vectors.

The feed follows each data file's deletion vector from snapshot to snapshot and keeps the positions it last
decoded. A restore gives a file back an older vector (or none), so a later vector that deletes as many rows as the
kept one holds other positions: the kept positions may serve only that very vector (issue 36: the feed of
``0..5`` named the live row as deleted, and the incremental scan returned the deleted row)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakefmt

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])


def _upsert(t: lakefmt.Table, rows: dict[int, int]) -> None:
    t.upsert(pa.table({"k": list(rows), "v": list(rows.values())}, schema=SCHEMA))


def _state(t: lakefmt.Table, sid: int) -> dict[int, int]:
    return {r["k"]: r["v"] for r in t.scan(snapshot_id=sid).to_arrow().to_pylist()} if sid else {}


def _replayed(state: dict[int, int], feed: pa.Table) -> dict[int, int]:
    out = dict(state)
    for r in feed.to_pylist():
        if r["_change_type"] in ("insert", "update_postimage"):
            out[r["k"]] = r["v"]
        else:
            out.pop(r["k"], None)
    return out


@pytest.fixture(params=["none", "lookup", "input"])
def restored(request: Any, tmp_path: Any) -> lakefmt.Table:
    """Snapshots: 1 writes keys 0 and 3; 2 deletes 3 (file A's vector: position 1); 3 writes 3 again; 4 restores
    snapshot 1 (A without a vector); 5 deletes 0 (A's vector: position 0, as many positions as at 2)."""
    t = lakefmt.create_table(
        str(tmp_path / "t"), SCHEMA, primary_key=["k"],
        options={"changelog-producer": request.param, "compaction.auto": "false"},
    )  # fmt: skip
    _upsert(t, {0: 2, 3: 1})
    t.delete_keys(pa.table({"k": [3]}))
    _upsert(t, {3: 4})
    assert t.restore(1) is not None
    t.delete_keys(pa.table({"k": [0]}))
    assert t.to_arrow().to_pylist() == [{"k": 3, "v": 1}]
    return t


def test_a_feed_through_a_restore_names_the_row_deleted_after_it(restored: lakefmt.Table) -> None:
    # ``input`` stores a delete by key as the key alone
    value = None if restored.table_schema().table_options.changelog_producer == "input" else 2
    for start in range(5):
        last = [(r["k"], r["v"], r["_change_type"]) for r in restored.changes(start, 5).to_pylist()
                if r["_commit_snapshot"] == 5]  # fmt: skip
        assert last == [(0, value, "delete")], f"changes({start}, 5)"


def test_a_feed_through_a_restore_is_the_difference_of_the_states(restored: lakefmt.Table) -> None:
    for start in range(5):
        for end in range(max(start, 1), 6):
            feed = restored.changes(start, end)
            assert _replayed(_state(restored, start), feed) == _state(restored, end), f"changes({start}, {end})"


def test_an_incremental_scan_through_a_restore_reads_the_live_rows(restored: lakefmt.Table) -> None:
    assert restored.scan(from_snapshot=0, to_snapshot=5).to_arrow().to_pylist() == [{"k": 3, "v": 1}]
    for start in range(5):
        for end in range(max(start, 1), 6):
            got = {r["k"]: r["v"] for r in restored.scan(from_snapshot=start, to_snapshot=end).to_arrow().to_pylist()}
            before = _state(restored, start)
            added = {k: v for k, v in _state(restored, end).items() if before.get(k) != v}
            assert got == added, f"scan(from_snapshot={start}, to_snapshot={end})"
