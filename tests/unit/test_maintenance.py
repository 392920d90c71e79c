"""Snapshot expiration and orphan-file removal: which snapshots go, that every retained snapshot still reads
exactly as before, that expire leaves no garbage, crash-safety of expire, and what orphan-clean may and may
not delete (temp files, young files, referenced files, symlinks, paths escaping the root, non-tables)."""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing, sorted_ids
from hypothesis import given, settings
from hypothesis import strategies as st

import lakefmt
from lakefmt.errors import NotATableError, PathOutsideTableError, SnapshotNotFoundError
from lakefmt.io import FileIO, file_io_for
from lakefmt.maintenance import (
    FileClass,
    MaintenanceReport,
    apply_expiration,
    plan_expiration,
    referenced_files,
    select_expired,
)
from lakefmt.maintenance import expire_snapshots as lib_expire
from lakefmt.maintenance import remove_orphan_files as lib_orphans
from lakefmt.meta.store import MetaStore
from lakefmt.spec import CommitKind, FileKind, Snapshot, layout
from lakefmt.spec.manifest import encode_manifest
from lakefmt.spec.manifest_list import decode_manifest_list, encode_manifest_list

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
DAY_MS = 86_400_000
HINTS = {layout.LATEST, layout.EARLIEST}

#: for tests whose logic does not depend on the backend: S3 (moto) costs ~20 ms a request
local_and_memory = pytest.mark.parametrize("store", ["local", "memory"], indirect=True)


# -- helpers ---------------------------------------------------------------------------------------------


def _batch(ids: range | list[int], dt: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [f"{dt}-{i}" for i in ids]}, schema=SCHEMA)


def _create(store: Any) -> lakefmt.Table:
    return create_table_in(store, SCHEMA, partition_by=["dt"])


def _history(t: lakefmt.Table) -> dict[int, list[int]]:
    """Eight commits mixing appends, a partition overwrite and a whole-table overwrite, so files added early
    are deleted late, files added late are deleted early, and some survive everything. Returns the rows
    (ids) every snapshot holds."""
    ops: list[Callable[[], Snapshot | None]] = [
        lambda: t.append(pa.concat_tables([_batch(range(0, 3), "a"), _batch(range(3, 6), "b")])),
        lambda: t.append(pa.concat_tables([_batch(range(6, 8), "a"), _batch(range(8, 10), "c")])),
        lambda: t.overwrite(_batch(range(10, 12), "a"), partition={"dt": "a"}),
        lambda: t.append(_batch(range(12, 14), "b")),
        lambda: t.overwrite(pa.concat_tables([_batch(range(14, 16), "b"), _batch(range(16, 18), "d")])),
        lambda: t.append(_batch(range(18, 20), "a")),
        lambda: t.overwrite(_batch(range(20, 21), "b"), partition={"dt": "b"}),
        lambda: t.append(pa.concat_tables([_batch(range(21, 23), "c"), _batch(range(23, 24), "d")])),
    ]
    expected = {}
    for op in ops:
        snap = op()
        assert snap is not None
        expected[snap.id] = sorted_ids(t, snap.id)
    assert expected[3] == [3, 4, 5, 8, 9, 10, 11]
    assert expected[5] == [14, 15, 16, 17]
    assert expected[8] == [16, 17, 18, 19, 20, 21, 22, 23]
    return expected


def _assert_exactly_referenced(t: lakefmt.Table) -> None:
    """The store holds exactly the files the retained snapshots reference (hints may be absent)."""
    files = set(file_listing(t.io))
    refs = referenced_files(MetaStore(t.io))
    assert files - refs == set(), "garbage left behind"
    assert refs - files <= HINTS, "referenced files are missing"


def _assert_reads(t: lakefmt.Table, expected: dict[int, list[int]], retained: range) -> None:
    for sid, ids in expected.items():
        if sid in retained:
            assert sorted_ids(t, sid) == ids, f"snapshot {sid} changed"
        else:
            with pytest.raises(SnapshotNotFoundError, match="expired"):
                t.scan(snapshot_id=sid)
            with pytest.raises(SnapshotNotFoundError):
                t.snapshot(sid)
    assert [s.id for s in t.snapshots()] == list(retained)


def _summary(report: MaintenanceReport) -> dict[str, Any]:
    d = report.to_dict()
    d.pop("dry_run")
    return d


