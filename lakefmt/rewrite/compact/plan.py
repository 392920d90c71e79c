"""Planning a compaction (metadata only): per partition, the small files (under 3/4 of the target, as Iceberg's
``min-file-size-bytes``; larger ones are left alone), bin-packed in commit order into groups of at most the target.
A partition is compacted once it holds ``min_files`` small files (``compaction.min.file-num``, 5); a group of one
file is never rewritten.

Automatic compaction (table option ``compaction.auto``) plans *tiers* instead (``tiered=True``): from a partition's
newest small file backwards, an older file joins while it is no larger than the newer ones together, and the run
is merged once it holds ``min_files`` files; so each row is rewritten about log2(n) times as a stream adds n files,
not n times. A partition that reaches ``compaction.max.file-num`` small files is compacted whole.

Format version 3 (:mod:`lakefmt.rewrite.compact.buckets`): a group never mixes partitions and buckets, and the
deletion-vector files are never input files (their vectors mask the inputs' rows when read). A key table is
compacted bucket by bucket (Paimon's ``num-sorted-run.compaction-trigger``); a file whose vector deletes a large
share of its rows is worth rewriting on any version-3 table, however large, and even alone.
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
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.masks import load_vectors
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target
from lakefmt.rewrite.compact.buckets import LARGE_ENOUGH, Files, plan_bucket, plan_partition
from lakefmt.rewrite.compact.types import CompactionGroup, CompactionPlan, Partition, describe, partition_key
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.manifest import FileContent
from lakefmt.spec.scope import normalize_partition

__all__ = ["LARGE_ENOUGH", "check_sort_by", "live_after", "plan_compaction", "whole"]



# -- planning --------------------------------------------------------------------------------------------------
def _check_settings(
    schema: TableSchema, target_file_size: int | None, min_files: int | None, sort_by: Sequence[str] | None,
    tiered: bool,
) -> tuple[int, int, int, tuple[str, ...]]:
    options = schema.table_options
    target = options.target_file_size if target_file_size is None else whole(target_file_size)
    if target is None or target < 1:
        raise InvalidOptionError(f"target_file_size must be a positive number of bytes, got {target_file_size!r}")
    if schema.has_primary_key:  # asked for: a full compaction (every bucket whole); automatic: at the trigger
        default = options.sorted_run_compaction_trigger if tiered else 1
    else:
        default = options.compaction_min_file_num
    least = default if min_files is None else whole(min_files)
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


Counts = dict[tuple[tuple[str, Any], ...], int]


@dataclass
class _Live:
    """What automatic compaction knows of a snapshot: its live entries and, per partition, how many of them are
    small data files (under ``threshold`` bytes), how many are data files, and how many deletion-vector files,
    kept up to date one commit's delta at a time."""

    snapshot_id: int
    entries: pa.Table
    threshold: int
    small: Counts
    files: Counts
    vectors: Counts


#: per metadata store (one per Table object): the last snapshot automatic compaction looked at
_LIVE: weakref.WeakKeyDictionary[MetaStore, _Live] = weakref.WeakKeyDictionary()


def _per_partition(entries: pa.Table) -> Counts:
    """Entries per partition."""
    out: Counts = {}
    if ents.PARTITION not in entries.column_names:
        return {(): entries.num_rows} if entries.num_rows else {}
    for p in entries.column(ents.PARTITION).to_pylist():
        k = partition_key(p)
        out[k] = out.get(k, 0) + 1
    return out


def _counts(entries: pa.Table, threshold: int) -> tuple[Counts, Counts, Counts]:
    """Small data files, data files and deletion-vector files per partition among ``entries``."""
    data = ents.data_files(entries)
    small = data.filter(pc.less(data.column(ents.FILE_SIZE), threshold))
    vectors = ents.vector_files(entries)
    return _per_partition(small), _per_partition(data), _per_partition(vectors)


def _add_counts(into: tuple[Counts, ...], delta: tuple[Counts, ...], sign: int) -> None:
    for counts, change in zip(into, delta, strict=True):
        for k, n in change.items():
            counts[k] = counts.get(k, 0) + sign * n


def live_after(store: MetaStore, snap: Snapshot, threshold: int) -> _Live:
    """What automatic compaction knows of ``snap``: the previous snapshot's (if this store looked at it) with
    ``snap``'s delta applied, else read whole."""
    hit = _LIVE.get(store)
    if hit is not None and hit.threshold == threshold and hit.snapshot_id == snap.id:
        return hit
    if hit is not None and hit.threshold == threshold and hit.snapshot_id == snap.id - 1:
        metas = store.manifest_list(snap.delta_manifest_list)
        live = hit.entries
        counts = (dict(hit.small), dict(hit.files), dict(hit.vectors))
        if metas:
            delta = ents.concat_entries(ents.read_manifests(store, metas))
            dels, adds = ents.deletes(delta), ents.adds(delta)
            ents.check_data_paths(adds, f"a manifest of snapshot {snap.id}")
            if dels.num_rows:
                gone = dels.column(ents.PATH).combine_chunks()
                live = live.filter(pc.invert(pc.is_in(live.column(ents.PATH), value_set=gone)))
                _add_counts(counts, _counts(dels, threshold), -1)
            if adds.num_rows:
                live = ents.concat_entries([live, adds])
                _add_counts(counts, _counts(adds, threshold), 1)
            if live.column(ents.PATH).num_chunks > 64:
                live = live.combine_chunks()
        found = _Live(snap.id, live, threshold, *counts)
    else:
        live = ents.live_entries(store, snap)
        found = _Live(snap.id, live, threshold, *_counts(live, threshold))
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
        metas = [m for m in metas if any(m.may_hold(w) for w in wanted)]
    return ents.live_entries(store, snap, metas) if metas else ents.empty_entries_for(schema)


