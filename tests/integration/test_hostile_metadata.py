"""Metadata that lies, and a user's habits (issue "Never delete a landed commit", items 3-7 and 9-12): each
case gets a clear error or a safe outcome, and the table keeps every row and file it had."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.commit.users import next_commit_users, reference_time
from lakefmt.errors import CorruptMetadataError, InvalidCommitError, LocationNotEmptyError, PathOutsideTableError
from lakefmt.meta.store import MetaStore
from lakefmt.spec import FileKind, UserMark, layout
from lakefmt.spec.manifest import encode_manifest, manifest_meta

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
DAY_MS = 86_400_000


def _rows(ids: list[int], dt: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": [dt] * len(ids)})


def _ids(t: lakefmt.Table, **kwargs: Any) -> list[int]:
    return sorted(t.scan(**kwargs).to_arrow().column("id").to_pylist())


def _message(t: lakefmt.Table, ids: list[int]) -> lakefmt.CommitMessage:
    w = t.new_writer()
    w.write(_rows(ids))
    return w.prepare_commit()


def _files(t: lakefmt.Table) -> set[str]:
    return {f.path for f in t.io.walk()}


# -- 3. an empty commit user ----------------------------------------------------------------------------------
@pytest.mark.parametrize("user", ["", "   ", "\t"])
def test_an_empty_commit_user_is_refused(tmp_path: Any, user: str) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    with pytest.raises(InvalidCommitError, match=r"non-empty string.*None"):
        t.new_committer(user)
    assert t.new_committer(None).commit([_message(t, [1])], identifier=1) is not None


# -- 4. a table inside another table's root -------------------------------------------------------------------
def test_a_table_cannot_be_created_inside_another(store: Any) -> None:
    outer = store.uri()
    lakefmt.create_table(outer, SCHEMA, storage_options=store.storage_options).append(_rows([1]))
    for inner in (f"{outer}/inner", f"{outer}/a/b/inner", f"{outer}/dt=a/inner"):
        with pytest.raises(LocationNotEmptyError, match="inside the lakefmt table at"):
            lakefmt.create_table(inner, SCHEMA, storage_options=store.storage_options)
    t = lakefmt.open_table(outer, storage_options=store.storage_options)
    assert _ids(t) == [1] and not any(p.startswith(("inner/", "a/")) for p in _files(t))


def test_orphan_clean_never_deletes_a_nested_table(tmp_path: Any) -> None:
    """A table that ended up inside another's root anyway (moved there by hand, or created before the
    refusal existed) is left alone by the outer table's orphan-clean."""
    outer = lakefmt.create_table(str(tmp_path / "outer"), SCHEMA)
    outer.append(_rows([1]))
    inner = lakefmt.create_table(str(tmp_path / "elsewhere"), SCHEMA)
    inner.append(_rows([2, 3]))
    os.rename(tmp_path / "elsewhere", tmp_path / "outer" / "nested")
    (tmp_path / "outer" / "junk.txt").write_text("an orphan")
    report = lakefmt.open_table(str(tmp_path / "outer")).remove_orphan_files(older_than=0)
    assert report.paths == ["junk.txt"]
    assert not (tmp_path / "outer" / "junk.txt").exists()
    assert _ids(lakefmt.open_table(str(tmp_path / "outer" / "nested"))) == [2, 3]
    assert _ids(lakefmt.open_table(str(tmp_path / "outer"))) == [1]


# -- 5. a snapshot file whose id differs from its name ----------------------------------------------------------
def test_a_copied_snapshot_file_is_corrupt_metadata_not_a_hang(store: Any) -> None:
    uri = store.uri()
    t = lakefmt.create_table(uri, SCHEMA, storage_options=store.storage_options)
    for i in range(3):
        t.append(_rows([i]))
    t.io.write(layout.snapshot_path(4), t.io.read(layout.snapshot_path(1)))  # an operator's cp snapshot-1 snapshot-4
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            lakefmt.open_table(uri, storage_options=store.storage_options).latest_snapshot()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "latest_snapshot() loops on a snapshot file whose id does not match its name"
    assert isinstance(outcome[0], CorruptMetadataError) and "snapshot-4 holds snapshot id 1" in str(outcome[0])
    t.io.delete(layout.snapshot_path(4))
    assert _ids(lakefmt.open_table(uri, storage_options=store.storage_options)) == [0, 1, 2]


