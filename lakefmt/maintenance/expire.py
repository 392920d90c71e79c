"""Snapshot expiration.

Which snapshots go: never the latest; the oldest ones beyond ``retain_max``; and, while more than
``retain_min`` would remain, those committed before ``older_than``. Expired snapshots are always the oldest,
contiguous run ``e .. k-1``; ``k`` becomes the earliest.

What goes with them, in this order (so a crash anywhere leaves a readable table and a rerun finishes):

1. data files deleted by the snapshots ``e+1 .. k``: a file no longer live at ``k`` can be reached only by an
   expired snapshot (file names are never reused), whatever the order of overwrites;
2. manifests and manifest lists that expired snapshots use and no retained snapshot does;
3. the snapshot files, oldest first; 4. the EARLIEST hint (also written before step 1, as an announcement
   that orphan-clean honours).
"""

from __future__ import annotations

import time

from lakefmt.errors import CorruptMetadataError, LakefmtError
from lakefmt.io import FileIO
from lakefmt.maintenance.report import FileClass, MaintenanceReport, Progress
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot, layout

__all__ = ["expire_snapshots", "select_expired"]


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


def expire_snapshots(
    io: FileIO,
    store: MetaStore,
    *,
    retain_min: int = 1,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MaintenanceReport:
    """Expire snapshots and delete what only they reference. See the module docstring for the rules."""
    report = MaintenanceReport("expire", dry_run)
    latest = store.latest_snapshot()
    if latest is None:
        return report
    ids = [i for i in store.snapshot_ids() if i <= latest.id]
    snaps = [s for s in (store.try_snapshot(i) for i in ids) if s is not None]
    count = select_expired(snaps, retain_min, retain_max, older_than_ms, int(time.time() * 1000))
    expired, retained = snaps[:count], snaps[count:]
    report.kept_snapshots = (retained[0].id, retained[-1].id) if retained else None
    report.expired_snapshots = [s.id for s in expired]
    if not expired:
        return report
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
    # 2. metadata only expired snapshots use
    used_lists: set[str] = set()
    used_manifests: set[str] = set()
    for s in retained:
        for name in (s.base_manifest_list, s.delta_manifest_list):
            used_lists.add(name)
            used_manifests.update(m.file_name for m in store.manifest_list(name))
        sizes[s.base_manifest_list] = s.base_manifest_list_size
        sizes[s.delta_manifest_list] = s.delta_manifest_list_size
    lists: set[str] = set()
    manifests: set[str] = set()
    for s in expired:
        for name in (s.base_manifest_list, s.delta_manifest_list):
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
    plan = (
        [(FileClass.DATA, p, sizes.get(p, 0)) for p in sorted(deletable)]
        + [(FileClass.MANIFEST, layout.manifest_path(n), sizes.get(n, 0)) for n in sorted(manifests)]
        + [(FileClass.MANIFEST_LIST, layout.manifest_list_path(n), sizes.get(n, 0)) for n in sorted(lists)]
        + [(FileClass.SNAPSHOT, layout.snapshot_path(s.id), len(s.to_json())) for s in expired]
    )
    if not dry_run:
        # announce the decision before deleting anything: orphan-clean ignores snapshots below EARLIEST, so
        # one running meanwhile never trips over a half-expired snapshot (and it is written again at the end)
        store.write_hint(layout.EARLIEST, retained[0].id)
    for done, (kind, path, size) in enumerate(plan, 1):
        report.add(kind, path, size)
        if not dry_run:
            io.delete(path)
        if progress:
            progress(done, len(plan), path)
    if not dry_run:
        store.write_hint(layout.EARLIEST, retained[0].id)
    return report
