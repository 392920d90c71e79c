"""The kinds of commit, each a short variation of :class:`SnapshotProducer`.

* APPEND adds files; it never conflicts with anything.
* OVERWRITE replaces the files of its scope (the whole table, a partition, the partitions matching a predicate
  on partition columns, or the partitions written: :mod:`lakefmt.spec.scope`); a concurrent commit that changed
  the files it replaces makes it fail with :class:`CommitConflictError`, unless only compactions did (then it
  re-plans: the rows it replaces are the same, in other files).
* Rewrites (:class:`RewriteProducer`: compaction, row-level delete, restore) replace *named* live files with
  new ones, DELETE + ADD in one snapshot; every replaced file must still be live in the snapshot the commit
  lands on, or it fails with :class:`RewriteConflictError` naming the files that went.

The rule every kind follows after a lost race is in :func:`compactions_only`: a change made only by COMPACT
snapshots never fails a writer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.merge import ManifestMerger
from lakefmt.commit.producer import SnapshotProducer
from lakefmt.commit.types import CommitOutcome, CommitResult, ListRef
from lakefmt.errors import CommitConflictError, InvalidPartitionError, LakefmtError, RewriteConflictError
from lakefmt.io import FileIO
from lakefmt.meta import entries
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import CommitKind, ManifestFileMeta, Snapshot, TableSchema, layout, operations
from lakefmt.spec.manifest import ColumnStats
from lakefmt.spec.scope import OverwriteScope

__all__ = [
    "AppendProducer",
    "CompactProducer",
    "KeyedOverwriteProducer",
    "KeyedProducer",
    "OverwriteProducer",
    "RewriteProducer",
    "VectorChanges",
    "VectorPlanner",
    "compactions_only",
    "live_paths",
]


class AppendProducer(SnapshotProducer):
    """Adds the writers' files."""

    kind = CommitKind.APPEND