def _snap(i: int, time_millis: int) -> Snapshot:
    return Snapshot(
        id=i,
        schema_id=0,
        base_manifest_list="base",
        base_manifest_list_size=0,
        delta_manifest_list="delta",
        delta_manifest_list_size=0,
        commit_user="u",
        commit_identifier=i,
        commit_kind=CommitKind.APPEND,
        time_millis=time_millis,
        total_record_count=0,
        delta_record_count=0,
    )


# -- select_expired ----------------------------------------------------------------------------------------


def test_select_expired_rules() -> None:
    snaps = [_snap(i + 1, 1000 * i) for i in range(10)]  # committed at 0 s, 1 s, ... 9 s
    now = 10_000
    # by count only
    assert select_expired(snaps, 1, 3, None, now) == 7
    assert select_expired(snaps, 1, 10, None, now) == 0
    assert select_expired(snaps, 1, 50, None, now) == 0
    assert select_expired(snaps, 1, None, None, now) == 0
    # by age: committed before now - older_than (4.5 s): the ones at 0..4 s
    assert select_expired(snaps, 1, None, 5500, now) == 5
    assert select_expired(snaps, 1, None, 6000, now) == 4  # exactly at the horizon is kept
    # never the latest, even when everything is old
    assert select_expired(snaps, 1, None, 0, now + 10**9) == 9
    assert select_expired(snaps, 1, 1, 0, now) == 9
    # retain_min wins over age and over nothing else
    assert select_expired(snaps, 4, None, 0, now) == 6
    assert select_expired(snaps, 8, None, 5500, now) == 2
    # retain_max applies whatever the age; the larger of the two rules wins
    assert select_expired(snaps, 1, 2, 10**9, now) == 8
    assert select_expired(snaps, 1, 8, 5500, now) == 5
    assert select_expired(snaps, 1, 3, 5500, now) == 7
    # nothing to expire
    assert select_expired([], 1, 1, 0, now) == 0
    assert select_expired(snaps[:1], 1, 1, 0, now) == 0
    with pytest.raises(ValueError, match="retain_min"):
        select_expired(snaps, 0, None, None, now)
    with pytest.raises(ValueError, match="retain_max"):
        select_expired(snaps, 5, 4, None, now)


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 5000), min_size=0, max_size=30),
    retain_min=st.integers(1, 10),
    extra=st.none() | st.integers(0, 10),
    older_than=st.none() | st.integers(0, 60_000),
)
def test_select_expired_properties(gaps: list[int], retain_min: int, extra: int | None, older_than: int | None) -> None:
    times = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    snaps = [_snap(i + 1, t) for i, t in enumerate(times)]
    now = (times[-1] if times else 0) + 1000
    retain_max = None if extra is None else retain_min + extra
    n = len(snaps)
    count = select_expired(snaps, retain_min, retain_max, older_than, now)
    assert 0 <= count <= max(0, n - retain_min)  # at least retain_min kept, and never the latest
    assert count < n or n == 0
    if retain_max is not None:
        assert n - count <= max(retain_max, retain_min)  # at most retain_max kept
    for i, s in enumerate(snaps):
        forced = retain_max is not None and i < n - retain_max
        if i < count:  # each expired one is over the count or old enough
            assert forced or (older_than is not None and s.time_millis < now - older_than)
        elif i < n - retain_min:  # each kept one that could go is young and not over the count
            assert not forced
            assert older_than is None or s.time_millis >= now - older_than


@pytest.mark.parametrize("store", ["memory"], indirect=True)
def test_argument_validation(store: Any) -> None:
    t = _create(store)
    t.append(_batch(range(3), "a"))
    with pytest.raises(ValueError, match="retain_min"):
        t.expire_snapshots(retain_min=0)
    with pytest.raises(ValueError, match="retain_max"):
        t.expire_snapshots(retain_min=3, retain_max=2)
    with pytest.raises(ValueError):
        t.expire_snapshots(older_than="7x")
    with pytest.raises(ValueError):
        t.expire_snapshots(older_than=-1)
    with pytest.raises(ValueError):
        t.remove_orphan_files(older_than=datetime.timedelta(seconds=-1))
    with pytest.raises(TypeError):
        t.remove_orphan_files(older_than=[1])  # type: ignore[arg-type]
    assert t.expire_snapshots(retain_max=1).total_files == 0  # one snapshot: nothing to expire