# -- 6. a stale or garbage EARLIEST hint ------------------------------------------------------------------------
@pytest.mark.parametrize("hint", [b"99", b"3", b"garbage", b"-1", b"99999999999999999999999"])
def test_a_wrong_earliest_hint_costs_orphan_clean_nothing(store: Any, hint: bytes) -> None:
    uri = store.uri()
    t = lakefmt.create_table(uri, SCHEMA, storage_options=store.storage_options)
    for i in range(4):
        t.append(_rows([i]))
    t.overwrite(_rows([10]))  # snapshot 5 deletes every earlier file
    t.io.write(layout.EARLIEST, hint)
    before = _files(t)
    report = t.remove_orphan_files(older_than=0)
    assert report.total_files == 0, report.paths
    assert _files(t) == before
    for sid, ids in [(1, [0]), (2, [0, 1]), (4, [0, 1, 2, 3]), (5, [10])]:
        assert _ids(lakefmt.open_table(uri, storage_options=store.storage_options), snapshot_id=sid) == ids


# -- 7. dedup memory and clocks ---------------------------------------------------------------------------------
def test_a_fast_clock_cannot_make_other_users_forgotten(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    now = time.time()
    for i, user in enumerate(["a", "b", "c"]):
        assert t.new_committer(user).commit([_message(t, [i])], identifier=7) is not None
    fast = t.new_committer("fast", clock=lambda: now + 45 * 86_400)
    assert fast.commit([_message(t, [9])], identifier=1) is not None
    users = t.latest_snapshot().commit_users  # type: ignore[union-attr]
    assert {"a", "b", "c", "fast"} <= set(users)
    for i, user in enumerate(["a", "b", "c"]):  # their replays are still recognised
        assert t.new_committer(user).commit([_message(t, [i])], identifier=7) is None
    # and an honest committer after the fast one does not forget them either
    assert t.new_committer("d").commit([_message(t, [4])], identifier=1) is not None
    assert {"a", "b", "c", "fast", "d"} <= set(t.latest_snapshot().commit_users)  # type: ignore[union-attr]
    assert _ids(t) == [0, 1, 2, 4, 9]


def test_users_silent_beyond_the_retention_are_forgotten() -> None:
    now = 100 * DAY_MS
    users = {
        "old": UserMark(1, now - 40 * DAY_MS),
        "recent": UserMark(2, now - DAY_MS),
        "other": UserMark(3, now - 2 * DAY_MS),
    }
    out = next_commit_users(users, "me", 5, now, retention_ms=30 * DAY_MS, max_users=100)
    assert set(out) == {"me", "recent", "other"} and out["me"] == UserMark(5, now)


def test_the_reference_time_resists_one_fast_clock() -> None:
    now = 100 * DAY_MS
    users = {
        "a": UserMark(1, now - 20 * DAY_MS),
        "b": UserMark(1, now - DAY_MS),
        "fast": UserMark(1, now + 45 * DAY_MS),
    }
    assert reference_time(users, "fast", now + 45 * DAY_MS) == now - 20 * DAY_MS  # lower median of a, b
    assert reference_time(users, "a", now) == now - DAY_MS  # lower median of b and fast: never ahead of b
    out = next_commit_users(users, "fast", 2, now + 45 * DAY_MS, retention_ms=30 * DAY_MS, max_users=100)
    assert set(out) == {"a", "b", "fast"}


def test_the_committing_user_is_kept_at_the_user_limit_with_tied_times() -> None:
    now = 100 * DAY_MS
    users = {f"u{i}": UserMark(1, now) for i in range(5)}
    for me in ("u4", "zz", "aa"):
        out = next_commit_users(users, me, 9, now, retention_ms=30 * DAY_MS, max_users=3)
        assert len(out) == 3 and out[me] == UserMark(9, now)


def test_the_committing_user_survives_the_user_limit_in_a_table(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"commit.user-max": "2"})
    frozen = time.time()
    for i, user in enumerate(["a", "b", "c", "d"]):
        assert t.new_committer(user, clock=lambda: frozen).commit([_message(t, [i])], identifier=1) is not None
        assert user in t.latest_snapshot().commit_users  # type: ignore[union-attr]
        assert t.new_committer(user, clock=lambda: frozen).commit([_message(t, [i])], identifier=1) is None