class OverwriteProducer(SnapshotProducer):
    """Replaces the live files of its scope (:class:`OverwriteScope`): the whole table, a partition, the
    partitions matching a predicate on partition columns, or the partitions of the written files (dynamic)."""

    kind = CommitKind.OVERWRITE

    def __init__(
        self,
        *args: Any,
        partition: Mapping[str, Any] | None = None,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._asked: dict[str, Any] = {"partition": dict(partition or {}), "where": where, "dynamic": dynamic}
        self.scope: OverwriteScope | None = None
        self.planned_on: Snapshot | None = None  #: the snapshot :meth:`replaced` last looked at

    def check(self, latest: Snapshot | None, schema: TableSchema) -> None:
        scope = OverwriteScope.bind(schema, **self._asked)
        if scope.kind == "partition":
            _check_inside(self.request.added, scope)  # by the manifests' partition ranges: no reads
        elif scope.kind in ("where", "dynamic") and scope.partition_keys:  # unpartitioned: one partition
            written = self._written_partitions(schema)
            if scope.kind == "where":
                _check_matching(scope, written)
            scope = scope.for_written(written)
        self.scope = scope

    def _written_partitions(self, schema: TableSchema) -> pa.ChunkedArray:
        """The partition values of every written file (from the per-task manifests, which the delta merge reads
        too)."""
        tables = [self.store.manifest(m.file_name) for m in self.request.added]
        added = entries.concat_entries(tables) if tables else entries.empty_entries_for(schema)
        return added.column(entries.PARTITION)

    def has_work(self) -> bool:
        # even without new files it deletes what it replaces; a dynamic overwrite of nothing replaces nothing
        return bool(self.request.added) or self.scope is None or self.scope.kind != "dynamic"

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        assert self.scope is not None  # set by check()
        self.planned_on = latest
        if latest is None:
            return entries.empty_entries_for(schema)
        metas = [m for m in self.store.snapshot_manifests(latest) if m.may_hold(self.scope.partition)]
        live = entries.live_entries(self.store, latest, metas) if metas else entries.empty_entries_for(schema)
        if self.scope.expression is None and self.scope.written is None:
            return live
        return live.take(self.scope.matching(live.column(entries.PARTITION)))

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        before, since = set(entries.paths(replaced)), self.planned_on
        now = self.replaced(latest, schema)  # moves planned_on to latest
        after = set(entries.paths(now))
        if before == after:
            return None
        if compactions_only(self.store, since, latest, removed=before - after, added=after - before):
            return now
        where = self.scope.describe() if self.scope is not None else "the table"
        raise CommitConflictError(
            f"a concurrent commit changed {where} while this overwrite was committing "
            f"({len(before - after)} file(s) it replaces were removed, {len(after - before)} file(s) were "
            "added); the overwrite did not land"
        )


class RewriteProducer(SnapshotProducer):
    """Replaces named live files (``rewritten``: their ADD entries, read from a snapshot) with the writers' files,
    DELETE + ADD in one snapshot. Every rewritten file must be live in the snapshot the commit lands on: a file
    that a concurrent commit removed makes the commit fail with :class:`RewriteConflictError` (it names the
    files; a compaction re-plans, a delete reports a conflict), and nothing is committed. Appends never
    conflict with a rewrite: their files are not among the rewritten ones.

    Subclasses set :attr:`kind` (COMPACT for a compaction, OVERWRITE for row-level deletes and restores)."""

    kind = CommitKind.OVERWRITE

    def __init__(self, *args: Any, rewritten: pa.Table, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rewritten = rewritten

    def has_work(self) -> bool:
        return bool(self.request.added) or self.rewritten.num_rows > 0

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        self._check_live(latest)
        return self.rewritten

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        self._check_live(latest)
        return None

    def _check_live(self, latest: Snapshot | None) -> None:
        wanted = entries.paths(self.rewritten)
        if not wanted:
            return
        gone = sorted(set(wanted) - live_paths(self.store, latest, self.rewritten))
        if gone:
            # name the operation the caller ran (a delete or a restore commits as kind OVERWRITE)
            what = self.request.properties.get(operations.OPERATION_PROPERTY) or self.kind.value.lower()
            raise RewriteConflictError(
                f"{len(gone)} of the {len(wanted)} file(s) this {what} rewrites were removed by a "
                f"concurrent commit (the first: {gone[0]}); nothing was committed",
                gone=gone,
            )


class CompactProducer(RewriteProducer):
    """A compaction: replaces live files with files holding exactly the same rows (kind COMPACT). It carries the
    commit-user map forward unchanged (it is no writer's commit), and a writer that races it never fails
    (:func:`compactions_only`). Planning and rewriting: :mod:`lakefmt.rewrite.compact.run`."""

    kind = CommitKind.COMPACT
    #: merge the small manifests into one once the base and delta of the snapshot it lands on hold this many
    TIDY_MIN_MANIFESTS = 8

    def __init__(self, *args: Any, planned_on: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.planned_on = planned_on  #: the snapshot the rewritten entries were read from, if one

    def carries_users_unchanged(self) -> bool:
        return True

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        if latest is not None and latest.id == self.planned_on:
            return self.rewritten  # read from this very snapshot's live files: all live (no manifest read)
        return super().replaced(latest, schema)

    def base_manifests(self, merger: ManifestMerger, latest: Snapshot) -> list[ManifestFileMeta]:
        """The base list, with the table's small manifests merged into one when there are at least
        :attr:`TIDY_MIN_MANIFESTS` of them and they fit in one (their ADD/DELETE pairs cancelled): a compaction
        tidies the metadata a long stream leaves (up to ``manifest.merge-min-count`` small manifests, each one more
        read for every scan) as well as its data files. Otherwise the usual merge."""
        metas = self.store.snapshot_manifests(latest)
        target = self.store.schema_for(latest).table_options.manifest_target_size
        small = [m for m in metas if m.file_size < target]
        size = sum(m.file_size for m in small)
        if len(small) < self.TIDY_MIN_MANIFESTS or size >= target:
            return merger.merge_base(metas)
        merged = entries.cancel_pairs(entries.concat_entries(entries.read_manifests(self.store, small)))
        big = [m for m in metas if m.file_size >= target]
        return big + merger.write_entries(merged, size / max(merged.num_rows, 1))


def live_paths(store: MetaStore, snap: Snapshot | None, among: pa.Table) -> set[str]:
    """Which of the files of ``among`` (entries) are live in ``snap``. Reads only the manifests whose partition
    ranges may hold them (a file's ADD and DELETE always share its partition)."""
    if snap is None or among.num_rows == 0:
        return set()
    metas = store.snapshot_manifests(snap)
    if entries.PARTITION in among.column_names:
        parts = [p or {} for p in among.column(entries.PARTITION).to_pylist()]
        distinct = {tuple(sorted(p.items(), key=lambda kv: kv[0])) for p in parts}
        if len(distinct) <= 64:  # else: read them all rather than test every manifest against every partition
            metas = [m for m in metas if any(m.may_hold(dict(p)) for p in distinct)]
    if not metas:
        return set()
    live = entries.live_entries(store, snap, metas)
    wanted = among.column(entries.PATH).combine_chunks()
    return set(entries.paths(live.filter(pc.is_in(live.column(entries.PATH), value_set=wanted))))


def compactions_only(
    store: MetaStore, since: Snapshot | None, latest: Snapshot | None, *, removed: set[str], added: set[str]
) -> bool:
    """Whether a set of files that changed between ``since`` and ``latest`` changed by compaction alone: each file
    in ``removed`` was deleted, and each in ``added`` was added, by a COMPACT snapshot in ``since.id+1 ..
    latest.id``, and every file those compactions consumed in the partitions of ``added`` was one of ``removed``
    or another compaction's output (a compaction that merged a concurrently appended file into the set is not a
    move of the same rows). Then a commit that replaces the set can re-plan instead of failing. False when
    unsure (a snapshot in between has expired)."""
    if latest is None or since is None or latest.id <= since.id or not (removed or added):
        return False
    deltas: list[pa.Table] = []
    try:
        for sid in range(since.id + 1, latest.id + 1):
            snap = latest if sid == latest.id else store.snapshot(sid)
            if snap.commit_kind is not CommitKind.COMPACT:
                continue
            metas = store.manifest_list(snap.delta_manifest_list)
            deltas.extend(store.manifest(m.file_name) for m in metas)
    except (LakefmtError, OSError):
        return False
    if not deltas:
        return False
    delta = entries.concat_entries(deltas)
    adds, dels = entries.adds(delta), entries.deletes(delta)
    compact_adds, compact_dels = set(entries.paths(adds)), set(entries.paths(dels))
    if not (removed <= compact_dels and added <= compact_adds):
        return False
    if entries.PARTITION not in delta.column_names:  # unpartitioned: one partition
        consumed = compact_dels
    else:
        mine = pc.is_in(adds.column(entries.PATH), value_set=pa.array(sorted(added), pa.string()))
        parts = {_part_key(p) for p in adds.filter(mine).column(entries.PARTITION).to_pylist()}
        consumed = {
            path
            for path, part in zip(entries.paths(dels), dels.column(entries.PARTITION).to_pylist(), strict=True)
            if _part_key(part) in parts
        }
    return consumed <= removed | compact_adds


def _part_key(part: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((part or {}).items(), key=lambda kv: kv[0]))


def _inside(stats: ColumnStats, rows: int, value: Any) -> bool:
    """Whether every one of ``rows`` entries summarised by ``stats`` has partition value ``value``."""
    if value is None:
        return stats.null_count == rows
    return stats.min == value and stats.max == value and not stats.null_count


def _check_inside(added: Sequence[ManifestFileMeta], scope: OverwriteScope) -> None:
    for m in added:
        for key, value in scope.partition.items():
            s = m.partition_stats.get(key)
            if s is not None and not _inside(s, m.num_entries, value):
                raise InvalidPartitionError(
                    f"the data to overwrite {scope.describe()} has rows with {key} outside it "
                    f"(from {s.min!r} to {s.max!r}); nothing was committed"
                )


def _check_matching(scope: OverwriteScope, written: pa.ChunkedArray) -> None:
    """Every written file's partition is in ``scope`` (a predicate scope: checked on the entries)."""
    inside = set(scope.matching(written).to_pylist())
    outside = [i for i in range(len(written)) if i not in inside]
    if outside:
        raise InvalidPartitionError(
            f"the data to overwrite {scope.describe()} has {len(outside)} file(s) outside it (the first in "
            f"partition {written[outside[0]].as_py()}); nothing was committed"
        )


@dataclass(frozen=True)
class VectorChanges:
    """What a commit does to the deletion vectors of a table (format version 3), planned on one snapshot: the live
    deletion-vector entries it replaces (``removed``), the entries of the files it wrote instead (``added``), and
    the live paths of the partitions and buckets it touched when it planned (``state``), which must be the same
    in the snapshot it lands on, or it is planned again."""

    removed: pa.Table
    added: pa.Table
    state: frozenset[str]
    #: the entries of the changelog files the plan stored (``changelog-producer=lookup``), or None
    changelog: pa.Table | None = None
    #: whether the plan marks rows that were live in the snapshot it was planned on (not only rows of the files the
    #: commit adds): the snapshot's ``removesRows``. True when a planner does not say
    removes_live: bool = True


class VectorPlanner(Protocol):
    """Plans a commit's deletion vectors (:mod:`lakefmt.rewrite.keys.planners`: an upsert's, a delete's)."""

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        """The changes to make on ``latest``, for the writers' files of ``added``."""
        ...

    def state(self, latest: Snapshot | None) -> frozenset[str]:
        """The live paths of the partitions and buckets the last plan touched, in ``latest``."""
        ...

    @property
    def written(self) -> list[str]:
        """The files every plan so far wrote (or began to write), relative to the table root."""
        ...


class KeyedProducer(SnapshotProducer):
    """A commit that marks deletion vectors: an upsert (kind APPEND: its new rows, the old versions of their keys
    marked deleted) or a delete by key or by filter (kind OVERWRITE: only vectors change). The marks are planned on
    the snapshot the commit lands on: after a lost race, a change to any partition and bucket it touched (a
    concurrent upsert of the same keys, a compaction of the bucket) makes it plan them again, so a key never has
    two live rows; a change elsewhere keeps the plan."""

    kind = CommitKind.APPEND

    def __init__(self, *args: Any, planner: VectorPlanner, kind: CommitKind = CommitKind.APPEND, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.planner = planner
        self.kind = kind  # type: ignore[misc]
        self.changes: VectorChanges | None = None
        self._changelog: tuple[VectorChanges, ListRef] | None = None  # the list written for the current plan

    def commit(self) -> CommitResult:
        """The protocol (:meth:`SnapshotProducer.commit`), deleting the files of plans known not to land
        (:func:`_discarding_plans`)."""
        return _discarding_plans(self, self.planner, super().commit)

    def has_work(self) -> bool:
        return True  # a delete adds no file; whether it changes anything is known once planned

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        self.changes = self.planner.plan(latest, schema, self.request.added)
        return self.changes.removed

    def change_manifests(self, merger: ManifestMerger, replaced: pa.Table | None) -> list[ManifestFileMeta]:
        assert self.changes is not None  # set by replaced()
        parts = [entries.as_deletes(self.changes.removed)] if self.changes.removed.num_rows else []
        if self.changes.added.num_rows:
            parts.append(self.changes.added)
        if not parts:
            return []
        return merger.write_entries(entries.concat_entries(parts), 100.0)

    def changelog_list(self, merger: ManifestMerger, schema: TableSchema, options: TableOptions) -> ListRef | None:
        changes = self.changes
        if changes is None or changes.changelog is None or changes.changelog.num_rows == 0:
            return None
        if self._changelog is None or self._changelog[0] is not changes:
            metas = merger.write_entries(changes.changelog, 100.0)
            written = self._write_list(merger, metas, schema, options)
            rows = sum(m.num_added_rows for m in metas)
            self._changelog = (changes, ListRef(written.name, written.size, rows))
        return self._changelog[1]

    def removes_rows(self, replaced: pa.Table | None) -> bool:
        """Whether the plan marks live rows (an upsert of new keys only marks none)."""
        return super().removes_rows(replaced) or (self.changes is not None and self.changes.removes_live)

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        assert self.changes is not None
        if self.planner.state(latest) == self.changes.state:
            return None
        return self.replaced(latest, schema)  # planned again on latest (the old plan's files become orphans)


class KeyedOverwriteProducer(OverwriteProducer):
    """An overwrite of a key table: the scope's files (and their deletion vectors) are replaced as by any overwrite,
    and of two rows for one key among the new files all but one are marked deleted (``planner`` settles the new
    rows among themselves: an :class:`~lakefmt.rewrite.keys.planners.UpsertPlanner` with ``against_live=False``)."""

    def __init__(self, *args: Any, planner: VectorPlanner, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.planner = planner
        self.changes: VectorChanges | None = None

    def commit(self) -> CommitResult:
        """The protocol, deleting the files of the plan when it is known not to land (:func:`_discarding_plans`)."""
        return _discarding_plans(self, self.planner, super().commit)

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        out = super().replaced(latest, schema)
        if self.changes is None:  # the new files' marks do not depend on the snapshot: planned once
            self.changes = self.planner.plan(latest, schema, self.request.added)
        return out

    def change_manifests(self, merger: ManifestMerger, replaced: pa.Table | None) -> list[ManifestFileMeta]:
        assert self.changes is not None  # set by replaced()
        parts = [entries.as_deletes(replaced)] if replaced is not None and replaced.num_rows else []
        if self.changes.added.num_rows:
            parts.append(self.changes.added)
        if not parts:
            return []
        return merger.write_entries(entries.concat_entries(parts), 100.0)


def _discarding_plans(
    producer: KeyedProducer | KeyedOverwriteProducer, planner: VectorPlanner, run: Callable[[], CommitResult]
) -> CommitResult:
    """``run()`` (the commit protocol); then delete, best effort (orphan-clean is the backstop), the files the
    planner wrote (deletion vectors, merged rows) that no snapshot will reference: all of them when the commit
    failed before any publish that may have landed, or ended without publishing; those of plans dropped after a
    lost race when it landed. Nothing is deleted while a publish may have landed (``producer.in_doubt``)."""
    try:
        result = run()
    except BaseException:
        if not producer.in_doubt:
            _delete_quietly(producer.io, planner.written, frozenset())
        raise
    keep: frozenset[str] = frozenset()
    if result.outcome is CommitOutcome.COMMITTED and producer.changes is not None:
        added = entries.paths(producer.changes.added)
        keep = frozenset(added) | {layout.key_index_path(p) for p in added}  # a data file's key index with it
        if producer.changes.changelog is not None:
            keep |= frozenset(entries.paths(producer.changes.changelog))
    _delete_quietly(producer.io, planner.written, keep)
    return result


def _delete_quietly(io: FileIO, paths: Sequence[str], keep: frozenset[str]) -> None:
    for path in paths:
        if path not in keep:
            with contextlib.suppress(Exception):
                io.delete(path)