# -- expire --------------------------------------------------------------------------------------------------


def test_expire_by_count_with_overwrites(store: Any) -> None:
    t = _create(store)
    expected = _history(t)
    before = file_listing(t.io)
    _assert_exactly_referenced(t)

    dry = t.expire_snapshots(retain_max=3, dry_run=True)
    assert file_listing(t.io) == before, "a dry run deleted something"
    report = t.expire_snapshots(retain_max=3)
    assert _summary(report) == _summary(dry)
    assert report.dry_run is False and dry.dry_run is True

    assert report.expired_snapshots == [1, 2, 3, 4, 5]
    assert report.kept_snapshots == (6, 8)
    _assert_reads(t, expected, range(6, 9))
    after = file_listing(t.io)
    assert set(before) - set(after) == set(report.paths)  # deleted exactly what it reported
    assert set(after) - set(before) == {layout.EARLIEST}
    assert t.io.read(layout.EARLIEST).decode().strip() == "6"
    # counts and bytes per kind are the real ones
    for kind in FileClass:
        entries = report.deleted.get(kind, [])
        assert report.count(kind) == len(entries)
        assert report.bytes(kind) == sum(before[p] for p, _ in entries)
    assert report.count(FileClass.SNAPSHOT) == 5
    assert report.count(FileClass.MANIFEST_LIST) > 0
    # data files of rows no retained snapshot holds are gone: 0..13 were overwritten by snapshot 5
    assert report.count(FileClass.DATA) > 0
    assert all(kind.value in report.to_dict()["files"] for kind in FileClass)

    _assert_exactly_referenced(t)
    assert t.remove_orphan_files(older_than=0).total_files == 0, "expire left garbage"
    assert file_listing(t.io) == after


@local_and_memory
def test_expire_keeps_files_of_retained_snapshots_after_late_overwrite(store: Any) -> None:
    """Expire up to snapshot 4: files added by expired snapshots and deleted only by a retained one (the
    whole-table overwrite at 5) must stay, since snapshot 4 still reads them."""
    t = _create(store)
    expected = _history(t)
    report = t.expire_snapshots(retain_max=5)
    assert report.expired_snapshots == [1, 2, 3]
    _assert_reads(t, expected, range(4, 9))
    _assert_exactly_referenced(t)
    assert t.remove_orphan_files(older_than=0).total_files == 0
    # and expiring further later, by a second run, still leaves exactly the referenced files
    assert t.expire_snapshots(retain_max=2).expired_snapshots == [4, 5, 6]
    _assert_reads(t, expected, range(7, 9))
    _assert_exactly_referenced(t)
    assert t.remove_orphan_files(older_than=0).total_files == 0


class _Clock:
    """Replaces the committer's clock so snapshots get commit times days apart."""

    def __init__(self, start_ms: int) -> None:
        self.ms = start_ms

    def time(self) -> float:
        return self.ms / 1000