# -- 9. a data path inside the metadata folders --------------------------------------------------------------
@pytest.mark.parametrize("bad", ["schema/schema-0", "snapshot/LATEST", "snapshot/snapshot-1", "manifest/x"])
def test_a_delete_entry_naming_a_metadata_file_is_refused_by_expire(tmp_path: Any, bad: str) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows([1]))
    # a hand-made per-task manifest: one ADD of a real file, one DELETE naming a metadata file
    w = t.new_writer()
    w.write(_rows([2]))
    msg = w.prepare_commit()
    name = msg.manifests[0].file_name
    entries = MetaStore(t.io).manifest(name)
    hostile = entries.set_column(entries.schema.get_field_index("path"), "path", pa.array([bad]))
    hostile = hostile.set_column(0, "kind", pa.array([int(FileKind.DELETE)], pa.int8()))
    both = pa.concat_tables([entries, hostile.cast(entries.schema)])
    data = encode_manifest(both)
    t.io.delete(layout.manifest_path(name))
    t.io.write(layout.manifest_path(name), data)
    honest = lakefmt.CommitMessage(msg.writer_id, (manifest_meta(name, len(data), both, 0),))  # counts the DELETE
    assert honest.manifests[0].num_deleted_files == 1
    lakefmt.Table(t.io, MetaStore(t.io)).new_committer("x").commit(honest, identifier=1)
    t.append(_rows([3]))
    before = _files(t)
    with pytest.raises(CorruptMetadataError, match="metadata folders"):
        lakefmt.open_table(str(tmp_path / "t")).expire_snapshots(retain_max=1)
    assert _files(t) == before


# -- 10. a symlink to an outside folder --------------------------------------------------------------------------
def test_a_folder_holding_only_a_link_is_not_empty(tmp_path: Any) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "t").mkdir()
    os.symlink(outside, tmp_path / "t" / "link")
    with pytest.raises(LocationNotEmptyError, match="link"):
        lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    assert list(outside.iterdir()) == []


def test_no_write_follows_a_link_out_of_the_root(tmp_path: Any) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    t.append(_rows([1], dt="a"))
    os.symlink(outside, tmp_path / "t" / "dt=b")  # a partition folder that leads out of the root
    with pytest.raises(PathOutsideTableError, match="outside the table root"):
        t.append(_rows([2], dt="b"))
    assert list(outside.iterdir()) == []
    assert _ids(lakefmt.open_table(str(tmp_path / "t"))) == [1]


