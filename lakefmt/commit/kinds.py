"""The kinds of commit, each a short variation of :class:`SnapshotProducer`.

* APPEND adds files; it never conflicts with anything.
* OVERWRITE replaces the files of its scope (the whole table, a partition, the partitions matching a predicate
  on partition columns, or the partitions written: :mod:`lakefmt.spec.scope`); a concurrent commit that changed
  the files it replaces makes it fail with :class:`CommitConflictError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.producer import SnapshotProducer
from lakefmt.errors import CommitConflictError, InvalidPartitionError
from lakefmt.meta import entries
from lakefmt.spec import CommitKind, ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.manifest import ColumnStats
from lakefmt.spec.scope import OverwriteScope

__all__ = ["AppendProducer", "OverwriteProducer"]


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
        if latest is None:
            return entries.empty_entries_for(schema)
        metas = [m for m in self.store.snapshot_manifests(latest) if _may_hold(m, self.scope.partition)]
        live = entries.live_entries(self.store, latest, metas) if metas else entries.empty_entries_for(schema)
        if self.scope.expression is None and self.scope.written is None:
            return live
        return live.take(self.scope.matching(live.column(entries.PARTITION)))

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> None:
        before = set(entries.paths(replaced))
        after = set(entries.paths(self.replaced(latest, schema)))
        if before != after:
            where = self.scope.describe() if self.scope is not None else "the table"
            raise CommitConflictError(
                f"a concurrent commit changed {where} while this overwrite was committing "
                f"({len(before - after)} file(s) it replaces were removed, {len(after - before)} file(s) were "
                "added); the overwrite did not land"
            )


def _inside(stats: ColumnStats, rows: int, value: Any) -> bool:
    """Whether every one of ``rows`` entries summarised by ``stats`` has partition value ``value``."""
    if value is None:
        return stats.null_count == rows
    return stats.min == value and stats.max == value and not stats.null_count


def _may_hold(meta: ManifestFileMeta, partition: Mapping[str, Any]) -> bool:
    """Whether a manifest may hold entries of ``partition`` (by its partition ranges)."""
    for key, value in partition.items():
        s = meta.partition_stats.get(key)
        if s is None or (value is not None and value != value):  # no stats, or NaN: cannot rule it out
            continue
        if value is None:
            if s.null_count == 0:
                return False
            continue
        try:
            if s.min is None or s.max is None or not (s.min <= value <= s.max):
                return False
        except TypeError:
            continue
    return True


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
