"""Restore (Delta's RESTORE, not Paimon's destructive rollback): one new snapshot whose rows equal an older
snapshot's. Newer snapshots stay, so a restore can itself be undone by another.

The commit is of kind OVERWRITE with the snapshot properties ``lakefmt.operation=restore`` and
``lakefmt.restored-snapshot=<id>``. It DELETEs the live files the target does not have and ADDs again the
target's files that are not live now, from their existing ADD entries: no data file is copied or written.

**Paths added again.** A restore is the one commit that ADDs a data file path that was DELETEd before. Two
rules keep the format's "live = ADD minus DELETE" exact:

* its base manifest list carries no entry of a path it adds again (:meth:`RestoreProducer.base_manifests`
  rewrites the few manifests that hold one: those entries net to "not live" before the restore, so dropping
  them changes nothing), so every snapshot's live set stays ADD minus DELETE over its own manifests;
* an incremental read over a range of snapshots takes, for each path, the last entry in snapshot order
  (:func:`lakefmt.meta.entries.net_added`), and expiration never deletes a path a restore after the expired
  window adds again (:mod:`lakefmt.maintenance.keep`).

**Conflicts.** The plan is made on the latest snapshot L. If another commit changes L's live set before the
restore lands, the restore fails with :class:`CommitConflictError` (nothing lands): the table moved, and a
restore that kept the new files would not equal the target. A change made by compactions alone is not a
conflict: the restore re-plans on the new latest snapshot.

**The target's files while the restore commits.** The restore re-adds files that only the target (a retained
snapshot, or a tag) keeps. So that an expiration or an orphan-clean running meanwhile cannot delete them, the
restore first writes a *pin* (``tag/pin-<id>``, a short-lived tag of the target, which maintenance honours
like a tag), then checks that the target is still kept by what kept it when the plan was made (its snapshot
file, with the ``EARLIEST`` hint not past it, or its tag), and only then publishes; the pin is deleted after.
Expiration announces its new earliest snapshot (the ``EARLIEST`` hint) before it deletes anything and reads the
tags and pins after that announcement: either the restore sees the announcement and stops, or the expiration
sees the pin (or, once the pin is gone, the published restore) and keeps the files.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import compactions_only
from lakefmt.commit.merge import ManifestMerger
from lakefmt.commit.producer import SnapshotProducer
from lakefmt.commit.types import CommitRequest, CommitResult
from lakefmt.errors import CommitConflictError, InvalidCommitError, SnapshotNotFoundError
from lakefmt.io import FileIO
from lakefmt.meta import entries
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import delete_pin, read_tag, write_pin
from lakefmt.spec import CommitKind, ManifestFileMeta, Snapshot, TableSchema, Tag, layout, operations
from lakefmt.spec.deletion_vector import decode_puffin
from lakefmt.spec.manifest import encode_manifest, manifest_meta
from lakefmt.units import DEFAULT_ORPHAN_OLDER_THAN_MS

__all__ = [
    "OPERATION_KEY",
    "RESTORE",
    "RESTORED_SNAPSHOT_KEY",
    "RESTORED_TAG_KEY",
    "RestorePlan",
    "RestoreProducer",
    "commit_restore",
    "commit_shown_plan",
    "is_restore",
    "marks_staying_rows",
    "plan_restore",
    "restore",
    "restore_replans",
]

OPERATION_KEY = operations.OPERATION_PROPERTY  #: the snapshot property naming what an OVERWRITE did
RESTORE = operations.RESTORE  #: its value for a restore
RESTORED_SNAPSHOT_KEY = operations.RESTORED_SNAPSHOT_PROPERTY  #: the id of the snapshot a restore brought back
RESTORED_TAG_KEY = operations.RESTORED_TAG_PROPERTY  #: the tag it came from, if any
#: how long a pin keeps its target if the restore that wrote it dies before deleting it: the orphan age, which
#: a commit must publish within anyway (format §17)
PIN_RETAIN_MS = DEFAULT_ORPHAN_OLDER_THAN_MS
#: re-plans after compactions changed the files a restore adds, before it gives up with a conflict
MAX_REPLANS = 5


def is_restore(snap: Snapshot) -> bool:
    """Whether ``snap`` is a restore's commit (the only kind that ADDs a path DELETEd before)."""
    return snap.properties.get(OPERATION_KEY) == RESTORE


