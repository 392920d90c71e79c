"""Planning a compaction (metadata only): per partition, the small files (under 3/4 of the target, as Iceberg's
``min-file-size-bytes``; larger ones are left alone), bin-packed in commit order into groups of at most the target.
A partition is compacted once it holds ``min_files`` small files (``compaction.min.file-num``, 5); a group of one
file is never rewritten.

Automatic compaction (table option ``compaction.auto``) plans *tiers* instead (``tiered=True``): from a partition's
newest small file backwards, an older file joins while it is no larger than the newer ones together, and the run
is merged once it holds ``min_files`` files; so each row is rewritten about log2(n) times as a stream adds n files,
not n times. A partition that reaches ``compaction.max.file-num`` small files is compacted whole.
"""

from __future__ import annotations

import operator
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidOptionError, InvalidPartitionError, SchemaMismatchError, UnsupportedTypeError
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target
from lakefmt.rewrite.compact_types import CompactionGroup, CompactionPlan, Partition, describe, partition_key
from lakefmt.spec import ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.scope import normalize_partition

__all__ = ["LARGE_ENOUGH", "check_sort_by", "live_after", "plan_compaction", "whole"]

#: a file at least this fraction of the target is large enough: never rewritten (Iceberg's min-file-size-bytes)
LARGE_ENOUGH = 0.75


# -- planning --------------------------------------------------------------------------------------------------
def _check_settings(
    schema: TableSchema, target_file_size: int | None, min_files: int | None, sort_by: Sequence[str] | None
) -> tuple[int, int, int, tuple[str, ...]]:
    options = schema.table_options
    target = options.target_file_size if target_file_size is None else whole(target_file_size)
    if target is None or target < 1:
        raise InvalidOptionError(f"target_file_size must be a positive number of bytes, got {target_file_size!r}")
    least = options.compaction_min_file_num if min_files is None else whole(min_files)
    if least is None or least < 1:
        raise InvalidOptionError(f"min_files must be a positive whole number, got {min_files!r}")
    columns = check_sort_by(schema, sort_by)
    return target, least, max(options.compaction_max_file_num, least), columns


def whole(value: object) -> int | None:
    """``value`` as an int if it is an integer of any kind (numpy's too), not a bool; else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def check_sort_by(schema: TableSchema, sort_by: Sequence[str] | str | None) -> tuple[str, ...]:
    if sort_by is None:
        return ()
    if isinstance(sort_by, str):
        sort_by = [sort_by]
    if not isinstance(sort_by, Sequence) or not all(isinstance(c, str) for c in sort_by):
        raise TypeError(f"sort_by must be a column name or a list of column names, got {sort_by!r}")
    names = schema.arrow_schema.names
    unknown = [c for c in sort_by if c not in names]
    if unknown:
        raise SchemaMismatchError(
            f"cannot sort by unknown column(s) {', '.join(map(repr, unknown))}; the table has {', '.join(names)}"
        )
    for c in sort_by:
        t = schema.arrow_schema.field(c).type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):
            raise UnsupportedTypeError(f"cannot sort by {c!r}: its type {t} has no order")
    if len(set(sort_by)) != len(sort_by):
        raise SchemaMismatchError(f"sort_by names a column twice: {list(sort_by)}")
    return tuple(sort_by)


def _selected(schema: TableSchema, partitions: Sequence[Mapping[str, Any]] | None) -> list[Partition] | None:
    if partitions is None:
        return None
    if not schema.partition_keys and any(partitions):
        raise InvalidPartitionError("the table is not partitioned: compact it without a partition")
    return [normalize_partition(p, schema) for p in partitions]


def _may_hold(meta: ManifestFileMeta, partition: Partition) -> bool:
    """Whether a manifest may hold entries of ``partition``, by its partition ranges (a cheap test per manifest:
    automatic compaction plans after every commit)."""
    for key, value in partition.items():
        s = meta.partition_stats.get(key)
        if s is None:
            continue
        if value is None:
            if s.null_count == 0:
                return False
            continue
        try:
            if s.min is None or s.max is None or not (s.min <= value <= s.max):
                return False
        except TypeError:  # values of another type than the stats: cannot rule it out
            continue
    return True


@dataclass
class _Live:
    """What automatic compaction knows of a snapshot: its live entries and, per partition, how many of them are
    small (under ``threshold`` bytes), kept up to date one commit's delta at a time."""

    snapshot_id: int
    entries: pa.Table
    threshold: int
    small: dict[tuple[tuple[str, Any], ...], int]


#: per metadata store (one per Table object): the last snapshot automatic compaction looked at
_LIVE: weakref.WeakKeyDictionary[MetaStore, _Live] = weakref.WeakKeyDictionary()


