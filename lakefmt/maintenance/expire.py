"""Snapshot expiration.

Which snapshots go: never the latest; the oldest ones beyond ``retain_max``; and, while more than
``retain_min`` would remain, those committed before ``older_than``. Expired snapshots are always the oldest,
contiguous run ``e .. k-1``; ``k`` becomes the earliest.

What goes with them, in this order (so a crash anywhere leaves a readable table and a rerun finishes):

1. data files deleted by the snapshots ``e+1 .. k``, except those a restore after ``e`` adds again (the only
   commit that ADDs a path DELETEd before: a file deleted in the window is live in a retained snapshot only if a
   restore brought it back) and those live in a tagged snapshot (:mod:`lakefmt.maintenance.keep`); and the
   changelog files the expired snapshots stored, except a tagged one's;
2. manifests and manifest lists that expired snapshots use and no retained or tagged snapshot does;
3. the snapshot files, oldest first; 4. the EARLIEST hint (also written before step 1, as an announcement
   that orphan-clean, tag creation and restores honour); 5. the records of consumers past
   ``consumer.expiration-time``; 6. the tags (and restores' pins) past their ``retain`` time.

**Tags and restores that arrive while it runs.** The plan reads the tags before the snapshots. After the
announcement (step 4's first write) and before deleting anything, the tags are listed again and then the latest
snapshot read again: what a tag created since keeps, and what a restore published since adds again, is spared.
A tag's creator and a restore check the announcement after creating their tag (or pin): either they see it and
give up, or this run sees their tag, pin or restore.

*Holds* (:mod:`lakefmt.maintenance.holds`) cap the run: no snapshot at or after a hold's snapshot expires. By
default the holds are the table's live consumers; a consumer file that cannot be read stops the expiration
with a clear error (expiring nothing is the safe side).

:func:`plan_expiration` decides (it reads metadata and deletes nothing); :func:`apply_expiration` carries a
plan out in that order; :func:`expire_snapshots` does both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from lakefmt.errors import CorruptMetadataError, LakefmtError, MissingMetadataError
from lakefmt.io import FileIO
from lakefmt.maintenance.holds import HeldBack, Hold, TableHolds, apply_holds, table_holds
from lakefmt.maintenance.keep import changelog_paths, readded_paths, tag_references
from lakefmt.maintenance.report import FileClass, MaintenanceReport, Progress
from lakefmt.meta import entries as ents
from lakefmt.meta.consumers import delete_consumer_if_unchanged
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import delete_tag_if_unchanged, list_tags
from lakefmt.spec import Consumer, Snapshot, Tag, layout
from lakefmt.spec.keys.index_file import hashed_columns, indexed_column

__all__ = [
    "ExpirationPlan",
    "PlannedDeletion",
    "apply_expiration",
    "expire_snapshots",
    "plan_expiration",
    "select_expired",
]


def select_expired(
    snapshots: list[Snapshot], retain_min: int, retain_max: int | None, older_than_ms: int | None, now_ms: int
) -> int:
    """How many of the oldest ``snapshots`` (ascending, contiguous) to expire."""
    if retain_min < 1:
        raise ValueError("retain_min must be at least 1 (the latest snapshot is never expired)")
    if retain_max is not None and retain_max < retain_min:
        raise ValueError(f"retain_max ({retain_max}) must be at least retain_min ({retain_min})")
    n = len(snapshots)
    count = max(0, n - retain_max) if retain_max is not None else 0
    if older_than_ms is not None:
        horizon = now_ms - older_than_ms
        while count < n - retain_min and snapshots[count].time_millis < horizon:
            count += 1
    return min(count, max(0, n - retain_min))


class PlannedDeletion(NamedTuple):
    """One file an expiration deletes: its kind, its path relative to the root, and its size in bytes."""

    kind: FileClass
    path: str
    size: int


@dataclass(frozen=True)
class ExpirationPlan:
    """What an expiration will do: the snapshots it expires, the ones it keeps, and the files it deletes, in
    the crash-safe order of the module docstring (data files, manifests, manifest lists, snapshot files)."""

    expired: tuple[int, ...] = ()  #: ids of the expired snapshots, oldest first (a contiguous run)
    kept: tuple[int, int] | None = None  #: (earliest, latest) retained; None for a table with no snapshot
    deletions: tuple[PlannedDeletion, ...] = ()
    #: every hold, and how many snapshots each kept that the retention rules would have expired
    held: tuple[HeldBack, ...] = ()
    #: consumers past ``consumer.expiration-time``: they hold nothing, and their records are deleted last
    expired_consumers: tuple[Consumer, ...] = ()
    #: tags (and restores' pins) past their ``retain`` time: they keep nothing, and their files are deleted last
    expired_tags: tuple[Tag, ...] = ()
    #: the latest snapshot and the live tags (and pins) the plan saw, by name and nonce (a name deleted and
    #: created again is another tag): what arrives after them is spared
    planned_latest: int | None = None
    planned_tags: frozenset[tuple[str, bool, str]] = frozenset()
    #: the commit times (epoch milliseconds) of the retained snapshots, oldest first
    kept_times: tuple[int, ...] = ()

    @property
    def new_earliest(self) -> int | None:
        """The earliest snapshot after the expiration (the value of the EARLIEST hint it writes)."""
        return self.kept[0] if self.kept else None


def expire_snapshots(
    io: FileIO,
    store: MetaStore,
    *,
    retain_min: int = 1,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    holds: Sequence[Hold] | None = None,
) -> MaintenanceReport:
    """Expire snapshots and delete what only they reference. See the module docstring for the rules."""
    plan = plan_expiration(
        store, retain_min=retain_min, retain_max=retain_max, older_than_ms=older_than_ms, holds=holds
    )
    return apply_expiration(io, store, plan, dry_run=dry_run, progress=progress)


def plan_expiration(
    store: MetaStore,
    *,
    retain_min: int = 1,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    now_ms: int | None = None,
    holds: Sequence[Hold] | None = None,
) -> ExpirationPlan:
    """Decide which snapshots expire and which files go with them (reads metadata, deletes nothing).

    ``now_ms`` (epoch milliseconds, default: now) is the point in time ``older_than_ms`` and
    ``consumer.expiration-time`` count back from. ``holds``: what must be kept; None (the default) reads the
    table's own (its live consumers), a sequence replaces them."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    # the holds are read before the snapshots: a consumer only moves forward, so an earlier read is the safe one
    own = table_holds(store, now) if holds is None else TableHolds(tuple(holds))
    tags = list_tags(store.io).check()  # before the snapshots too; an unreadable tag stops the expiration
    live_tags, expired_tags = tags.live(now), tags.expired(now)
    latest = store.latest_snapshot(strict=True)  # never a stale answer before deleting
    if latest is None:
        return ExpirationPlan(expired_consumers=own.expired_consumers, expired_tags=expired_tags)
    ids = [i for i in store.snapshot_ids() if i <= latest.id]
    snaps = [s for s in (store.try_snapshot(i) for i in ids) if s is not None]
    count = select_expired(snaps, retain_min, retain_max, older_than_ms, now)
    count = max(count, _begun_below_hint(store, snaps))
    count, held = apply_holds(snaps, count, own.holds)
    expired, retained = snaps[:count], snaps[count:]
    kept = (retained[0].id, retained[-1].id) if retained else None
    seen_tags = frozenset((t.name, t.pin, t.nonce) for t in live_tags)
    kept_times = tuple(s.time_millis for s in retained)
    if not expired:
        return ExpirationPlan(
            (), kept, (), held, own.expired_consumers, expired_tags, latest.id, seen_tags, kept_times
        )
    sizes: dict[str, int] = {}

    # 1. data files deleted at or before the new earliest snapshot k
    deletable: set[str] = set()
    for s in snaps[1 : count + 1]:
        try:
            metas = store.manifest_list(s.delta_manifest_list)
        except CorruptMetadataError:
            if s.id == retained[0].id:
                raise
            continue  # an interrupted run deleted it, after it had deleted every data file it named
        for m in metas:
            if m.num_deleted_files:
                try:
                    entries = store.manifest(m.file_name)
                except CorruptMetadataError:
                    if s.id == retained[0].id:
                        raise
                    continue  # as above
                dels = ents.deletes(entries)
                ents.check_data_paths(dels, f"a manifest of snapshot {s.id}")  # before deleting anything
                paths = ents.paths(dels)
                deletable.update(paths)
                sizes.update(zip(paths, dels.column(ents.FILE_SIZE).to_pylist(), strict=True))
    # ... and the changelog files the expired snapshots stored (only their own snapshot names them)
    changelogs: set[str] = set()
    for s in expired:
        try:
            stored = changelog_paths(store, s)
            changelogs.update(stored)
            sizes.update(stored)
        except MissingMetadataError:
            continue  # an interrupted run deleted its manifests, after the files they name
    # ... but not a path a restore after e adds again, nor one a tag keeps
    tagged = tag_references(store, live_tags, data=bool(deletable or changelogs))
    if deletable:
        deletable -= readded_paths(store, snaps[1:])
        deletable -= tagged.data
    changelogs -= tagged.data
    # 2. metadata only expired snapshots use (and no tag does)
    used_lists: set[str] = set(tagged.lists)
    used_manifests: set[str] = set(tagged.manifests)
    for s in retained:
        for name in s.manifest_lists:
            used_lists.add(name)
            used_manifests.update(m.file_name for m in store.manifest_list(name))
        sizes[s.base_manifest_list] = s.base_manifest_list_size
        sizes[s.delta_manifest_list] = s.delta_manifest_list_size
    lists: set[str] = set()
    manifests: set[str] = set()
    for s in expired:
        for name in s.manifest_lists:
            if name in used_lists:
                continue
            lists.add(name)
            try:
                metas = store.manifest_list(name)
            except LakefmtError:
                continue  # already deleted by an interrupted run, which handled its manifests first
            for m in metas:
                if m.file_name not in used_manifests:
                    manifests.add(m.file_name)
                    sizes[m.file_name] = m.file_size
        sizes[s.base_manifest_list] = s.base_manifest_list_size
        sizes[s.delta_manifest_list] = s.delta_manifest_list_size
        if s.changelog_manifest_list is not None:
            sizes[s.changelog_manifest_list] = s.changelog_manifest_list_size
    deletions = (
        [PlannedDeletion(_file_class(p), p, sizes.get(p, 0)) for p in sorted(deletable)]
        + [PlannedDeletion(FileClass.CHANGELOG, p, sizes.get(p, 0)) for p in sorted(changelogs)]
        + [PlannedDeletion(FileClass.MANIFEST, layout.manifest_path(n), sizes.get(n, 0)) for n in sorted(manifests)]
        + [
            PlannedDeletion(FileClass.MANIFEST_LIST, layout.manifest_list_path(n), sizes.get(n, 0))
            for n in sorted(lists)
        ]
        + [PlannedDeletion(FileClass.SNAPSHOT, layout.snapshot_path(s.id), len(s.to_json())) for s in expired]
    )
    return ExpirationPlan(
        tuple(s.id for s in expired),
        kept,
        tuple(deletions),
        held,
        own.expired_consumers,
        expired_tags,
        latest.id,
        seen_tags,
        kept_times,
    )


