"""The kinds of commit, each a short variation of :class:`SnapshotProducer`.

* APPEND adds files; it never conflicts with anything.
* OVERWRITE replaces the files of the whole table or of one partition; a concurrent commit that changed the
  files it replaces makes it fail with :class:`CommitConflictError`.
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

__all__ = ["AppendProducer", "OverwriteProducer"]


class AppendProducer(SnapshotProducer):
    """Adds the writers' files."""

    kind = CommitKind.APPEND


class OverwriteProducer(SnapshotProducer):
    """Replaces the whole table (``partition`` empty) or the live files of one partition."""

    kind = CommitKind.OVERWRITE

    def __init__(self, *args: Any, partition: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partition: dict[str, Any] = dict(partition)

    def check(self, latest: Snapshot | None, schema: TableSchema) -> None:
        self.partition = _normalize_partition(self.partition, schema)
        _check_inside(self.request.added, self.partition)

    def has_work(self) -> bool:
        return True  # even without new files it deletes what it replaces

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        if latest is None:
            return entries.empty_entries_for(schema)
        metas = [m for m in self.store.snapshot_manifests(latest) if _may_hold(m, self.partition)]
        live = entries.live_entries(self.store, latest, metas) if metas else entries.empty_entries_for(schema)
        return live.filter(_partition_mask(live, self.partition)) if self.partition else live

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> None:
        before = set(entries.paths(replaced))
        after = set(entries.paths(self.replaced(latest, schema)))
        if before != after:
            where = f"partition {self.partition}" if self.partition else "the table"
            raise CommitConflictError(
                f"a concurrent commit changed {where} while this overwrite was committing "
                f"({len(before - after)} file(s) it replaces were removed, {len(after - before)} file(s) were "
                "added); the overwrite did not land"
            )


def _normalize_partition(partition: Mapping[str, Any], schema: TableSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in partition.items():
        if key not in schema.partition_keys:
            raise InvalidPartitionError(
                f"{key!r} is not a partition key of this table "
                f"(partition keys: {list(schema.partition_keys) or 'none'})"
            )
        t = schema.arrow_schema.field(key).type
        if value is None:
            out[key] = None
            continue
        try:
            out[key] = pa.array([value]).cast(t)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidPartitionError(f"partition value {value!r} for {key!r} cannot be read as {t}: {exc}") from exc
    return out


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


def _check_inside(added: Sequence[ManifestFileMeta], partition: Mapping[str, Any]) -> None:
    for m in added:
        for key, value in partition.items():
            s = m.partition_stats.get(key)
            if s is not None and not _inside(s, m.num_entries, value):
                raise InvalidPartitionError(
                    f"the data to overwrite partition {dict(partition)} has rows with {key} outside it "
                    f"(from {s.min!r} to {s.max!r}); nothing was committed"
                )


def _partition_mask(live: pa.Table, partition: Mapping[str, Any]) -> pa.Array:
    part = live.column(entries.PARTITION).combine_chunks()
    mask = pa.array([True] * live.num_rows, pa.bool_())  # typed: an empty list would be null-typed
    for key, value in partition.items():
        col = part.field(key)
        m = pc.is_null(col) if value is None else pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False)
        mask = pc.and_(mask, m)
    return mask
