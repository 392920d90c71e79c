"""Restore: a new snapshot whose rows equal an older one's, re-adding its files (no copy). The expiration trap
(a restore re-adds a path an expired snapshot deleted), exactly-once across a restore, races with appends,
compactions and expirations, incremental reads across a restore."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in, file_listing, sorted_ids

import lakefmt
from lakefmt import hooks
from lakefmt.commit.kinds import RewriteProducer
from lakefmt.maintenance import plan_expiration, referenced_files
from lakefmt.maintenance.expire import apply_expiration
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_entries
from lakefmt.spec import CommitKind, layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def rows(*ids: int, dt: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "dt": [dt] * len(ids)}, schema=SCHEMA)


def check_clean(t: lakefmt.Table) -> None:
    """After orphan-clean (age 0): exactly the referenced files are there, none is missing."""
    t.remove_orphan_files(older_than=0)
    files = set(file_listing(t.io))
    refs = referenced_files(MetaStore(t.io))
    assert files - refs == set()
    assert refs - files <= {layout.LATEST, layout.EARLIEST}


@pytest.fixture
def on_publish() -> Iterator[Callable[[Callable[[], None]], None]]:
    """``on_publish(action)``: run ``action`` once, just before the next restore publishes its snapshot."""
    removers = []

    def arm(action: Callable[[], None]) -> None:
        fired = []

        def hook(phase: str, snap: lakefmt.Snapshot) -> None:
            if phase == "before-publish" and snap.properties.get("lakefmt.operation") == "restore" and not fired:
                fired.append(True)
                action()

        removers.append(hooks.add_publish_hook(hook))

    yield arm
    for remove in removers:
        remove()


def test_the_expiration_trap(store: Any) -> None:
    """S1 adds f, S2 overwrites (deletes f), S3 appends g, S4 restores S1 (adds f again). Expiring S1..S2 (new
    earliest S3) deletes the files S2 deleted, but not f, which S4 reads; nor does orphan-clean."""
    t = create_table_in(store, SCHEMA)
    t.append(rows(1, 2))  # f
    t.overwrite(rows(3))
    t.append(rows(4))  # g
    snap = t.restore(1)
    assert snap is not None and snap.id == 4 and snap.commit_kind is CommitKind.OVERWRITE
    assert snap.properties == {"lakefmt.operation": "restore", "lakefmt.restored-snapshot": "1"}
    f = {x.path for x in t.files(1)}
    assert {x.path for x in t.files()} == f, "the restore re-adds the very files of snapshot 1: no copy"
    assert t.expire_snapshots(retain_max=2).expired_snapshots == [1, 2]
    assert f <= set(file_listing(t.io))
    check_clean(t)
    assert sorted_ids(t) == [1, 2] and sorted_ids(t, 3) == [3, 4]
    # S4's own base holds no entry of f but its ADD: every snapshot's live set is ADD minus DELETE
    latest = t.latest_snapshot()
    assert latest is not None
    base = ents.concat_entries(
        [MetaStore(t.io).manifest(m.file_name) for m in MetaStore(t.io).manifest_list(latest.base_manifest_list)]
    )
    assert not set(ents.paths(base)) & f
    t.expire_snapshots(retain_max=1)  # new earliest S4: the restore itself is the earliest
    check_clean(t)
    assert sorted_ids(t) == [1, 2]


def test_restore_and_undo(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    t.append(pa.concat_tables([rows(1), rows(2, dt="b")]))
    t.overwrite(rows(3), partition={"dt": "a"})
    t.append(rows(4, dt="c"))
    t.create_tag("start", 1)
    plan = t.plan_restore(tag="start")
    summary = plan.to_dict()
    assert (summary["target_snapshot"], summary["tag"], summary["rows_removed"], summary["rows_added"]) == (
        1,
        "start",
        2,
        1,
    )
    assert [x["rows"] for x in summary["files_added"]] == [1]
    restored = t.restore(tag="start")
    assert restored is not None and restored.properties["lakefmt.restored-tag"] == "start"
    assert sorted_ids(t) == [1, 2] and restored.total_record_count == 2 and restored.total_file_count == 2
    assert t.restore(tag="start") is None, "restoring the current state commits nothing"
    undone = t.restore(3)  # a restore is undone by another
    assert undone is not None and sorted_ids(t) == [2, 3, 4]
    assert t.restore(as_of=t.snapshot(1).time_millis) is not None and sorted_ids(t) == [1, 2]
    # an incremental read across the restores: the last entry of each path decides
    assert sorted_ids(t, from_snapshot=3) == [1]  # 4 added and removed, 1 removed and added back
    assert sorted_ids(t, from_snapshot=1, to_snapshot=5) == [3, 4]
    assert sorted_ids(t, from_snapshot=0) == [1, 2]
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4, 5, 6]
    check_clean(t)
    t.expire_snapshots(retain_max=1)
    check_clean(t)
    assert sorted_ids(t) == [1, 2] and sorted_ids(t, tag="start") == [1, 2]


def test_a_replay_after_a_restore_is_still_skipped(local_store: Any) -> None:
    """The commit-user map is carried forward, not rolled back: a batch committed after the restored snapshot
    and replayed after the restore is recognised and skipped."""
    t = create_table_in(local_store, SCHEMA)

    def batch(ids: list[int]) -> list[lakefmt.CommitMessage]:
        with t.new_writer() as writer:
            writer.write(rows(*ids))
            return [writer.prepare_commit()]

    job = t.new_committer("job")
    assert job.commit(batch([1]), identifier=1) is not None
    assert job.commit(batch([2]), identifier=2) is not None
    assert t.restore(1) is not None
    assert sorted_ids(t) == [1] and t.commit_user_identifier("job") == 2
    replay = batch([2])
    assert t.new_committer("job").commit(replay, identifier=2) is None
    t.discard(replay)
    assert sorted_ids(t) == [1]
    assert t.new_committer("job").commit(batch([3]), identifier=3) is not None
    assert sorted_ids(t) == [1, 3]


def test_a_restore_racing_an_append_is_a_conflict(local_store: Any, on_publish: Any) -> None:
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.append(rows(2))
    other = lakefmt.open_table(t.uri)
    on_publish(lambda: other.append(rows(3)))
    before = {p for p in file_listing(t.io) if p.startswith("manifest/manifest-") and "-list-" not in p}
    with pytest.raises(lakefmt.CommitConflictError, match="changed the table while the restore"):
        t.restore(1)
    assert [s.id for s in t.snapshots()] == [1, 2, 3] and sorted_ids(t) == [1, 2, 3]
    manifests = {p for p in file_listing(t.io) if p.startswith("manifest/manifest-") and "-list-" not in p}
    assert len(manifests - before) >= 1  # the append's; the restore's own added manifest was deleted
    check_clean(t)


class _Compact(RewriteProducer):
    kind = CommitKind.COMPACT

    def carries_users_unchanged(self) -> bool:
        return True


def compact(t: lakefmt.Table, ids: set[int]) -> None:
    """A compaction: the live files holding ``ids`` rewritten into one, in a COMPACT snapshot."""
    store = MetaStore(t.io)
    latest = t.latest_snapshot()
    assert latest is not None
    live = ents.live_entries(store, latest)
    schema = store.latest_schema()
    chosen = [
        i
        for i in range(live.num_rows)
        if set(pa.Table.from_batches(list(read_entries(t.io, live.slice(i, 1), schema))).column("id").to_pylist())
        <= ids
    ]
    picked = live.take(chosen)
    data = pa.Table.from_batches(list(read_entries(t.io, picked, schema)))
    with t.new_writer() as writer:
        writer.write(data)
        message = writer.prepare_commit()
    assert t.new_committer().rewrite([message], 0, rewritten=picked, producer=_Compact) is not None


@pytest.mark.parametrize("moved", ["removed files", "target files"])
def test_a_restore_follows_a_concurrent_compaction(local_store: Any, on_publish: Any, moved: str) -> None:
    """A compaction is no conflict: the restore re-plans (the rows it removes are in other files now, or the
    target's files it keeps were compacted away and must be added again) and lands with the target's rows."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.append(rows(2))  # the target, snapshot 2: {1}, {2}
    t.append(rows(3))
    t.append(rows(4))
    other = lakefmt.open_table(t.uri)
    on_publish(lambda: compact(other, {3, 4} if moved == "removed files" else {1, 2, 3}))
    snap = t.restore(2)
    assert snap is not None and sorted_ids(t) == [1, 2]
    assert [s.commit_kind for s in t.snapshots()][-2:] == [CommitKind.COMPACT, CommitKind.OVERWRITE]
    assert snap.total_record_count == 2
    check_clean(t)
    t.expire_snapshots(retain_max=1)
    check_clean(t)
    assert sorted_ids(t) == [1, 2]


def test_an_expiration_that_runs_while_a_restore_commits(local_store: Any, on_publish: Any) -> None:
    """The target's files survive an expiration planned before the restore and carried out at any point of it:
    after the pin (the expiration sees the pin), after the publish (it sees the restore)."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))  # target 1
    t.overwrite(rows(2))
    t.append(rows(3))
    store = MetaStore(t.io)
    plan = plan_expiration(store, retain_max=1)
    assert plan.expired == (1, 2)
    on_publish(lambda: apply_expiration(t.io, store, plan))  # pin written, target checked; then it runs
    assert t.restore(1) is not None
    assert [s.id for s in t.snapshots()] == [3, 4]
    check_clean(t)
    assert sorted_ids(t) == [1]
    # planned before the restore, run after it landed (and its pin is gone): the restore is seen
    t.overwrite(rows(5))
    t.append(rows(6))
    plan = plan_expiration(MetaStore(t.io), retain_max=1)
    assert t.restore(4) is not None  # {1} again
    apply_expiration(t.io, MetaStore(t.io), plan)
    check_clean(t)
    assert sorted_ids(t) == [1]


def test_a_restore_whose_target_is_being_expired_does_not_land(local_store: Any) -> None:
    """An expiration announced past the target before the restore checks it: the restore gives up (nothing lands,
    its manifest and pin are gone); the files the expiration deletes are no restore's."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.overwrite(rows(2))
    t.append(rows(3))
    plan = t.plan_restore(1)
    t.io.write(layout.EARLIEST, b"2")  # an expiration announced snapshot 2 as the new earliest
    from lakefmt.commit.restore import commit_restore

    before = set(file_listing(t.io))
    with pytest.raises(lakefmt.SnapshotNotFoundError, match="no longer kept"):
        commit_restore(t.io, MetaStore(t.io), plan, clock=lambda: 0.0)
    assert set(file_listing(t.io)) == before and MetaStore(t.io).snapshot_ids() == [1, 2, 3]
    assert [s.id for s in t.snapshots()] == [2, 3]  # below the announced earliest: no longer listed


def test_refused_restores(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA)
    with pytest.raises(ValueError, match="one of snapshot_id, tag or as_of"):
        t.restore()
    t.append(rows(1))
    t.append(rows(2))
    with pytest.raises(ValueError, match="one of snapshot_id, tag or as_of"):
        t.restore(1, tag="x")
    with pytest.raises(lakefmt.TagNotFoundError):
        t.restore(tag="x")
    with pytest.raises(lakefmt.SnapshotNotFoundError):
        t.restore(7)
    t.expire_snapshots(retain_max=1)
    with pytest.raises(lakefmt.SnapshotNotFoundError, match="expired"):
        t.restore(1)
    assert t.restore(2) is None
    assert pc.sum(t.to_arrow().column("id")).as_py() == 3


def test_a_version_1_table_is_upgraded_before_a_restore(tmp_path: Any) -> None:
    """Libraries that know only version 1 would expire the files a restore adds again: a version-1 table refuses
    a restore (nothing written) until it is upgraded; then the restore works."""
    import shutil
    from pathlib import Path

    golden = Path(__file__).resolve().parents[1] / "data" / "golden_v1"
    shutil.copytree(golden, tmp_path / "t")
    t = lakefmt.open_table(str(tmp_path / "t"))
    before = file_listing(t.io)
    rows_1 = t.to_arrow(snapshot_id=1).num_rows
    with pytest.raises(lakefmt.InvalidCommitError, match=r"format-version-1 table.*lakefmt upgrade"):
        t.restore(1)
    assert file_listing(t.io) == before
    t.upgrade()
    assert t.restore(1) is not None and t.to_arrow().num_rows == rows_1
