"""Automatic compaction (table option ``compaction.auto``): after a commit lands, the partitions it touched are
compacted in size tiers (:func:`lakefmt.rewrite.compact.plan.plan_compaction` with ``tiered=True``) when one
holds ``compaction.min.file-num`` small files; in the committing thread, or in the table's worker thread with
``compaction.async`` (:mod:`lakefmt.maintenance.background`). The compaction itself is
:mod:`lakefmt.rewrite.compact.run`'s.

On a key table, a touched bucket is compacted once it holds ``num-sorted-run.compaction-trigger`` data files;
on any format-version-3 table, a file whose deletion vector deletes a large share of its rows is rewritten
(:mod:`lakefmt.rewrite.compact.buckets`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lakefmt.meta import entries as ents
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target
from lakefmt.rewrite.compact.plan import LARGE_ENOUGH, live_after, plan_compaction
from lakefmt.rewrite.compact.run import run_plan
from lakefmt.rewrite.compact.types import CompactionReport, Partition, partition_key
from lakefmt.spec import CommitKind, Snapshot

__all__ = ["auto_compact", "auto_compact_after", "touched_partitions"]

log = logging.getLogger("lakefmt.compact")


def touched_partitions(table: Targetable, snap: Snapshot) -> list[Partition]:
    """The partitions of the files ``snap`` added (from its delta manifests)."""
    store = as_target(table).store
    metas = [m for m in store.manifest_list(snap.delta_manifest_list) if m.num_added_files]
    if not metas:
        return []
    added = ents.adds(ents.concat_entries(ents.read_manifests(store, metas)))
    if ents.PARTITION not in added.column_names:
        return [{}]
    seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for p in added.column(ents.PARTITION).to_pylist():
        seen.setdefault(partition_key(p), dict(p or {}))
    return list(seen.values())


def auto_compact(table: Targetable, snap: Snapshot) -> CompactionReport | None:
    """The automatic compaction after ``snap`` (a commit that landed): the partitions it touched, in size tiers.
    None when nothing qualified."""
    target = as_target(table)
    return _auto_compact(target, touched_partitions(target, snap), snap)


def auto_compact_after(table: Targetable, snaps: Sequence[Snapshot]) -> CompactionReport | None:
    """The automatic compaction after several commits that landed (``compaction.async``: a worker that fell
    behind takes them together): the partitions any of them touched, planned on the latest snapshot."""
    table = as_target(table)
    parts: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for snap in snaps:
        if snap.commit_kind is not CommitKind.COMPACT:
            for p in touched_partitions(table, snap):
                parts.setdefault(partition_key(p), p)
    latest = table.latest_snapshot() if parts else None
    return None if latest is None else _auto_compact(table, list(parts.values()), latest)


def _auto_compact(table: RewriteTarget, parts: list[Partition], snap: Snapshot) -> CompactionReport | None:
    if not parts:
        return None
    schema = table.schema()
    options = schema.table_options
    live = live_after(table.store, snap, int(options.target_file_size * LARGE_ENOUGH))
    keys = [partition_key(p) for p in parts]
    if schema.has_primary_key:  # a bucket is compacted at the sorted-run trigger (a partition holds its buckets)
        if all(live.files.get(k, 0) < options.sorted_run_compaction_trigger for k in keys):
            return None
    elif all(live.small.get(k, 0) < options.compaction_min_file_num and not live.vectors.get(k, 0) for k in keys):
        return None  # no touched partition holds enough small files, or any deleted row: no plan needed
    plan = plan_compaction(table, parts if table.partition_keys else None, tiered=True, strict=False)
    if not plan.groups:
        return None
    report = run_plan(table, plan, None, None, after_commit=False)  # the commit's own after-commit work follows
    if report.snapshot is not None:
        log.info(
            "compacted %d file(s) into %d in %d partition(s): snapshot %d",
            report.rewritten_files,
            report.written_files,
            len(report.partitions),
            report.snapshot.id,
        )
    return report