@dataclass(frozen=True)
class RestorePlan:
    """What a restore of ``target`` on top of ``base`` (the latest snapshot when planned) does: DELETE
    ``removed`` (live now, not in the target) and ADD ``added`` (the target's files not live now)."""

    target: Snapshot
    base: Snapshot | None
    removed: pa.Table  #: ADD entries of the live files of ``base`` the target does not have
    added: pa.Table  #: the target's ADD entries of the files not live in ``base``
    tag: str | None = None  #: the tag the target was named by
    target_live: pa.Table = field(repr=False, default_factory=pa.table)  #: every live entry of the target
    base_paths: frozenset[str] = field(repr=False, default=frozenset())  #: the live paths of ``base``

    @property
    def noop(self) -> bool:
        """Whether the table already holds exactly the target's files (then a restore commits nothing)."""
        return bool(self.removed.num_rows == 0 and self.added.num_rows == 0)

    def __repr__(self) -> str:
        tag = f" (tag {self.tag!r})" if self.tag is not None else ""
        return (
            f"RestorePlan(target={self.target.id}{tag}, base={self.base.id if self.base else None}, "
            f"remove {self.removed.num_rows} file(s) / {self.rows_removed} rows, add {self.added.num_rows} "
            f"file(s) / {self.rows_added} rows)"
        )

    @property
    def rows_removed(self) -> int:
        return _rows(self.removed)

    @property
    def rows_added(self) -> int:
        return _rows(self.added)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: the target, and the files (with rows) the restore removes and adds."""

        def files(t: pa.Table) -> list[dict[str, Any]]:
            vectors = set(entries.paths(entries.vector_files(t)))
            out = []
            for p, r, s in zip(
                entries.paths(t),
                t.column(entries.ROW_COUNT).to_pylist(),
                t.column(entries.FILE_SIZE).to_pylist(),
                strict=True,
            ):
                # a deletion-vector file holds no row: its row count is the rows it deletes
                out.append(
                    {"path": p, "rows": 0, "size": s, "deleted_rows": r}
                    if p in vectors
                    else {"path": p, "rows": r, "size": s}
                )
            return out

        return {
            "target_snapshot": self.target.id,
            "tag": self.tag,
            "latest_snapshot": self.base.id if self.base else None,
            "rows_before": self.base.total_record_count if self.base else 0,
            "rows_after": self.target.total_record_count,
            "rows_removed": self.rows_removed,
            "rows_added": self.rows_added,
            "files_removed": files(self.removed),
            "files_added": files(self.added),
        }


def _rows(t: pa.Table) -> int:
    """The rows of the data files of ``t`` (a deletion-vector file holds none: it says which rows are deleted, and
    the snapshots' row counts, ``rows_before``/``rows_after``, are of live rows)."""
    data = entries.data_files(t)
    return int(pc.sum(data.column(entries.ROW_COUNT)).as_py() or 0) if data.num_rows else 0


def _not_in(t: pa.Table, paths: pa.Array) -> pa.Table:
    return t.filter(pc.invert(pc.is_in(t.column(entries.PATH), value_set=paths)))


def plan_restore(store: MetaStore, target: Snapshot, *, tag: str | None = None) -> RestorePlan:
    """Plan a restore of ``target`` on the latest snapshot (reads both snapshots' manifests; writes nothing)."""
    target_live = entries.live_entries(store, target)
    return _plan(store, target, store.latest_snapshot(), target_live, tag)


def _plan(
    store: MetaStore, target: Snapshot, base: Snapshot | None, target_live: pa.Table, tag: str | None
) -> RestorePlan:
    now = entries.live_entries(store, base) if base is not None else target_live.slice(0, 0)
    now_paths = now.column(entries.PATH).combine_chunks()
    target_paths = target_live.column(entries.PATH).combine_chunks()
    return RestorePlan(
        target=target,
        base=base,
        removed=_not_in(now, target_paths),
        added=_not_in(target_live, now_paths),
        tag=tag,
        target_live=target_live,
        base_paths=frozenset(now_paths.to_pylist()),
    )


def marks_staying_rows(io: FileIO, added: pa.Table, removed: pa.Table, live_before: Collection[str]) -> bool:
    """Whether the deletion-vector files among ``added`` (ADD entries) delete a position of a data file that was
    live before (``live_before``) and that ``removed`` (DELETE entries) does not remove, which the vectors of the
    deletion-vector files among ``removed`` did not delete: rows live before that the commit deletes. Only the
    vectors of the files that changed are decoded (one live deletion-vector file per partition and bucket: a
    bucket whose file stays has the same vectors before and after)."""
    new_files = entries.vector_files(added)
    if new_files.num_rows == 0:
        return False
    staying = set(live_before) - set(entries.paths(removed))
    before = _positions(io, entries.vector_files(removed))
    for path, positions in _positions(io, new_files).items():
        if path not in staying or len(positions) == 0:
            continue
        old = before.get(path)
        if old is None or len(np.setdiff1d(positions, old)) > 0:
            return True
    return False


def _positions(io: FileIO, vector_entries: pa.Table) -> dict[str, np.ndarray]:
    """The positions of every vector of the deletion-vector files ``vector_entries``, by data-file path."""
    out: dict[str, np.ndarray] = {}
    for rel in entries.paths(vector_entries):
        for path, positions in decode_puffin(io.read(rel)).items():
            out[path] = positions.to_numpy(zero_copy_only=False)
    return out


class _Replan(CommitConflictError):
    """Compactions moved files the restore adds: plan again from the new latest snapshot (internal)."""


class RestoreProducer(SnapshotProducer):
    """Commits a :class:`RestorePlan`: DELETE ``removed``, ADD ``added`` (the request's one manifest), on the
    plan's base snapshot; a lost race to anything but compactions is a :class:`CommitConflictError`."""

    kind = CommitKind.OVERWRITE

    def __init__(self, *args: Any, plan: RestorePlan, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan = plan

    def has_work(self) -> bool:
        return not self.plan.noop

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        self._follow(latest)
        return self.plan.removed

    def removes_rows(self, replaced: pa.Table | None) -> bool:
        """A restore that removes any file (data or deletion vectors) changed rows other than by adding some, and
        one that ADDs a deletion-vector file again deletes the rows its vectors mark in data files that stay live
        (:func:`marks_staying_rows`): a reader of appended rows can follow neither."""
        if replaced is not None and replaced.num_rows > 0:
            return True
        return marks_staying_rows(self.io, self.plan.added, self.plan.removed, self.plan.base_paths)

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        before = set(entries.paths(self.plan.removed))
        self._follow(latest)
        return None if set(entries.paths(self.plan.removed)) == before else self.plan.removed

    def base_manifests(self, merger: ManifestMerger, latest: Snapshot) -> list[ManifestFileMeta]:
        """``latest``'s manifests without any entry of a path this restore adds again (each such path is not
        live in ``latest``, so its entries net to nothing), then merged as usual."""
        metas = self.store.snapshot_manifests(latest)
        again = self.plan.added.column(entries.PATH).combine_chunks()
        if len(again) == 0:
            return merger.merge_base(metas)
        out: list[ManifestFileMeta] = []
        for meta in metas:
            table = self.store.manifest(meta.file_name)
            hit = pc.is_in(table.column(entries.PATH), value_set=again)
            if not pc.any(hit).as_py():
                out.append(meta)
                continue
            per_entry = meta.file_size / max(table.num_rows, 1)
            out.extend(merger.write_entries(table.filter(pc.invert(hit)), per_entry))
        return merger.merge_base(out)

    def _follow(self, latest: Snapshot | None) -> None:
        """Move the plan onto ``latest``: unchanged if its live files are the base's; re-planned if only
        compactions changed them; otherwise a conflict."""
        plan = self.plan
        if latest is None or (plan.base is not None and latest.id == plan.base.id):
            return
        moved = _plan(self.store, plan.target, latest, plan.target_live, plan.tag)
        before, after = plan.base_paths, moved.base_paths
        if before != after and not compactions_only(
            self.store, plan.base, latest, removed=set(before - after), added=set(after - before)
        ):
            raise CommitConflictError(
                f"a concurrent commit (snapshot {latest.id}) changed the table while the restore of snapshot "
                f"{plan.target.id} was committing ({len(before - after)} file(s) removed, {len(after - before)} "
                "added); the restore did not land: plan it again on the new state if it is still wanted"
            )
        if set(entries.paths(moved.added)) != set(entries.paths(plan.added)):
            raise _Replan("compactions moved files the restore adds again; planning again")
        self.plan = moved


def _write_added(io: FileIO, store: MetaStore, plan: RestorePlan, schema_id: int, sync: bool) -> list[ManifestFileMeta]:
    """The manifest of the ADD entries the restore copies from the target (as a writer task's manifest)."""
    if plan.added.num_rows == 0:
        return []
    name = layout.manifest_name(uuid.uuid4().hex, 0)
    data = encode_manifest(plan.added.combine_chunks())
    io.write(layout.manifest_path(name), data, sync=sync)
    store.remember_manifest(name, data)
    return [manifest_meta(name, len(data), plan.added, schema_id)]


def _check_kept(io: FileIO, store: MetaStore, plan: RestorePlan, now_ms: int) -> None:
    """After the pin is written: the target must still be kept by what kept it when it was planned (its tag, or
    its snapshot file with no expiration announced past it). Otherwise maintenance may be deleting its files."""
    target = plan.target
    if plan.tag is not None:
        with contextlib.suppress(Exception):
            tag = read_tag(io, plan.tag)
            if tag is not None and tag.snapshot == target and not tag.expired(now_ms):
                return
    snap = store.try_snapshot(target.id)
    earliest = store.read_hint(layout.EARLIEST)
    if snap is not None and snap.nonce == target.nonce and (earliest is None or earliest <= target.id):
        return
    what = f"tag {plan.tag!r} was deleted or" if plan.tag is not None else "snapshot"
    raise SnapshotNotFoundError(
        f"the restore's target (snapshot {target.id}) is no longer kept: its {what} is being expired "
        f"(the earliest snapshot is {earliest}); the restore did not land"
    )


def commit_restore(
    io: FileIO,
    store: MetaStore,
    plan: RestorePlan,
    *,
    clock: Callable[[], float],
    after_commit: Callable[[Snapshot], None] | None = None,
) -> Snapshot | None:
    """Commit ``plan`` (a one-off commit: no commit user is remembered; the commit-user map is carried forward
    from the latest snapshot like any commit's). Returns the new snapshot, or None for a plan with nothing to do.

    Raises :class:`CommitConflictError` if another commit changed the table first (nothing landed; compactions
    alone are followed), :class:`SnapshotNotFoundError` if the target stopped being kept while the restore ran,
    :class:`InvalidCommitError` on a format-version-1 table (before anything is written)."""
    if plan.noop:
        return None
    schema = store.schema_for(plan.base)
    if schema.format_version < 2:
        raise InvalidCommitError(
            f"{io.uri} is a format-version-1 table, and a restore needs version 2: libraries that know only version "
            "1 would, when they expire snapshots, delete the files a restore adds again. Upgrade the table first "
            "(lakefmt upgrade URI, or Table.upgrade(); no data file is rewritten, but readers that know only "
            "version 1 can no longer read its new snapshots); nothing was committed"
        )
    options = schema.table_options
    added = _write_added(io, store, plan, schema.id, options.fsync)
    pin = Tag(uuid.uuid4().hex, plan.target, int(clock() * 1000), PIN_RETAIN_MS, pin=True)
    properties = {OPERATION_KEY: RESTORE, RESTORED_SNAPSHOT_KEY: str(plan.target.id)}
    if plan.tag is not None:
        properties[RESTORED_TAG_KEY] = plan.tag
    request = CommitRequest(None, f"oneoff-{uuid.uuid4().hex}", 0, added, None, properties)
    producer = RestoreProducer(io, store, request, clock=clock, after_commit=after_commit, plan=plan)
    pinned = False
    try:
        write_pin(io, pin, sync=options.fsync)
        pinned = True
        _check_kept(io, store, plan, int(time.time() * 1000))
        result: CommitResult = producer.commit()
    except BaseException:
        if not producer.in_doubt:  # known not to have landed: its manifest is garbage
            for meta in added:
                with contextlib.suppress(Exception):
                    io.delete(layout.manifest_path(meta.file_name))
        raise
    finally:
        if pinned:
            with contextlib.suppress(Exception):  # a pin left behind only keeps files until PIN_RETAIN_MS
                delete_pin(io, pin.name)
    return result.snapshot


def commit_shown_plan(
    io: FileIO,
    store: MetaStore,
    plan: RestorePlan,
    *,
    clock: Callable[[], float],
    after_commit: Callable[[Snapshot], None] | None = None,
) -> Snapshot | None:
    """Commit ``plan`` as it was planned (and shown to a user), never a new plan: if the table changed since
    (other than by compactions that leave the files it adds alone), :class:`CommitConflictError` and nothing
    lands, so the files it removes and adds are those that were shown."""
    try:
        return commit_restore(io, store, plan, clock=clock, after_commit=after_commit)
    except _Replan:
        raise CommitConflictError(
            f"compactions moved files the restore of snapshot {plan.target.id} adds again since it was planned; "
            "the restore did not land: plan it again"
        ) from None


def restore_replans(
    make_plan: Callable[[], RestorePlan], commit: Callable[[RestorePlan], Snapshot | None]
) -> Snapshot | None:
    """Plan and commit, planning again (at most :data:`MAX_REPLANS` times) when compactions moved files the
    restore adds while it committed."""
    for attempt in range(MAX_REPLANS + 1):
        plan = make_plan()
        try:
            return commit(plan)
        except _Replan:
            if attempt == MAX_REPLANS:
                raise CommitConflictError(
                    f"compactions kept moving files the restore of snapshot {plan.target.id} adds "
                    f"({MAX_REPLANS + 1} plans); the restore did not land"
                ) from None
    return None  # pragma: no cover


def restore(
    io: FileIO,
    store: MetaStore,
    target: Snapshot,
    *,
    tag: str | None,
    clock: Callable[[], float],
    after_commit: Callable[[Snapshot], None] | None = None,
) -> Snapshot | None:
    """:meth:`lakefmt.Table.restore`: plan a restore of ``target`` and commit it, re-planning as
    :func:`restore_replans` does."""
    return restore_replans(
        lambda: plan_restore(store, target, tag=tag),
        lambda plan: commit_restore(io, store, plan, clock=clock, after_commit=after_commit),
    )