def _small_counts(entries: pa.Table, threshold: int) -> dict[tuple[tuple[str, Any], ...], int]:
    """Small files per partition among ``entries``."""
    small = entries.filter(pc.less(entries.column(ents.FILE_SIZE), threshold))
    out: dict[tuple[tuple[str, Any], ...], int] = {}
    if ents.PARTITION not in small.column_names:
        return {(): small.num_rows} if small.num_rows else {}
    for p in small.column(ents.PARTITION).to_pylist():
        k = partition_key(p)
        out[k] = out.get(k, 0) + 1
    return out


def live_after(store: MetaStore, snap: Snapshot, threshold: int) -> _Live:
    """What automatic compaction knows of ``snap``: the previous snapshot's (if this store looked at it) with
    ``snap``'s delta applied, else read whole."""
    hit = _LIVE.get(store)
    if hit is not None and hit.threshold == threshold and hit.snapshot_id == snap.id:
        return hit
    if hit is not None and hit.threshold == threshold and hit.snapshot_id == snap.id - 1:
        metas = store.manifest_list(snap.delta_manifest_list)
        live, small = hit.entries, dict(hit.small)
        if metas:
            delta = ents.concat_entries(ents.read_manifests(store, metas))
            dels, adds = ents.deletes(delta), ents.adds(delta)
            ents.check_data_paths(adds, f"a manifest of snapshot {snap.id}")
            if dels.num_rows:
                gone = dels.column(ents.PATH).combine_chunks()
                live = live.filter(pc.invert(pc.is_in(live.column(ents.PATH), value_set=gone)))
                for k, n in _small_counts(dels, threshold).items():
                    small[k] = small.get(k, 0) - n
            if adds.num_rows:
                live = ents.concat_entries([live, adds])
                for k, n in _small_counts(adds, threshold).items():
                    small[k] = small.get(k, 0) + n
            if live.column(ents.PATH).num_chunks > 64:
                live = live.combine_chunks()
        found = _Live(snap.id, live, threshold, small)
    else:
        live = ents.live_entries(store, snap)
        found = _Live(snap.id, live, threshold, _small_counts(live, threshold))
    _LIVE[store] = found
    return found


def _live_in_scope(
    table: RewriteTarget,
    snap: Snapshot,
    schema: TableSchema,
    wanted: list[Partition] | None,
    *,
    cached_threshold: int | None = None,
) -> pa.Table:
    store = table.store
    if cached_threshold is not None:
        return live_after(store, snap, cached_threshold).entries
    metas = store.snapshot_manifests(snap)
    if wanted is not None and schema.partition_keys:
        metas = [m for m in metas if any(_may_hold(m, w) for w in wanted)]
    return ents.live_entries(store, snap, metas) if metas else ents.empty_entries_for(schema)


def _matches(part: Partition, wanted: list[Partition] | None) -> bool:
    return wanted is None or any(all(part.get(k) == v for k, v in w.items()) for w in wanted)


def _next_fit(sizes: Sequence[int], target: int) -> list[list[int]]:
    """Indices of consecutive items packed into bins of at most ``target`` (an item alone may exceed it)."""
    bins: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        if current and total + size > target:
            bins.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        bins.append(current)
    return bins


def _tier(sizes: Sequence[int], min_files: int) -> int:
    """How many of the newest files (``sizes``: their row counts, oldest first) to merge: walking back from the
    newest, an older file joins while it holds no more rows than the newer ones together; 0 unless the run reaches
    ``min_files``. Rows, not bytes: a merged file's bytes are far fewer than its inputs' (one footer, better
    compression), which would let runs cascade at almost every commit, and partitions written alike would reach
    their thresholds at different commits (one compaction each instead of one for all)."""
    if not sizes:
        return 0
    total, n = sizes[-1], 1
    for size in reversed(sizes[:-1]):
        if size > total:
            break
        total += size
        n += 1
    return n if n >= min_files else 0


@dataclass(frozen=True)
class _Files:
    """One partition's live files as plain lists (planning runs after every commit with automatic compaction:
    it decides on these, and takes the entries of the files it picks only)."""

    rows: list[int]  #: indices into the live entries
    sizes: list[int]
    counts: list[int]  #: row counts
    order: list[tuple[int, str]]  #: (creation time, path): commit order


def _plan_partition(
    files: _Files, target: int, min_files: int, max_files: int, sort_by: tuple[str, ...], tiered: bool
) -> list[list[int]]:
    """The input groups of one partition's live files, as indices into the live entries."""
    small = [i for i, s in enumerate(files.sizes) if s < int(target * LARGE_ENOUGH)]
    if len(small) < max(min_files, 2):
        return []
    small.sort(key=lambda i: files.order[i])  # commit order: a run of newest files is a suffix
    if tiered and len(small) < max_files:
        n = _tier([files.counts[i] for i in small], min_files)
        if not n:
            return []
        small = small[len(small) - n :]
    if sort_by:
        return [[files.rows[i] for i in small]]
    bins = _next_fit([files.sizes[i] for i in small], target)
    return [[files.rows[small[j]] for j in b] for b in bins if len(b) > 1]