def _begun_below_hint(store: MetaStore, snaps: list[Snapshot]) -> int:
    """How many of the oldest ``snaps`` an earlier expiration announced expired (the ``EARLIEST`` hint) and began to
    delete: some file only they need is already gone, so they cannot be read and this run finishes the job,
    whatever its own rules. Snapshots below a hint that are intact (a run that stopped before deleting anything, a
    hand-made hint) are left to the rules: a hint alone never deletes a readable snapshot."""
    hint = store.read_hint(layout.EARLIEST)
    ids = [s.id for s in snaps]
    if hint is None or hint not in ids or ids.index(hint) == 0:
        return 0
    below = ids.index(hint)
    io = store.io
    try:
        for s in snaps[1 : below + 1]:  # data files first: an expiration deletes them first
            for m in store.manifest_list(s.delta_manifest_list):
                if m.num_deleted_files:
                    dels = ents.deletes(store.manifest(m.file_name))
                    ents.check_data_paths(dels, f"a manifest of snapshot {s.id}")
                    if not all(io.exists(p) for p in ents.paths(dels)):
                        return below
        for s in snaps[:below]:
            for name in s.manifest_lists:
                for m in store.manifest_list(name):
                    store.manifest(m.file_name)
    except MissingMetadataError:
        return below
    return 0


