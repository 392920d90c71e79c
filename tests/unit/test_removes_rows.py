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


KEY = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])


def test_a_restore_that_adds_a_vector_file_again_removes_rows(tmp_path: Path) -> None:
    """Found: a restore that only ADDs a deletion-vector file back (to a snapshot whose vector marked a row of a
    file that stays live) recorded ``removesRows=false``, judged by whether it DELETEs a file; the plain stream then
    read it as an append and failed on the vector. The restore now compares the vectors before and after per file."""
    t = lakefmt.create_table(str(tmp_path / "r"), KEY, primary_key=["k"], options={"compaction.auto": "false"})
    t.upsert(pa.table({"k": [1, 2], "v": [10, 20]}, schema=KEY))
    t.delete_keys(pa.table({"k": [1]}))
    assert judged(t, t.restore(snapshot_id=1))  # removes the vector file: k=1 back, a change of rows
    assert judged(t, t.restore(snapshot_id=2))  # ADDs the vector file again: k=1 deleted
    assert t.to_arrow().to_pylist() == [{"k": 2, "v": 20}]
    assert t.changes(3, 4).column("_change_type").to_pylist() == ["delete"]


def test_a_restore_to_a_merge_on_read_merge_removes_rows(tmp_path: Path) -> None:
    """The same on a table without a key under ``write.delete.mode=merge-on-read``: a MERGE marks the old row in a
    vector and adds the new one; a restore to before it, then a restore to it (ADDs the MERGE's data and vector
    files again: the vector marks a row of the file that stayed live)."""
    options = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"}
    t = lakefmt.create_table(str(tmp_path / "m"), PLAIN, options=options)
    t.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=PLAIN))
    t.merge(
        pa.table({"id": [1], "dt": ["z"]}, schema=PLAIN), "t.id = s.id", source_alias="s", target_alias="t"
    ).when_matched_update_all().execute()
    merged = t.latest_snapshot()
    assert merged is not None and judged(t, merged)
    assert judged(t, t.restore(snapshot_id=merged.id - 1))
    assert judged(t, t.restore(snapshot_id=merged.id))
    assert sorted(t.to_arrow().column("dt").to_pylist()) == ["b", "z"]


def test_a_restore_adding_only_files_removes_no_rows(tmp_path: Path) -> None:
    """A restore that only ADDs data files back (to before a delete of whole files: here, after an overwrite of an
    empty partition and a restore to before it) adds rows: ``false``, as its vectors mark nothing that stays."""
    t = lakefmt.create_table(str(tmp_path / "a"), PLAIN, partition_by=["dt"])
    t.append(pa.table({"id": [1], "dt": ["a"]}, schema=PLAIN))
    t.append(pa.table({"id": [2], "dt": ["b"]}, schema=PLAIN))
    assert judged(t, t.restore(snapshot_id=1))  # removes b's file
    assert not judged(t, t.restore(snapshot_id=2))  # adds it back: rows added only
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]


def _edit(table: lakefmt.Table, sid: int, old: bytes, new: bytes) -> lakefmt.Table:
    path = Path(table.uri) / "snapshot" / f"snapshot-{sid}"
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new))
    return lakefmt.open_table(table.uri)


@pytest.mark.parametrize("change", ["overwrite", "upsert replacing a row", "restore adding a vector again"])
def test_a_recorded_false_that_the_delta_contradicts_is_refused(tmp_path: Path, change: str) -> None:
    """Found: a hand-edited ``removesRows=false`` on a snapshot that deleted a file holding rows was trusted (the
    stream emitted the deleted row, and k=2 twice). A reader that has the delta at hand (``check=True``: the plain
    stream) now checks a recorded ``false`` against it: :class:`CorruptMetadataError` naming the snapshot."""
    t = lakefmt.create_table(str(tmp_path / "h"), KEY, primary_key=["k"], options={"compaction.auto": "false"})
    t.upsert(pa.table({"k": [1, 2], "v": [10, 20]}, schema=KEY))
    if change == "overwrite":
        snap = t.overwrite(pa.table({"k": [2], "v": [21]}, schema=KEY))
    elif change == "upsert replacing a row":
        snap = t.upsert(pa.table({"k": [2], "v": [21]}, schema=KEY))
    else:
        t.delete_keys(pa.table({"k": [1]}))
        t.restore(snapshot_id=1)
        snap = t.restore(snapshot_id=2)
    assert snap is not None and snap.removes_rows is True
    t = _edit(t, snap.id, b'"removesRows":true', b'"removesRows":false')
    target = t.rewrite_target()
    edited = t.snapshot(snap.id)
    assert removes_rows(target.io, target.store, edited) is False  # trusted when not checked
    with pytest.raises(CorruptMetadataError, match=rf"snapshot {snap.id} records removesRows=false"):
        removes_rows(target.io, target.store, edited, check=True)
    earlier = t.snapshot(1)  # a true false passes the check
    assert removes_rows(target.io, target.store, earlier, check=True) is False