def plan_compaction(
    table: Targetable,
    partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    *,
    target_file_size: int | None = None,
    min_files: int | None = None,
    sort_by: Sequence[str] | str | None = None,
    tiered: bool = False,
    snapshot: Snapshot | None = None,
    strict: bool = True,
) -> CompactionPlan:
    """Plan a compaction of the latest snapshot (or ``snapshot``): reads metadata only, writes nothing.

    ``partition``: values of some or all partition keys (``{"dt": "2026-11-01"}``: every partition with that
    ``dt``), or a list of them; None plans every partition. A key that is not a partition key, or values that
    match no live file, are refused (:class:`InvalidPartitionError`). ``target_file_size`` (bytes) and
    ``min_files`` default to the table options ``target-file-size`` and ``compaction.min.file-num``; a value
    below 1 is :class:`InvalidOptionError`. ``sort_by``: columns to sort each partition's rows by
    (:class:`SchemaMismatchError` for an unknown one). ``tiered``: the automatic compaction's size tiers
    (see the module's docstring) instead of every small file. ``strict=False`` plans nothing, instead of
    refusing, for partitions that hold no live file (automatic compaction, and a re-plan after a race)."""
    table = as_target(table)
    schema = table.schema()
    target, least, most, columns = _check_settings(schema, target_file_size, min_files, sort_by)
    asked: list[Mapping[str, Any]] | None
    if partition is None:
        asked = None
    elif isinstance(partition, Mapping):
        if not partition:
            raise InvalidPartitionError("an empty partition names no partition; leave partition out for all")
        asked = [partition]
    else:
        # a string is a sequence too (of characters): name the mistake instead of failing on a character
        asked = list(partition) if not isinstance(partition, str | bytes) else [partition]
        if not all(isinstance(p, Mapping) for p in asked):
            raise InvalidPartitionError(
                f"partition must be a mapping of partition keys to values, such as {{'dt': '2026-01-01'}}, or a "
                f"list of them; got {partition!r}"
            )
    wanted = _selected(schema, asked)
    snap = snapshot if snapshot is not None else table.latest_snapshot()
    if snap is None:
        if wanted:
            raise InvalidPartitionError(f"the table has no partition {describe(wanted[0])}: it has no data yet")
        return CompactionPlan(None, target, columns, (), 0, 0, least, tiered)
    schema = table.store.schema_for(snap)
    small = int(target * LARGE_ENOUGH)
    live = _live_in_scope(table, snap, schema, wanted, cached_threshold=small if tiered else None)
    by_part = _by_partition(live, schema, wanted)
    if wanted:
        missing = [w for w in wanted if not any(_matches(p, [w]) for p, _ in by_part)]
        if missing and strict:
            found = _by_partition(_live_in_scope(table, snap, schema, None), schema, None)
            known = ", ".join(describe(p) for p, _ in found[:5]) + (", ..." if len(found) > 5 else "") or "none"
            raise InvalidPartitionError(
                f"the table has no live file in partition {describe(missing[0])} (partitions found: {known}); "
                "nothing was compacted"
            )
    groups = []
    for part, files in by_part:
        for g in _plan_partition(files, target, least, most, columns, tiered):
            groups.append(CompactionGroup(uuid.uuid4().hex, part, live.take(pa.array(g, pa.int64()))))
    count = sum(len(f.rows) for _, f in by_part)
    size = sum(sum(f.sizes) for _, f in by_part)
    return CompactionPlan(snap.id, target, columns, tuple(groups), count, size, least, tiered)


def _by_partition(
    live: pa.Table, schema: TableSchema, wanted: list[Partition] | None
) -> list[tuple[Partition, _Files]]:
    """The live files of the partitions ``wanted`` (None: all), partition by partition in a stable order."""
    if live.num_rows == 0:
        return []
    sizes = live.column(ents.FILE_SIZE).to_pylist()
    counts = live.column(ents.ROW_COUNT).to_pylist()
    order = list(zip(live.column("creation_time_ms").to_pylist(), ents.paths(live), strict=True))
    if schema.partition_keys and ents.PARTITION in live.column_names:
        parts = [dict(p or {}) for p in live.column(ents.PARTITION).to_pylist()]
    else:
        parts = [{} for _ in sizes]
    idx: dict[tuple[tuple[str, Any], ...], tuple[Partition, list[int]]] = {}
    for i, part in enumerate(parts):
        idx.setdefault(partition_key(part), (part, []))[1].append(i)
    out = []
    for part, rows in sorted(idx.values(), key=lambda pr: _order(pr[0])):
        if _matches(part, wanted):
            files = _Files(rows, [sizes[i] for i in rows], [counts[i] for i in rows], [order[i] for i in rows])
            out.append((part, files))
    return out


def _order(partition: Partition) -> tuple[tuple[str, bool, str], ...]:
    """A sort key for partitions (nulls last), so that plans and reports list them in a stable order."""
    return tuple((k, v is None, str(v)) for k, v in partition.items())