def apply_expiration(
    io: FileIO,
    store: MetaStore,
    plan: ExpirationPlan,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MaintenanceReport:
    """Carry out ``plan``: announce the new earliest snapshot (the EARLIEST hint), delete the planned files in
    their order, then write the hint again, then delete the records of expired consumers (each only if it
    has not moved since it was read). With ``dry_run``, only report what would be deleted."""
    report = MaintenanceReport("expire", dry_run)
    report.kept_snapshots = plan.kept
    report.expired_snapshots = list(plan.expired)
    report.held_back = list(plan.held)
    earliest = plan.new_earliest
    if plan.expired and earliest is not None:
        _expire(io, store, plan, earliest, report, dry_run, progress)
    for consumer in plan.expired_consumers:
        path = layout.consumer_path(consumer.consumer_id)
        if dry_run or delete_consumer_if_unchanged(io, consumer):
            report.expired_consumers.append(consumer.consumer_id)
            report.add(FileClass.CONSUMER, path, len(consumer.to_json()))
    for tag in plan.expired_tags:
        path = layout.pin_path(tag.name) if tag.pin else layout.tag_path(tag.name)
        if dry_run or delete_tag_if_unchanged(io, tag):
            if not tag.pin:
                report.expired_tags.append(tag.name)
            report.add(FileClass.TAG, path, len(tag.to_json()))
    return report


def _arrived_since(store: MetaStore, plan: ExpirationPlan) -> set[str]:
    """After the announcement: the files that tags (and pins) created since the plan keep, and the paths that
    restores published since the plan add again. Tags first, then the latest snapshot: a restore deletes its pin
    only after it published."""
    now = int(time.time() * 1000)
    new_tags = [t for t in list_tags(store.io).check().live(now) if (t.name, t.pin, t.nonce) not in plan.planned_tags]
    spared = tag_references(store, new_tags).paths() if new_tags else set()
    latest = store.latest_snapshot(strict=True)
    if latest is not None and plan.planned_latest is not None and latest.id > plan.planned_latest:
        newer = [latest if i == latest.id else store.snapshot(i) for i in range(plan.planned_latest + 1, latest.id + 1)]
        spared |= readded_paths(store, newer)
    return spared


def _expire(
    io: FileIO,
    store: MetaStore,
    plan: ExpirationPlan,
    earliest: int,
    report: MaintenanceReport,
    dry_run: bool,
    progress: Progress | None,
) -> None:
    if not dry_run:
        # announce the decision before deleting anything: orphan-clean ignores snapshots below EARLIEST, so
        # one running meanwhile never trips over a half-expired snapshot (and it is written again at the end)
        store.write_hint(layout.EARLIEST, earliest)
    spared = set() if dry_run else _arrived_since(store, plan)
    # any schema's: a key widened past the indexable types (uint32 to uint64) leaves its older files' indexes
    indexed = any(indexed_column(s) is not None or hashed_columns(s) is not None for s in store.all_schemas())
    for done, (kind, path, size) in enumerate(plan.deletions, 1):
        if path in spared:
            continue
        report.add(kind, path, size)
        if not dry_run:
            io.delete(path)
            if indexed and kind is FileClass.DATA:
                io.delete(layout.key_index_path(path))  # a data file's key index goes with it (if it has one)
        if progress:
            progress(done, len(plan.deletions), path)
    if not dry_run:
        store.write_hint(layout.EARLIEST, earliest)


def _file_class(path: str) -> FileClass:
    """A file an expired snapshot removed: a data file, or a deletion-vector file (format version 3)."""
    return FileClass.DELETION_VECTORS if path.endswith(".puffin") else FileClass.DATA
