"""Reads of snapshots that expire: a snapshot below the earliest one an expiration announced (an interrupted run
leaves it half-deleted) is not listed, a read of it that fails says so, and a scan planned before its snapshot's
files were deleted says which snapshot expired. Both raise :class:`SnapshotNotFoundError`, never the storage's raw
error."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import SnapshotNotFoundError
from lakefmt.maintenance.expire import apply_expiration, plan_expiration
from lakefmt.maintenance.report import FileClass
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64())])
OPTS = {"write-only": "true"}  # one snapshot per commit, and nothing expires unless asked


def _table(uri: str, commits: int) -> lakefmt.Table:
    t = lakefmt.create_table(uri, SCHEMA, options=OPTS)
    for i in range(commits):  # each overwrite removes the previous file: expiring a snapshot deletes its file
        t.overwrite(pa.table({"id": [i]}, schema=SCHEMA))
    return t


class _Stop(BaseException):
    pass


def _interrupted_expiration(t: lakefmt.Table, keep: int) -> None:
    """Expire all but ``keep`` snapshots, interrupted (as by ^C) once the data files are deleted: the expired
    snapshots' files and manifests are still there."""
    store = MetaStore(t.io)
    plan = plan_expiration(store, retain_max=keep)
    data = sum(d.kind is FileClass.DATA for d in plan.deletions)
    assert 0 < data < len(plan.deletions)

    def progress(done: int, total: int, path: str) -> None:
        if done == data:
            raise _Stop

    with pytest.raises(_Stop):
        apply_expiration(t.io, store, plan, progress=progress)


def test_an_interrupted_expiration_hides_its_half_expired_snapshots(tmp_path: Any) -> None:
    t = _table(str(tmp_path / "t"), 8)
    _interrupted_expiration(t, keep=3)
    fresh = lakefmt.open_table(t.uri)
    assert fresh.io.exists(layout.snapshot_path(1))  # the interrupted run left the file ...
    assert [s.id for s in fresh.snapshots()] == [6, 7, 8]  # ... but the snapshot is no longer listed
    assert [h["version"] for h in fresh.history()] == [8, 7, 6]
    assert fresh.snapshot(1).id == 1  # its metadata is still there (a hand-made hint must hide no data)
    for read in (
        lambda: fresh.to_arrow(snapshot_id=1),
        lambda: fresh.scan(snapshot_id=2, filter="id > 0").count(),
        lambda: list(fresh.scan(snapshot_id=3).to_batches()),
        lambda: fresh.scan(from_snapshot=1, to_snapshot=5).to_arrow(),
        lambda: fresh.changes(from_snapshot=1, to_snapshot=8),
    ):
        with pytest.raises(SnapshotNotFoundError, match="expire again"):
            read()
    assert fresh.to_arrow(snapshot_id=6).column("id").to_pylist() == [5]
    assert fresh.to_arrow().column("id").to_pylist() == [7]
    report = fresh.expire_snapshots(retain_max=3)  # the rerun finishes the job
    assert report.kept_snapshots == (6, 8)
    assert not fresh.io.exists(layout.snapshot_path(1))
    with pytest.raises(SnapshotNotFoundError, match="has expired; the earliest retained snapshot is 6"):
        fresh.to_arrow(snapshot_id=1)


def test_a_garbage_earliest_hint_hides_nothing(tmp_path: Any) -> None:
    t = _table(str(tmp_path / "t"), 3)
    t.io.write(layout.EARLIEST, b"99", sync=False)  # names no snapshot: not believed
    assert [s.id for s in t.snapshots()] == [1, 2, 3]
    assert t.to_arrow(snapshot_id=1).column("id").to_pylist() == [0]


@pytest.mark.parametrize("read", ["to_arrow", "to_batches", "filtered_count"])
def test_a_scan_planned_before_its_snapshot_expired_names_it(tmp_path: Any, read: str) -> None:
    t = _table(str(tmp_path / "t"), 5)
    scan = t.scan(snapshot_id=2, filter="id >= 0" if read == "filtered_count" else None)
    assert len(scan.files()) == 1  # planned: the file of snapshot 2, which snapshot 3 removed
    t.expire_snapshots(retain_max=1)
    expected = "snapshot 2 has expired; the earliest retained snapshot is 5, and files this scan needs were deleted"
    with pytest.raises(SnapshotNotFoundError, match=expected):
        if read == "to_arrow":
            scan.to_arrow()
        elif read == "to_batches":
            list(scan.to_batches())
        else:
            scan.count()


def test_a_file_missing_from_a_retained_snapshot_is_not_called_expired(tmp_path: Any) -> None:
    t = _table(str(tmp_path / "t"), 2)
    scan = t.scan()
    (path,) = scan.files()
    t.io.delete(path.path)  # deleted behind the table's back: the storage's error stands
    with pytest.raises(OSError):
        scan.to_arrow()


def test_a_hint_alone_never_expires_a_readable_snapshot(tmp_path: Any) -> None:
    """A hand-made EARLIEST naming the latest snapshot (or a run that stopped before deleting anything): the
    snapshots below it are intact, and expire with the table's rules keeps them."""
    t = _table(str(tmp_path / "t"), 4)
    t.io.write(layout.EARLIEST, b"4", sync=False)
    report = t.expire_snapshots()
    assert report.expired_snapshots == [] and report.total_files == 0
    assert MetaStore(t.io).snapshot_ids() == [1, 2, 3, 4]
    assert t.to_arrow(snapshot_id=1).column("id").to_pylist() == [0]