# -- 11. one message committed twice ------------------------------------------------------------------------------
def test_a_message_given_twice_in_one_commit_is_refused(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    m = _message(t, [1])
    with pytest.raises(InvalidCommitError, match="twice"):
        t.new_committer("job").commit([m, m], identifier=1)
    assert t.latest_snapshot() is None
    assert t.new_committer("job").commit([m], identifier=1) is not None
    assert _ids(t) == [1]


def test_a_message_committed_under_a_second_identifier_is_refused(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    m = _message(t, [1])
    assert t.new_committer("job").commit(m, identifier=1) is not None
    with pytest.raises(InvalidCommitError, match="already in the table"):
        t.new_committer("job").commit(m, identifier=2)
    with pytest.raises(InvalidCommitError, match="already in the table"):
        t.new_committer(None).commit(m, identifier=0)
    assert _ids(t) == [1] and t.latest_snapshot().id == 1  # type: ignore[union-attr]


def test_merged_messages_committed_again_are_refused(tmp_path: Any) -> None:
    """Several tasks' manifests are merged into the delta's own; the per-task ones go once the commit landed,
    so committing one of them again names a missing manifest: refused, nothing written that a snapshot uses."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    m1, m2 = _message(t, [1]), _message(t, [2])
    assert t.new_committer("job").commit([m1, m2], identifier=1) is not None
    for again in ([m1], [m2], [m1, m2]):
        with pytest.raises(InvalidCommitError, match="already committed or discarded"):
            t.new_committer("job").commit(again, identifier=2)
    assert _ids(t) == [1, 2] and t.latest_snapshot().id == 1  # type: ignore[union-attr]


# -- 12. identifiers outside signed int64 -------------------------------------------------------------------------
@pytest.mark.parametrize("identifier", [2**63, 2**64, -(2**63) - 1])
def test_an_identifier_outside_int64_is_refused_before_any_write(tmp_path: Any, identifier: int) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    m = _message(t, [1])
    before = _files(t)
    with pytest.raises(InvalidCommitError, match="signed 64-bit"):
        t.new_committer("job").commit(m, identifier=identifier)
    assert _files(t) == before and t.latest_snapshot() is None
    assert t.new_committer("job").commit(m, identifier=2**63 - 1) is not None
    assert t.latest_snapshot().commit_identifier == 2**63 - 1  # type: ignore[union-attr]


# -- found by the adversarial review ---------------------------------------------------------------------------
def test_orphan_clean_with_a_stale_hint_and_a_stale_table_object_deletes_nothing_live(tmp_path: Any) -> None:
    """A long-lived Table remembers snapshot 2; the LATEST hint is set back to 2 (a hint PUT applied late)
    and snapshots 1..3 expire: orphan-clean must still see 5 as the latest, not 2, and keep every live file."""
    d = str(tmp_path / "t")
    lakefmt.create_table(d, SCHEMA)
    a, b = lakefmt.open_table(d), lakefmt.open_table(d)
    a.append(_rows([1]))
    a.append(_rows([2]))
    for i in (3, 4, 5):
        b.append(_rows([i]))
    b.io.write(layout.LATEST, b"2")
    b.expire_snapshots(retain_max=2)
    old = time.time() - 2 * 86_400
    for folder, _, names in os.walk(d):
        for name in names:
            os.utime(os.path.join(folder, name), (old, old))
    a.remove_orphan_files()
    assert _ids(lakefmt.open_table(d)) == [1, 2, 3, 4, 5]


def test_a_permission_error_after_the_snapshot_was_linked_is_not_a_refusal(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On local disk the folder is fsynced after the link: an error there comes after the snapshot exists, so
    it must not read as "not created" (Table.append would delete the files of a landed commit)."""
    d = str(tmp_path / "t")
    t = lakefmt.create_table(d, SCHEMA)
    t.append(_rows([1]))
    real_open = os.open
    snapshot_dir = os.path.join(d, "snapshot")

    def refuse_folder(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == snapshot_dir:
            raise PermissionError(13, "Permission denied", snapshot_dir)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_folder)
    snap = t.append(_rows([2]))
    monkeypatch.undo()
    assert snap is not None and snap.id == 2
    assert _ids(lakefmt.open_table(d)) == [1, 2]


def test_a_discarded_message_cannot_be_committed_afterwards(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    m = _message(t, [1, 2])
    t.discard([m])
    with pytest.raises(InvalidCommitError, match="already committed or discarded"):
        t.new_committer("job").commit(m, identifier=1)
    assert t.latest_snapshot() is None


def test_a_slow_clock_cannot_age_out_its_own_dedup_entry(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    for user in ("v", "w", "x"):
        t.new_committer(user).commit(_message(t, [0]), identifier=1)
    slow = lambda: time.time() - 45 * 86_400  # noqa: E731 (a host without NTP)
    assert t.new_committer("u", clock=slow).commit(_message(t, [70]), identifier=7) is not None
    t.new_committer("v").commit(_message(t, [1]), identifier=2)
    assert t.commit_user_identifier("u") == 7
    assert t.new_committer("u", clock=slow).commit(_message(t, [70]), identifier=7) is None
    assert _ids(t).count(70) == 1


@pytest.mark.parametrize("name", ["snapshot-\u0662", "snapshot-\uff12", "snapshot-02", "snapshot-2x"])
def test_snapshot_names_are_ascii_digits_only(tmp_path: Any, name: str) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows([1]))
    t.io.delete(layout.LATEST)
    t.io.write(f"snapshot/{name}", t.io.read(layout.snapshot_path(1)))
    fresh = lakefmt.open_table(str(tmp_path / "t"))
    assert [s.id for s in fresh.snapshots()] == [1] and _ids(fresh) == [1]