def _matches(part: Partition, wanted: list[Partition] | None) -> bool:
    return wanted is None or any(all(part.get(k) == v for k, v in w.items()) for w in wanted)


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
    below 1 is :class:`InvalidOptionError`. On a key table ``min_files`` counts a bucket's data files and
    defaults to 1, a full compaction (every bucket with more than one file or a deleted row is merged whole), or
    with ``tiered`` to ``num-sorted-run.compaction-trigger``. ``sort_by``: columns to sort each partition's rows by
    (:class:`SchemaMismatchError` for an unknown one). ``tiered``: the automatic compaction's size tiers
    (see the module's docstring) instead of every small file. ``strict=False`` plans nothing, instead of
    refusing, for partitions that hold no live file (automatic compaction, and a re-plan after a race)."""
    table = as_target(table)
    schema = table.schema()
    target, least, most, columns = _check_settings(schema, target_file_size, min_files, sort_by, tiered)
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
    by_part = _by_partition(live, schema, wanted, table.io)
    if wanted:
        missing = [w for w in wanted if not any(_matches(b.partition, [w]) for b in by_part)]
        if missing and strict:
            found = _partitions(_by_partition(_live_in_scope(table, snap, schema, None), schema, None))
            known = ", ".join(describe(p) for p in found[:5]) + (", ..." if len(found) > 5 else "") or "none"
            raise InvalidPartitionError(
                f"the table has no live file in partition {describe(missing[0])} (partitions found: {known}); "
                "nothing was compacted"
            )
    groups = []
    for b in by_part:
        if schema.has_primary_key:
            share = schema.table_options.bucket_delete_ratio_threshold
            picked = plan_bucket(b.files, least, most, tiered, share)
        else:
            picked = plan_partition(b.files, target, least, most, columns, tiered)
        vectors = live.take(pa.array(b.vectors, pa.int64())) if b.vectors else None
        dropped = dict(zip(b.files.rows, b.files.deleted, strict=True))
        for g in picked:
            deleted = sum(dropped[i] for i in g)
            entries = live.take(pa.array(g, pa.int64()))
            groups.append(CompactionGroup(uuid.uuid4().hex, b.partition, entries, vectors, deleted))
    count = sum(len(b.files.rows) for b in by_part)
    size = sum(sum(b.files.sizes) for b in by_part)
    return CompactionPlan(snap.id, target, columns, tuple(groups), count, size, least, tiered)


@dataclass(frozen=True)
class _Bucket:
    """The live files of one partition (and bucket, on a version-3 table): its data files, and the indices of its
    deletion-vector files' entries."""

    partition: Partition
    bucket: int
    files: Files
    vectors: list[int]


def _partitions(buckets: Sequence[_Bucket]) -> list[Partition]:
    seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for b in buckets:
        seen.setdefault(partition_key(b.partition), b.partition)
    return list(seen.values())


def _by_partition(
    live: pa.Table, schema: TableSchema, wanted: list[Partition] | None, io: FileIO | None = None
) -> list[_Bucket]:
    """The live files of the partitions ``wanted`` (None: all), partition by partition (and bucket by bucket) in a
    stable order. With ``io``, the deletion vectors of those partitions are read (their footers: how many rows each
    data file has deleted)."""
    if live.num_rows == 0:
        return []
    sizes = live.column(ents.FILE_SIZE).to_pylist()
    counts = live.column(ents.ROW_COUNT).to_pylist()
    paths = ents.paths(live)
    order = list(zip(live.column("creation_time_ms").to_pylist(), paths, strict=True))
    n = len(sizes)
    if schema.partition_keys and ents.PARTITION in live.column_names:
        parts = [dict(p or {}) for p in live.column(ents.PARTITION).to_pylist()]
    else:
        parts = [{} for _ in sizes]
    buckets = live.column(ents.BUCKET).to_pylist() if ents.BUCKET in live.column_names else [0] * n
    if ents.CONTENT in live.column_names:
        is_dv = [c == int(FileContent.DELETION_VECTORS) for c in live.column(ents.CONTENT).to_pylist()]
    else:
        is_dv = [False] * n
    idx: dict[tuple[tuple[tuple[str, Any], ...], int], tuple[Partition, int, list[int], list[int]]] = {}
    for i, part in enumerate(parts):
        _, _, data, dvs = idx.setdefault((partition_key(part), buckets[i] or 0), (part, buckets[i] or 0, [], []))
        (dvs if is_dv[i] else data).append(i)
    chosen = sorted(
        (v for v in idx.values() if _matches(v[0], wanted) and v[2]), key=lambda v: (_order(v[0]), v[1])
    )
    deleted: dict[str, int] = {}
    dv_rows = [i for v in chosen for i in v[3]]
    if io is not None and dv_rows:
        deleted = {p: v.cardinality for p, v in load_vectors(io, live.take(pa.array(dv_rows, pa.int64()))).items()}
    out = []
    for part, bucket, rows, dvs in chosen:
        files = Files(
            rows,
            [sizes[i] for i in rows],
            [counts[i] for i in rows],
            [order[i] for i in rows],
            [deleted.get(paths[i], 0) for i in rows],
        )
        out.append(_Bucket(part, bucket, files, dvs))
    return out


def _order(partition: Partition) -> tuple[tuple[str, bool, str], ...]:
    """A sort key for partitions (nulls last), so that plans and reports list them in a stable order."""
    return tuple((k, v is None, str(v)) for k, v in partition.items())
