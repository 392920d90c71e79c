"""A snapshot's ``removesRows``: whether its commit deleted or replaced rows that were live before it, decided by
what the commit did to rows and not by its kind (:mod:`lakefmt.read.removals`). Every kind of commit on a key table
with ``rowkind.field`` and on a plain table records it, and a snapshot without the field (written before it) is
judged the same from its delta manifests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError
from lakefmt.read.removals import removes_rows
from lakefmt.rewrite.keys.upsert import apply_key_changes
from lakefmt.spec import Snapshot

KEYED = pa.schema([("id", pa.int64()), ("v", pa.string()), ("op", pa.string())])
PLAIN = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def rows(ids: list[int], op: str = "+I", v: str = "x") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids), "op": [op] * len(ids)}, schema=KEYED)


def judged(table: lakefmt.Table, snap: Snapshot | None) -> bool:
    """The snapshot's recorded ``removesRows``, checked against the judgement of the same snapshot without it."""
    assert snap is not None and snap.removes_rows is not None
    target = table.rewrite_target()
    old = dataclasses.replace(snap, removes_rows=None)
    assert removes_rows(target.io, target.store, old) is snap.removes_rows, snap
    assert removes_rows(target.io, target.store, snap) is snap.removes_rows
    return snap.removes_rows


def test_key_table_commits_record_whether_they_removed_rows(tmp_path: Path) -> None:
    t = lakefmt.create_table(
        str(tmp_path / "k"), KEYED, primary_key=["id"], options={"bucket": "2", "rowkind.field": "op"}
    )
    assert not judged(t, t.append(rows([1, 2, 3, 4, 5, 6])))  # a pure append
    assert not judged(t, t.upsert(rows([7, 8])))  # new keys only
    assert not judged(t, t.upsert(rows([9, 9, 9], v="twice")))  # a key twice: the loser was never live
    assert not judged(t, t.append(rows([50], op="-D")))  # a delete of a key without a live row deletes nothing
    assert not judged(t, apply_key_changes(t, rows([10]), rows([51])))  # a new key; a delete of no live row
    assert judged(t, t.append(rows([1], op="-D")))  # a row-kind delete through append
    assert judged(t, t.upsert(rows([2], op="-D")))  # ... through upsert
    assert judged(t, t.upsert(rows([3], v="new")))  # an upsert replacing a row
    assert judged(t, apply_key_changes(t, None, rows([4])))  # apply_key_changes' delete (kind OVERWRITE)
    assert judged(t, apply_key_changes(t, rows([11]), rows([5])))  # ... with an upsert (kind APPEND)
    assert judged(t, t.delete_keys(pa.table({"id": [6]})))
    assert judged(t, t.delete("id = 7"))
    report = (
        t.merge(rows([8], v="merged"), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .execute()
    )
    assert judged(t, t.latest_snapshot()) and report.snapshot_id == t.latest_snapshot().id  # type: ignore[union-attr]
    assert not judged(t, t.compact(min_files=2).snapshot)  # rows moved unchanged
    assert judged(t, t.overwrite(rows([100])))
    assert sorted(t.to_arrow().column("id").to_pylist()) == [100]


def test_plain_table_commits_record_whether_they_removed_rows(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "p"), PLAIN, partition_by=["dt"])
    data = pa.table({"id": [1, 2, 3, 4], "dt": ["a", "b", "a", "b"]}, schema=PLAIN)
    assert not judged(t, t.overwrite(data))  # an overwrite of an empty table replaces nothing
    assert not judged(t, t.append(data))
    assert not judged(t, t.overwrite(pa.table({"id": [5], "dt": ["c"]}, schema=PLAIN), partition={"dt": "c"}))
    assert judged(t, t.delete("id = 1"))  # copy-on-write: a file rewritten without the row
    assert not judged(t, t.compact(min_files=2).snapshot)
    assert judged(t, t.overwrite(pa.table({"id": [9], "dt": ["a"]}, schema=PLAIN), partition={"dt": "a"}))
    assert judged(t, t.restore(snapshot_id=2))


def test_the_field_in_the_snapshot_file(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "j"), PLAIN)
    snap = t.append(pa.table({"id": [1], "dt": ["a"]}, schema=PLAIN))
    assert snap is not None
    for value in (True, False, None):
        again = Snapshot.from_json(dataclasses.replace(snap, removes_rows=value).to_json())
        assert again.removes_rows is value
    assert b"removesRows" not in dataclasses.replace(snap, removes_rows=None).to_json()
    bad = dataclasses.replace(snap, removes_rows=None).to_json().replace(b'"nonce"', b'"removesRows":1,"nonce"')
    with pytest.raises(CorruptMetadataError, match="removesRows"):
        Snapshot.from_json(bad)