@local_and_memory
def test_expire_by_age(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    now_ms = int(time.time() * 1000)
    clock = _Clock(now_ms - 30 * DAY_MS)
    created = _create(store)
    t = lakefmt.Table(created.io, MetaStore(created.io), clock=clock.time)
    original_append, original_overwrite = t.append, t.overwrite

    def tick(fn: Callable[..., Snapshot | None]) -> Callable[..., Snapshot | None]:
        def wrapped(*a: Any, **k: Any) -> Snapshot | None:
            snap = fn(*a, **k)
            clock.ms += 3 * DAY_MS
            return snap

        return wrapped

    monkeypatch.setattr(t, "append", tick(original_append))
    monkeypatch.setattr(t, "overwrite", tick(original_overwrite))
    expected = _history(t)  # snapshots 1..8 committed 30, 27, ..., 9 days ago
    for sid in expected:
        assert t.snapshot(sid).time_millis == now_ms - 30 * DAY_MS + (sid - 1) * 3 * DAY_MS
    clock.ms = now_ms  # expiration counts back from the table's clock

    # nothing is older than 40 days
    nothing = t.expire_snapshots(older_than="40d", retain_min=1)
    assert nothing.expired_snapshots == [] and nothing.total_files == 0
    # older than 20 days: snapshots 1..4 (30, 27, 24, 21 days ago)
    dry = t.expire_snapshots(older_than=datetime.timedelta(days=20), retain_min=1, dry_run=True)
    report = t.expire_snapshots(older_than=datetime.timedelta(days=20), retain_min=1)
    assert report.expired_snapshots == [1, 2, 3, 4]
    assert _summary(report) == _summary(dry)
    _assert_reads(t, expected, range(5, 9))
    _assert_exactly_referenced(t)
    # everything is older than 1 day, but retain_min keeps 3
    report = t.expire_snapshots(older_than="1d", retain_min=3)
    assert report.expired_snapshots == [5]
    _assert_reads(t, expected, range(6, 9))
    # seconds work too; the latest is never expired
    report = t.expire_snapshots(older_than=0, retain_min=1)
    assert report.expired_snapshots == [6, 7]
    _assert_reads(t, expected, range(8, 9))
    _assert_exactly_referenced(t)
    assert t.remove_orphan_files(older_than=0).total_files == 0
    assert sorted_ids(t) == expected[8]


@local_and_memory
def test_expire_is_idempotent(store: Any) -> None:
    t = _create(store)
    expected = _history(t)
    first = t.expire_snapshots(retain_max=4)
    assert first.expired_snapshots == [1, 2, 3, 4]
    after = file_listing(t.io)
    for _ in range(2):
        again = t.expire_snapshots(retain_max=4)
        assert again.expired_snapshots == [] and again.total_files == 0
        assert again.kept_snapshots == (5, 8)
        assert file_listing(t.io) == after
    _assert_reads(t, expected, range(5, 9))


@local_and_memory
def test_plan_then_apply(store: Any) -> None:
    """The plan decides and deletes nothing; applying it deletes exactly the planned files in the planned order
    (data, manifests, manifest lists, snapshots oldest first), with EARLIEST written before and after."""
    t = _create(store)
    expected = _history(t)
    before = file_listing(t.io)
    plan = plan_expiration(MetaStore(t.io), retain_max=3)
    assert file_listing(t.io) == before, "planning deleted or wrote something"
    assert plan.expired == (1, 2, 3, 4, 5) and plan.kept == (6, 8) and plan.new_earliest == 6
    kinds = [d.kind for d in plan.deletions]
    order = [FileClass.DATA, FileClass.MANIFEST, FileClass.MANIFEST_LIST, FileClass.SNAPSHOT]
    assert kinds == sorted(kinds, key=order.index)
    assert {FileClass.DATA, FileClass.MANIFEST_LIST, FileClass.SNAPSHOT} <= set(kinds)
    assert [d.path for d in plan.deletions if d.kind is FileClass.SNAPSHOT] == [
        layout.snapshot_path(i) for i in range(1, 6)
    ]
    assert all(d.size == before[d.path] for d in plan.deletions if d.kind is not FileClass.SNAPSHOT)
    # a later plan that finds nothing to expire still says what is kept
    assert plan_expiration(MetaStore(t.io), retain_max=10).expired == ()

    deleted: list[str] = []
    report = apply_expiration(t.io, MetaStore(t.io), plan, progress=lambda done, total, path: deleted.append(path))
    assert deleted == [d.path for d in plan.deletions]
    assert report.expired_snapshots == list(plan.expired) and report.kept_snapshots == plan.kept
    assert set(before) - set(file_listing(t.io)) == set(deleted)
    assert t.io.read(layout.EARLIEST).decode().strip() == "6"
    _assert_reads(t, expected, range(6, 9))
    _assert_exactly_referenced(t)


def test_plan_expiration_counts_age_from_now_ms(local_store: Any) -> None:
    t = _create(local_store)
    _history(t)
    last = t.latest_snapshot()
    assert last is not None
    store = MetaStore(t.io)
    assert plan_expiration(store, older_than_ms=DAY_MS).expired == ()
    later = plan_expiration(store, older_than_ms=DAY_MS, now_ms=last.time_millis + 2 * DAY_MS)
    assert later.expired == tuple(range(1, 8)) and later.kept == (8, 8)


def test_dry_run_on_fresh_table_and_no_commits(store: Any) -> None:
    t = _create(store)
    report = t.expire_snapshots(retain_max=1, older_than=0)
    assert report.expired_snapshots == [] and report.kept_snapshots is None and report.total_files == 0
    assert t.remove_orphan_files(older_than=0).total_files == 0
    assert set(file_listing(t.io)) == {layout.schema_path(0)}


# -- crash safety of expire ----------------------------------------------------------------------------------


def _save(io: FileIO) -> dict[str, bytes]:
    return {f.path: io.read(f.path) for f in io.walk()}


def _restore(io: FileIO, files: dict[str, bytes]) -> None:
    """Put back the files saved by :func:`_save` (expire only deletes files and writes EARLIEST)."""
    present = {f.path for f in io.walk()}
    for path in present - set(files):
        io.delete(path)
    for path in set(files) - present:
        io.write(path, files[path])


class _Crash(OSError):
    pass


def _fail_deletes_after(
    monkeypatch: pytest.MonkeyPatch, io: FileIO, allowed: int, *, count_missing: bool = True
) -> list[str]:
    """Make ``io``'s class delete fail (as a dying process would stop) after ``allowed`` deletes (only of
    files that exist, with ``count_missing=False``)."""
    cls = type(io)
    original = cls.delete
    done: list[str] = []

    def delete(self: FileIO, rel: str) -> None:
        if not count_missing:
            try:
                self.read(rel)
            except FileNotFoundError:
                return
        if len(done) >= allowed:
            raise _Crash(f"injected crash before deleting {rel}")
        original(self, rel)
        done.append(rel)

    monkeypatch.setattr(cls, "delete", delete)
    return done


@local_and_memory
def test_expire_crash_at_every_step_then_rerun(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _create(store)
    expected = _history(t)
    saved = _save(t.io)
    plan = t.expire_snapshots(retain_max=3, dry_run=True)
    final = (set(saved) - set(plan.paths)) | {layout.EARLIEST}
    n = plan.total_files
    assert n > 10
    for k in range(n):
        _restore(t.io, saved)
        done = _fail_deletes_after(monkeypatch, t.io, k)
        with pytest.raises(_Crash):
            lakefmt.open_table(t.uri, store.storage_options).expire_snapshots(retain_max=3)
        monkeypatch.undo()
        assert len(done) == k
        # readable after the crash: the latest, and every snapshot that is to be retained
        t2 = lakefmt.open_table(t.uri, store.storage_options)
        for sid in range(6, 9):
            assert sorted_ids(t2, sid) == expected[sid], f"crash after {k} deletes broke snapshot {sid}"
        assert t2.latest_snapshot() is not None and t2.latest_snapshot().id == 8  # type: ignore[union-attr]
        if k % 2:  # orphan-clean meanwhile: the half-expired history must neither trip it nor cost a retained file
            orphans = t2.remove_orphan_files(older_than=0)
            assert set(orphans.paths) <= set(plan.paths)
            for sid in range(6, 9):
                assert sorted_ids(t2, sid) == expected[sid], f"orphan-clean after a crash at {k} broke snapshot {sid}"
        # running expire again finishes, and ends where an uninterrupted run ends
        rerun = t2.expire_snapshots(retain_max=3)
        assert set(rerun.paths) <= set(plan.paths)
        assert set(file_listing(t2.io)) == final, f"crash after {k} deletes: rerun did not finish the job"
        _assert_reads(t2, expected, range(6, 9))
    _assert_exactly_referenced(t)
    assert t.remove_orphan_files(older_than=0).total_files == 0


def test_expire_crashing_repeatedly_converges(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that dies after every few deletes (of files still there), rerun until one finishes: each step
    leaves a readable table, and the crashes fall in every phase (data, manifests, lists, snapshots)."""
    t = _create(store)
    expected = _history(t)
    plan = t.expire_snapshots(retain_max=2, dry_run=True)
    final = (set(file_listing(t.io)) - set(plan.paths)) | {layout.EARLIEST}
    budget = 3 if store.kind != "s3" else plan.total_files // 2 + 1  # S3: one crash, mid-metadata
    attempt = 0
    for attempt in range(plan.total_files):  # noqa: B007
        _fail_deletes_after(monkeypatch, t.io, budget, count_missing=False)
        try:
            lakefmt.open_table(t.uri, store.storage_options).expire_snapshots(retain_max=2)
            finished = True
        except _Crash:
            finished = False
        monkeypatch.undo()
        t2 = lakefmt.open_table(t.uri, store.storage_options)
        assert sorted_ids(t2) == expected[8]
        assert sorted_ids(t2, 7) == expected[7]
        if finished:
            break
    else:
        pytest.fail("expire never finished")
    assert attempt == (plan.total_files - 1) // budget >= 1
    assert set(file_listing(t.io)) == final
    _assert_reads(t, expected, range(7, 9))
    assert t.remove_orphan_files(older_than=0).total_files == 0


# -- orphan-clean ----------------------------------------------------------------------------------------


def _make_garbage(t: lakefmt.Table) -> dict[str, FileClass]:
    """Files a crashed or failed writer leaves behind, as the library itself writes them; returns their
    paths and kinds."""
    garbage: dict[str, FileClass] = {}
    # a task that wrote data files and its manifest, but whose commit never happened
    writer = t.new_writer()
    with writer:
        writer.write(pa.concat_tables([_batch(range(100, 103), "a"), _batch(range(103, 105), "zz")]))
        message = writer.prepare_commit()
    for f in writer.written_files:
        garbage[f.path] = FileClass.DATA
    for m in message.manifests:
        garbage[layout.manifest_path(m.file_name)] = FileClass.MANIFEST
    # a manifest list of a commit that lost and gave up
    lst = layout.manifest_list_path(f"manifest-list-{uuid.uuid4().hex}-1")
    t.io.write(lst, b"not referenced")
    garbage[lst] = FileClass.MANIFEST_LIST
    # temp files of interrupted publishes (the names the local publish uses) and of a data file
    for rel in (layout.snapshot_path(99), layout.schema_path(7), layout.LATEST, "dt=a/data-x-0.parquet"):
        tmp = t.io.new_temp_name(rel)
        assert tmp.rsplit("/", 1)[-1].startswith(".") and ".tmp-" in tmp
        t.io.write(tmp, b"partial")
        garbage[tmp] = FileClass.TEMP
    # something else entirely
    t.io.write("dt=b/notes.txt", b"?")
    garbage["dt=b/notes.txt"] = FileClass.OTHER
    return garbage


def test_orphan_clean_removes_only_garbage(store: Any) -> None:
    t = _create(store)
    expected = _history(t)
    t.expire_snapshots(retain_max=5)
    referenced = file_listing(t.io)
    garbage = _make_garbage(t)
    assert set(garbage).isdisjoint(referenced)
    everything = file_listing(t.io)
    assert set(everything) == set(referenced) | set(garbage)

    # default threshold (1 day): everything is young, nothing goes
    young = t.remove_orphan_files()
    assert young.total_files == 0
    young = t.remove_orphan_files(older_than="1h", dry_run=True)
    assert young.total_files == 0
    # dry run lists exactly the garbage and deletes nothing
    dry = t.remove_orphan_files(older_than=0, dry_run=True)
    assert set(dry.paths) == set(garbage)
    assert file_listing(t.io) == everything
    # the real run deletes exactly that
    report = t.remove_orphan_files(older_than=0)
    assert _summary(report) == _summary(dry)
    assert report.expired_snapshots == []
    assert file_listing(t.io) == referenced
    for kind in FileClass:
        mine = {p for p, k in garbage.items() if k is kind}
        assert {p for p, _ in report.deleted.get(kind, [])} == mine, kind
        assert report.bytes(kind) == sum(everything[p] for p in mine)
    assert report.total_bytes == sum(everything[p] for p in garbage)
    # every retained snapshot still reads; a second run finds nothing
    _assert_reads(t, expected, range(4, 9))
    assert t.remove_orphan_files(older_than=0).total_files == 0
    # the table still takes commits
    t.append(_batch([500], "a"))
    assert 500 in sorted_ids(t)


def _set_age(root: str, rel: str, age_s: float) -> None:
    when = time.time() - age_s
    os.utime(os.path.join(root, rel), (when, when), follow_symlinks=False)


def test_orphan_clean_age_threshold_local(local_store: Any) -> None:
    t = _create(local_store)
    expected = _history(t)
    t.expire_snapshots(retain_max=3)
    garbage = _make_garbage(t)
    root = t.io.root
    referenced = set(file_listing(t.io)) - set(garbage)
    assert {layout.schema_path(0), layout.LATEST, layout.EARLIEST} <= referenced
    for rel in referenced:  # referenced files are old: age never makes them garbage
        _set_age(root, rel, 30 * 86_400)
    old = {p for i, p in enumerate(sorted(garbage)) if i % 2 == 0}
    for rel in garbage:
        _set_age(root, rel, 3 * 86_400 if rel in old else 3600)

    assert set(t.remove_orphan_files(dry_run=True).paths) == old  # default: one day
    assert set(t.remove_orphan_files(older_than="4d", dry_run=True).paths) == set()
    assert set(t.remove_orphan_files(older_than=7200, dry_run=True).paths) == old
    report = t.remove_orphan_files()
    assert set(report.paths) == old
    assert set(file_listing(t.io)) == referenced | (set(garbage) - old)
    report = t.remove_orphan_files(older_than=datetime.timedelta(minutes=30))
    assert set(report.paths) == set(garbage) - old
    assert set(file_listing(t.io)) == referenced
    _assert_reads(t, expected, range(6, 9))


def test_orphan_clean_symlinks_never_reach_outside(local_store: Any, tmp_path: Any) -> None:
    t = _create(local_store)
    t.append(_batch(range(5), "a"))
    root = t.io.root
    outside = tmp_path / f"outside-{uuid.uuid4().hex}"
    (outside / "folder").mkdir(parents=True)
    target = outside / "precious.parquet"
    target.write_bytes(b"do not delete")
    (outside / "folder" / "inner.parquet").write_bytes(b"nor this")
    os.symlink(target, os.path.join(root, "dt=a", "link.parquet"))
    os.symlink(outside / "folder", os.path.join(root, "dt=q"), target_is_directory=True)
    os.symlink(target, os.path.join(root, "manifest", "manifest-link-1"))
    for rel in ("dt=a/link.parquet", "dt=q", "manifest/manifest-link-1"):
        _set_age(root, rel, 10 * 86_400)
    old = time.time() - 10 * 86_400
    os.utime(target, (old, old))
    os.utime(outside / "folder" / "inner.parquet", (old, old))

    report = t.remove_orphan_files(older_than=0)
    assert set(report.paths) <= {"dt=a/link.parquet", "dt=q", "manifest/manifest-link-1"}
    assert not any(p.startswith("dt=q/") for p in report.paths)
    assert target.read_bytes() == b"do not delete"
    assert (outside / "folder" / "inner.parquet").read_bytes() == b"nor this"
    assert sorted_ids(t) == list(range(5))


def _rewrite_entry_path(t: lakefmt.Table, snapshot_id: int, kind: FileKind, new_path: str) -> str:
    """Rewrite, in place, the path of one ``kind`` entry of a snapshot's delta manifests (as a corrupt or
    malicious writer could). Returns the path it replaced."""
    ms = MetaStore(t.io)
    for meta in ms.manifest_list(ms.snapshot(snapshot_id).delta_manifest_list):
        entries = ms.manifest(meta.file_name)
        kinds = entries.column("kind").to_pylist()
        paths = entries.column("path").to_pylist()
        for i, k in enumerate(kinds):
            if k == int(kind):
                old = paths[i]
                paths[i] = new_path
                col = entries.schema.get_field_index("path")
                t.io.write(
                    layout.manifest_path(meta.file_name),
                    encode_manifest(entries.set_column(col, "path", pa.array(paths, pa.string()))),
                )
                return str(old)
    raise AssertionError(f"no {kind.name} entry in snapshot {snapshot_id}")


def test_expire_refuses_a_path_outside_the_root(local_store: Any, tmp_path: Any) -> None:
    t = _create(local_store)
    expected = _history(t)
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"outside the table")
    rel_root = os.path.relpath(tmp_path, t.io.root).replace(os.sep, "/")
    # snapshot 5 overwrote everything: its DELETE entries name many files; one now escapes the root, and it
    # sorts after the legitimate ones
    _rewrite_entry_path(t, 5, FileKind.DELETE, f"zz/../{rel_root}/victim.parquet")
    before = file_listing(t.io)
    t2 = lakefmt.open_table(t.uri)
    with pytest.raises(PathOutsideTableError):
        t2.expire_snapshots(retain_max=2, dry_run=True)
    with pytest.raises(PathOutsideTableError):
        t2.expire_snapshots(retain_max=2)
    assert file_listing(t.io) == before, "files were deleted before the bad path was refused"
    assert victim.read_bytes() == b"outside the table"
    assert len(sorted_ids(t2, 8)) >= len(expected[8])  # still reads (the corrupt DELETE no longer removes a file)


@local_and_memory
def test_orphan_clean_refuses_a_path_outside_the_root(store: Any) -> None:
    t = _create(store)
    _history(t)
    garbage = _make_garbage(t)
    # the latest snapshot's delta adds a file that "lives" outside the root
    _rewrite_entry_path(t, 8, FileKind.ADD, "../elsewhere/data.parquet")
    before = file_listing(t.io)
    t2 = lakefmt.open_table(t.uri, store.storage_options)
    with pytest.raises(PathOutsideTableError):
        t2.remove_orphan_files(older_than=0, dry_run=True)
    with pytest.raises(PathOutsideTableError):
        t2.remove_orphan_files(older_than=0)
    with pytest.raises(PathOutsideTableError):
        referenced_files(MetaStore(t2.io))
    assert file_listing(t.io) == before and set(garbage) <= set(before)
    with pytest.raises(PathOutsideTableError):
        t2.to_arrow()  # readers refuse it too


@local_and_memory
def test_a_manifest_list_naming_a_file_outside_is_refused(store: Any) -> None:
    t = _create(store)
    _history(t)
    snap = t.snapshot(8)
    path = layout.manifest_list_path(snap.delta_manifest_list)
    metas = decode_manifest_list(t.io.read(path))
    bad = [dataclasses.replace(metas[0], file_name="../../schema/schema-0"), *metas[1:]]
    t.io.write(path, encode_manifest_list(bad, t.table_schema().partition_schema))
    _make_garbage(t)
    before = file_listing(t.io)
    t2 = lakefmt.open_table(t.uri, store.storage_options)
    with pytest.raises(PathOutsideTableError):
        t2.remove_orphan_files(older_than=0)
    with pytest.raises(PathOutsideTableError):
        t2.expire_snapshots(retain_max=1)
    assert file_listing(t.io) == before


def test_not_a_table_is_refused_and_untouched(store: Any) -> None:
    uri = store.uri()
    io = file_io_for(uri, store.storage_options)
    io.write("data/file.parquet", b"someone else's data")
    io.write("snapshot/snapshot-1", b"{}")
    io.write("manifest/manifest-x-1", b"??")
    before = file_listing(io)
    with pytest.raises(NotATableError):
        lakefmt.open_table(uri, store.storage_options)
    with pytest.raises(NotATableError):
        lib_orphans(io, MetaStore(io), older_than_ms=0)
    with pytest.raises(NotATableError):
        lib_orphans(io, MetaStore(io), older_than_ms=0, dry_run=True)
    assert file_listing(io) == before
    # and a location with nothing at all
    empty = store.uri()
    with pytest.raises(NotATableError):
        lakefmt.open_table(empty, store.storage_options)
    empty_io = file_io_for(empty, store.storage_options)
    with pytest.raises(NotATableError):
        lib_orphans(empty_io, MetaStore(empty_io), older_than_ms=0)


@local_and_memory
def test_library_functions_report_progress(store: Any) -> None:
    t = _create(store)
    _history(t)
    _make_garbage(t)
    calls: list[tuple[int, int, str]] = []
    report = lib_expire(t.io, MetaStore(t.io), retain_max=2, progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == list(range(1, report.total_files + 1))
    assert {c[1] for c in calls} == {report.total_files}
    assert sorted(c[2] for c in calls) == report.paths
    calls.clear()
    report = lib_orphans(t.io, MetaStore(t.io), older_than_ms=0, progress=lambda *a: calls.append(a))
    assert report.total_files > 0
    assert sorted(c[2] for c in calls) == report.paths
    _assert_exactly_referenced(t)


def test_deletion_vector_files_are_reported_as_such() -> None:
    """A key table's Puffin files of deletion vectors are a kind of their own in maintenance reports."""
    from lakefmt.maintenance.report import classify

    assert classify("dt=x/bucket-0/dv-0a1b-0.puffin") is FileClass.DELETION_VECTORS
    assert classify("dt=x/bucket-0/data-0a1b-0.parquet") is FileClass.DATA
    assert FileClass.DELETION_VECTORS.value == "deletion_vector_files"
