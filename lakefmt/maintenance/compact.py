"""Compaction: rewrite a partition's small data files into files of about ``target-file-size``, as one COMPACT
snapshot that changes no row (DELETE + ADD, every replaced file checked live; the commit-user map carried
forward exactly, so dedup is unchanged; readers of history and incremental reads skip it).

Three steps, so that an engine can run the middle one in its tasks:

1. :func:`plan_compaction` (driver, metadata only): per partition, the small files (under 3/4 of the target,
   as Iceberg's ``min-file-size-bytes``; larger ones are left alone), bin-packed in commit order into groups
   of at most the target (:class:`CompactionGroup`, picklable). A partition is compacted once it holds
   ``min_files`` small files (``compaction.min.file-num``, 5); a group of one file is never rewritten.
2. :func:`rewrite_group` (any process): reads a group's rows through :func:`lakefmt.read.files.read_inputs`
   (sorted by ``sort_by`` if given) and writes them with the table's :class:`~lakefmt.write.writer.TableWriter`;
   returns its :class:`CommitMessage` (writer id = the group's id).
3. :func:`commit_compaction` (driver): one COMPACT snapshot for every group rewritten. If a concurrent commit
   removed some input files (an overwrite, a delete, another compaction), the groups that lost them are
   dropped (their new files deleted), their partitions re-planned once against the new latest snapshot and
   rewritten, or given up with the reason in the report. A conflict never reaches the caller, and a writer
   racing a compaction never fails (appends are not among the replaced files; an overwrite re-plans).

Automatic compaction (table option ``compaction.auto``) plans *tiers* instead (:func:`plan_compaction` with
``tiered=True``): from a partition's newest small file backwards, an older file joins while it is no larger
than the newer ones together, and the run is merged once it holds ``min_files`` files; so each row is rewritten
about log2(n) times as a stream adds n files, not n times. A partition that reaches ``compaction.max.file-num``
small files is compacted whole.

With ``sort_by``, a partition's small files form one group (its rows sorted together, so min/max pruning gets
sharp across the new files; the group is held in memory while it is sorted), rolled into target-size files.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefmt.commit.kinds import CompactProducer
from lakefmt.commit.types import CommitOutcome, CommitRequest
from lakefmt.errors import (
    CommitError,
    CorruptMetadataError,
    InvalidOptionError,
    InvalidPartitionError,
    RewriteConflictError,
    SchemaConflictError,
    SchemaMismatchError,
    UnsupportedTypeError,
)
from lakefmt.maintenance.report import Progress
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_inputs
from lakefmt.spec import CommitKind, CommitMessage, ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.partition import describe_partition
from lakefmt.spec.scope import normalize_partition

if TYPE_CHECKING:  # annotations only: the table imports this module
    from lakefmt.table import Table

__all__ = [
    "CompactionGroup",
    "CompactionPlan",
    "CompactionReport",
    "GivenUp",
    "auto_compact",
    "auto_compact_after",
    "commit_compaction",
    "compact",
    "plan_compaction",
    "rewrite_group",
    "touched_partitions",
]

log = logging.getLogger("lakefmt.compact")

#: a file at least this fraction of the target is large enough: never rewritten (Iceberg's min-file-size-bytes)
LARGE_ENOUGH = 0.75
#: the snapshot property naming the operation (as delete and restore do)
OPERATION = "lakefmt.operation"

Partition = dict[str, Any]


def _key(partition: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((partition or {}).items(), key=lambda kv: kv[0]))


def _describe(partition: Mapping[str, Any]) -> str:
    """``dt=2026-11-01``, ``dt=__null__`` (as the folder and ``lakefmt compact --partition`` spell a null)."""
    return describe_partition(partition) if partition else "(unpartitioned)"


@dataclass(frozen=True)
class CompactionGroup:
    """Input files rewritten together into new files: all in one partition. Picklable (the entries are an
    Arrow table), so an engine ships it to the task that runs :func:`rewrite_group`."""

    group_id: str  #: also the writer id of its commit message, which is how a commit finds the group's files
    partition: Partition
    entries: pa.Table  #: ADD entries of the input files (manifest schema)

    @property
    def paths(self) -> list[str]:
        return ents.paths(self.entries)

    @property
    def num_files(self) -> int:
        return int(self.entries.num_rows)

    @property
    def num_bytes(self) -> int:
        return int(pc.sum(self.entries.column(ents.FILE_SIZE)).as_py() or 0)

    @property
    def num_rows(self) -> int:
        return int(pc.sum(self.entries.column(ents.ROW_COUNT)).as_py() or 0)


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction rewrites, planned on one snapshot: groups of input files, and the totals of the live
    files in the planned scope (the partitions asked for, or the whole table) before it."""

    snapshot_id: int | None
    target_file_size: int
    sort_by: tuple[str, ...]
    groups: tuple[CompactionGroup, ...]
    files_before: int
    bytes_before: int
    min_files: int = 5
    tiered: bool = False

    @property
    def partitions(self) -> list[Partition]:
        """The partitions the plan rewrites files of, each once, in plan order."""
        seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
        for g in self.groups:
            seen.setdefault(_key(g.partition), g.partition)
        return list(seen.values())

    @property
    def num_files(self) -> int:
        return sum(g.num_files for g in self.groups)

    @property
    def num_bytes(self) -> int:
        return sum(g.num_bytes for g in self.groups)


@dataclass(frozen=True)
class GivenUp:
    """A partition a compaction left as it was, and why (a concurrent commit removed its input files twice)."""

    partition: Partition
    reason: str


@dataclass
class CompactionReport:
    """What a compaction did (or, with ``dry_run``, would do). ``files_before``/``bytes_before``: the live files
    in the planned scope when it was planned; ``files_after``/``bytes_after``: the same, less the files rewritten
    plus the files written (commits that landed meanwhile not counted)."""

    dry_run: bool
    snapshot: Snapshot | None = None
    files_before: int = 0
    bytes_before: int = 0
    rewritten_files: int = 0
    rewritten_bytes: int = 0
    written_files: int = 0
    written_bytes: int = 0
    rows: int = 0
    partitions: list[Partition] = field(default_factory=list)  #: the partitions compacted
    given_up: list[GivenUp] = field(default_factory=list)
    replanned: list[Partition] = field(default_factory=list)  #: partitions re-planned after losing a race
    seconds: float = 0.0

    @property
    def files_after(self) -> int:
        return self.files_before - self.rewritten_files + self.written_files

    @property
    def bytes_after(self) -> int:
        return self.bytes_before - self.rewritten_bytes + self.written_bytes

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (``--json``)."""
        return {
            "operation": "compact",
            "dry_run": self.dry_run,
            "snapshot": self.snapshot.id if self.snapshot else None,
            "files_before": self.files_before,
            "bytes_before": self.bytes_before,
            "files_after": None if self.dry_run else self.files_after,
            "bytes_after": None if self.dry_run else self.bytes_after,
            "rewritten_files": self.rewritten_files,
            "rewritten_bytes": self.rewritten_bytes,
            "written_files": None if self.dry_run else self.written_files,
            "written_bytes": None if self.dry_run else self.written_bytes,
            "rows": self.rows,
            "partitions": self.partitions,
            "given_up": [{"partition": g.partition, "reason": g.reason} for g in self.given_up],
            "replanned": self.replanned,
            "seconds": round(self.seconds, 3),
        }


# -- planning --------------------------------------------------------------------------------------------------
def _check_settings(
    schema: TableSchema, target_file_size: int | None, min_files: int | None, sort_by: Sequence[str] | None
) -> tuple[int, int, int, tuple[str, ...]]:
    options = schema.table_options
    target = options.target_file_size if target_file_size is None else _whole(target_file_size)
    if target is None or target < 1:
        raise InvalidOptionError(f"target_file_size must be a positive number of bytes, got {target_file_size!r}")
    least = options.compaction_min_file_num if min_files is None else _whole(min_files)
    if least is None or least < 1:
        raise InvalidOptionError(f"min_files must be a positive whole number, got {min_files!r}")
    columns = _check_sort_by(schema, sort_by)
    return target, least, max(options.compaction_max_file_num, least), columns


def _whole(value: object) -> int | None:
    """``value`` as an int if it is an integer of any kind (numpy's too), not a bool; else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_sort_by(schema: TableSchema, sort_by: Sequence[str] | str | None) -> tuple[str, ...]:
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
        k = _key(p)
        out[k] = out.get(k, 0) + 1
    return out


def _live_after(store: MetaStore, snap: Snapshot, threshold: int) -> _Live:
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
    table: Table,
    snap: Snapshot,
    schema: TableSchema,
    wanted: list[Partition] | None,
    *,
    cached_threshold: int | None = None,
) -> pa.Table:
    store = table._store
    if cached_threshold is not None:
        return _live_after(store, snap, cached_threshold).entries
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
    table: Table,
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
    schema = table.table_schema()
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
            raise InvalidPartitionError(f"the table has no partition {_describe(wanted[0])}: it has no data yet")
        return CompactionPlan(None, target, columns, (), 0, 0, least, tiered)
    schema = table._store.schema_for(snap)
    small = int(target * LARGE_ENOUGH)
    live = _live_in_scope(table, snap, schema, wanted, cached_threshold=small if tiered else None)
    by_part = _by_partition(live, schema, wanted)
    if wanted:
        missing = [w for w in wanted if not any(_matches(p, [w]) for p, _ in by_part)]
        if missing and strict:
            found = _by_partition(_live_in_scope(table, snap, schema, None), schema, None)
            known = ", ".join(_describe(p) for p, _ in found[:5]) + (", ..." if len(found) > 5 else "") or "none"
            raise InvalidPartitionError(
                f"the table has no live file in partition {_describe(missing[0])} (partitions found: {known}); "
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
        idx.setdefault(_key(part), (part, []))[1].append(i)
    out = []
    for part, rows in sorted(idx.values(), key=lambda pr: _order(pr[0])):
        if _matches(part, wanted):
            files = _Files(rows, [sizes[i] for i in rows], [counts[i] for i in rows], [order[i] for i in rows])
            out.append((part, files))
    return out


def _order(partition: Partition) -> tuple[tuple[str, bool, str], ...]:
    """A sort key for partitions (nulls last), so that plans and reports list them in a stable order."""
    return tuple((k, v is None, str(v)) for k, v in partition.items())


def touched_partitions(table: Table, snap: Snapshot) -> list[Partition]:
    """The partitions of the files ``snap`` added (from its delta manifests)."""
    store = table._store
    metas = [m for m in store.manifest_list(snap.delta_manifest_list) if m.num_added_files]
    if not metas:
        return []
    added = ents.adds(ents.concat_entries(ents.read_manifests(store, metas)))
    if ents.PARTITION not in added.column_names:
        return [{}]
    seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for p in added.column(ents.PARTITION).to_pylist():
        seen.setdefault(_key(p), dict(p or {}))
    return list(seen.values())


# -- rewriting -------------------------------------------------------------------------------------------------
def rewrite_group(
    table: Table, group: CompactionGroup, sort_by: Sequence[str] | None = None, *, target_file_size: int | None = None
) -> CommitMessage:
    """Read a group's rows and write them as new files (nothing is committed): the task-side step, runnable in
    any process that can open the table. Returns the writer's message, whose ``writer_id`` is the group's id.
    On an error, the files written so far are deleted. :class:`RewriteConflictError` (``gone``: the files) if
    input files were removed by a concurrent commit and deleted by an expiration before they were read: the
    driver drops the group, as when it loses at commit (:func:`commit_compaction`'s ``gone``)."""
    schema = table.table_schema()
    columns = _check_sort_by(schema, sort_by)
    batches = _counted(table, group.entries, _read(table, group.entries, schema))
    newest = _newest(group.entries)
    if not columns:  # one output: the group is at most the target in input bytes
        with table.new_writer(
            writer_id=group.group_id, target_file_size=target_file_size, creation_time_ms=newest
        ) as writer:
            for chunk in _chunks(batches, schema.table_options.row_group_rows):
                writer.write(chunk)
            return writer.prepare_commit()
    # sorted: the whole group in order, cut into about input bytes / target slices of consecutive rows, one file
    # each (a writer rolls files only between row groups, which would make one file of a sorted table)
    rows = pa.Table.from_batches(list(batches), schema=schema.arrow_schema)
    rows = rows.sort_by([(c, "ascending") for c in columns])
    target = schema.table_options.target_file_size if target_file_size is None else target_file_size
    outputs = max(1, -(-group.num_bytes // target))
    step = max(1, -(-rows.num_rows // outputs))
    manifests: list[Any] = []
    written: list[CommitMessage] = []
    try:
        for start in range(0, max(rows.num_rows, 1), step):
            with table.new_writer(
                writer_id=group.group_id, target_file_size=target_file_size, creation_time_ms=newest
            ) as writer:
                writer.write(rows.slice(start, step))
                written.append(writer.prepare_commit())
            manifests.extend(written[-1].manifests)
    except BaseException:
        table.discard(written)  # nothing was committed
        raise
    return CommitMessage(group.group_id, tuple(manifests))


def _read(table: Table, entries: pa.Table, schema: TableSchema) -> Iterator[pa.RecordBatch]:
    return read_inputs(table.io, entries, schema, table._store, what="compaction")


def _newest(entries: pa.Table) -> int | None:
    """The newest creation time of the files of ``entries``: what a rewrite of them records as its files' (the
    age of their rows), so that tiers stay in commit order when appends land while a compaction runs."""
    newest = pc.max(entries.column("creation_time_ms")).as_py() if entries.num_rows else None
    return int(newest) if newest is not None else None


def _chunks(batches: Iterable[pa.RecordBatch], rows: int) -> Iterable[pa.Table]:
    """Batches gathered into tables of about ``rows`` rows (the writer's per-call work is per table)."""
    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        buf.append(b)
        n += b.num_rows
        if n >= rows:
            yield pa.Table.from_batches(buf)
            buf, n = [], 0
    if buf:
        yield pa.Table.from_batches(buf)


def _counted(table: Table, entries: pa.Table, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, the rows read from the files of ``entries``; once they are all read,
    :class:`CorruptMetadataError` if they are not as many as the entries say (a data file replaced behind the
    table's back): a COMPACT snapshot must not change what the metadata says the table holds. The writer that
    takes these rows deletes what it wrote on that error, so nothing lands."""
    n = 0
    for batch in batches:
        n += batch.num_rows
        yield batch
    want = int(pc.sum(entries.column(ents.ROW_COUNT)).as_py() or 0)
    if n != want:
        raise _row_count_error(table, entries, n, want)


def _row_count_error(table: Table, entries: pa.Table, read: int, want: int) -> CorruptMetadataError:
    """The error naming the file of ``entries`` whose Parquet footer disagrees with its entry's row count."""
    fs = table.io.arrow_filesystem()
    paths = ents.paths(entries)
    for path, count in zip(paths, entries.column(ents.ROW_COUNT).to_pylist(), strict=True):
        with contextlib.suppress(Exception):  # only to name the file: the totals already disagree
            with fs.open_input_file(table.io.full_path(path)) as f:
                held = pq.ParquetFile(f).metadata.num_rows
            if held != count:
                return CorruptMetadataError(
                    f"data file {path} holds {held} rows where its manifest entry says {count}; nothing was compacted"
                )
    named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return CorruptMetadataError(
        f"the data files {named} hold {read} rows where their manifest entries say {want}; nothing was compacted"
    )


# -- committing ------------------------------------------------------------------------------------------------
Rewriter = Callable[[Sequence[CompactionGroup]], Sequence[CommitMessage]]


def commit_compaction(
    table: Table,
    plan: CompactionPlan,
    messages: Sequence[CommitMessage],
    *,
    replan: bool = True,
    rewrite: Rewriter | None = None,
    after_commit: bool = True,
    gone: Collection[str] = (),
) -> CompactionReport:
    """Commit the rewritten groups of ``plan`` (``messages``: one per group, matched by writer id; a group
    without a message is left out) as one COMPACT snapshot.

    ``gone``: input files that rewriting found removed by a concurrent commit and deleted (the
    :class:`RewriteConflictError` of :func:`rewrite_group`); the groups holding them have no message and are
    re-planned (or given up) as groups that lose at commit are.

    If a concurrent commit removed input files of some groups, those groups are dropped and their written files
    deleted; with ``replan`` (default) their partitions are planned again on the latest snapshot, rewritten by
    ``rewrite`` (default: here, one group after another; an engine passes its own) and committed; a partition
    that loses again is given up (:attr:`CompactionReport.given_up`). A column dropped while the groups were
    rewritten (their files hold it) re-plans every group once under the new schema in the same way. A conflict
    never raises. Other failures do
    (:class:`CommitStateUnknownError`: nothing is deleted then). ``after_commit``: once the snapshot landed, run
    the table's after-commit work (snapshot expiration, when the table's options ask for it)."""
    owner = {g.group_id: g.group_id for g in plan.groups}
    return _commit(table, plan, messages, owner, replan, rewrite, after_commit, set(gone))


def _commit(
    table: Table,
    plan: CompactionPlan,
    messages: Sequence[CommitMessage],
    owner: dict[str, str],
    replan: bool,
    rewrite: Rewriter | None,
    after_commit: bool,
    unread: set[str] | None = None,
) -> CompactionReport:
    """:func:`commit_compaction`, where the files of a group are in the message of writer ``owner[group id]`` (one
    writer may have written several groups: then they land or are dropped together). ``unread``: input files
    found gone when rewriting (more are added as re-plans find them)."""
    started = time.monotonic()
    report = CompactionReport(dry_run=False, files_before=plan.files_before, bytes_before=plan.bytes_before)
    by_id = {m.writer_id: m for m in messages}
    unread = set() if unread is None else unread
    ready = [g for g in plan.groups if owner.get(g.group_id) in by_id]
    for g in plan.groups:
        if owner.get(g.group_id) not in by_id and not unread.intersection(g.paths):
            report.given_up.append(GivenUp(g.partition, "its files were not rewritten (no commit message)"))
    replanned: set[tuple[tuple[str, Any], ...]] = set()
    schema_replanned = False
    rewriter = rewrite if rewrite is not None else _local_rewriter(table, plan, unread)

    def plan_again(parts: list[Partition]) -> None:
        """Re-plan and rewrite ``parts``; the groups that got no message are given up."""
        fresh, dropped = _replan(table, plan, parts, rewriter, by_id, ready)
        owner.update((g.group_id, g.group_id) for g in fresh)
        ready.extend(fresh)
        for g in dropped:
            lost_files = sorted(unread.intersection(g.paths))
            why = (
                f"a concurrent commit removed {len(lost_files)} of its input files ({lost_files[0]})"
                if lost_files
                else "its files were not rewritten (no commit message)"
            )
            report.given_up.append(GivenUp(g.partition, why))

    def lose(lost: list[CompactionGroup], gone: set[str]) -> None:
        """Groups that lost input files to a concurrent commit: their partitions re-planned once, or given up."""
        parts = {_key(g.partition): g.partition for g in lost}
        again = {k: p for k, p in parts.items() if replan and k not in replanned}
        for k, p in parts.items():
            if k not in again:
                report.given_up.append(
                    GivenUp(p, f"a concurrent commit removed {len(gone)} of its input files ({sorted(gone)[0]})")
                )
        if again:
            replanned.update(again)
            report.replanned.extend(again.values())
            plan_again(list(again.values()))

    not_read = [g for g in plan.groups if owner.get(g.group_id) not in by_id and unread.intersection(g.paths)]
    if not_read:
        lose(not_read, unread.intersection(p for g in not_read for p in g.paths))
    while ready:
        writers = list(dict.fromkeys(owner[g.group_id] for g in ready))
        written = {w: _written(table, by_id[w]) for w in writers}  # (the commit drops the per-task manifests)
        planned_on = plan.snapshot_id if not replanned else None  # a re-plan read another snapshot
        try:
            snap = _commit_groups(table, ready, [by_id[w] for w in writers], after_commit, planned_on)
        except SchemaConflictError as exc:
            # a column of the rewritten files was dropped meanwhile: the written files are gone (the commit
            # discarded them); write every group again under the new schema, once
            parts = {_key(g.partition): g.partition for g in ready}
            ready = []
            for w in writers:
                by_id.pop(w, None)
            if not replan or schema_replanned:
                why = f"the table's schema changed meanwhile ({exc})"
                report.given_up.extend(GivenUp(p, why) for p in parts.values())
                continue
            schema_replanned = True
            report.replanned.extend(p for k, p in parts.items() if k not in replanned)
            replanned.update(parts)
            table._store.latest_schema(refresh=True)
            plan_again(list(parts.values()))
            continue
        except RewriteConflictError as exc:
            gone = set(exc.gone)
            lost_writers = {owner[g.group_id] for g in ready if gone.intersection(g.paths)}
            if not lost_writers:  # cannot happen (gone names files of ready groups); never loop on it
                raise
            lost = [g for g in ready if owner[g.group_id] in lost_writers]
            ready = [g for g in ready if owner[g.group_id] not in lost_writers]
            table.discard([by_id.pop(w) for w in lost_writers])  # known not to have landed
            lose(lost, gone)
            continue
        _fill(report, ready, written, snap)
        break
    report.seconds = time.monotonic() - started
    return report


def _local_rewriter(table: Table, plan: CompactionPlan, unread: set[str]) -> Rewriter:
    """Rewrites here, one group after another; a group whose input files are gone gets no message (its files go
    into ``unread``)."""

    def run(groups: Sequence[CompactionGroup]) -> list[CommitMessage]:
        out = []
        for g in groups:
            try:
                out.append(rewrite_group(table, g, plan.sort_by, target_file_size=plan.target_file_size))
            except RewriteConflictError as exc:
                unread.update(exc.gone)
        return out

    return run


def _replan(
    table: Table,
    plan: CompactionPlan,
    partitions: list[Partition],
    rewriter: Rewriter,
    by_id: dict[str, CommitMessage],
    ready: list[CompactionGroup],
) -> tuple[list[CompactionGroup], list[CompactionGroup]]:
    """Plan ``partitions`` again on the latest snapshot, leaving out files that groups still ``ready`` hold, and
    rewrite the groups: those rewritten (their messages in ``by_id``), and those the rewriter left out."""
    fresh = plan_compaction(
        table,
        partitions,
        target_file_size=plan.target_file_size,
        min_files=plan.min_files,
        sort_by=plan.sort_by or None,
        tiered=plan.tiered,
        strict=False,
    )
    held = {p for g in ready for p in g.paths}
    groups = [g for g in fresh.groups if not held.intersection(g.paths)]
    if not groups:
        return [], []
    for m in rewriter(groups):
        by_id[m.writer_id] = m
    return [g for g in groups if g.group_id in by_id], [g for g in groups if g.group_id not in by_id]


def _written(table: Table, message: CommitMessage) -> tuple[int, int]:
    """Files and bytes a message adds (read from its manifests, which the commit then reads from the cache)."""
    files = size = 0
    for meta in message.manifests:
        files += meta.num_added_files
        with contextlib.suppress(Exception):  # for the report only
            size += int(pc.sum(table._store.manifest(meta.file_name).column(ents.FILE_SIZE)).as_py() or 0)
    return files, size


def _commit_groups(
    table: Table,
    groups: Sequence[CompactionGroup],
    messages: Sequence[CommitMessage],
    after_commit: bool,
    planned_on: int | None,
) -> Snapshot:
    store = table._store
    added = [meta for m in messages for meta in m.manifests]
    rewritten = ents.concat_entries([g.entries for g in groups])
    request = CommitRequest(None, f"compact-{uuid.uuid4().hex}", 0, added, properties={OPERATION: "compact"})
    after = functools.partial(table._after_commit, compact=False) if after_commit else None
    clock = table._clock or time.time
    producer = CompactProducer(
        table.io, store, request, clock=clock, after_commit=after, rewritten=rewritten, planned_on=planned_on
    )
    try:
        result = producer.commit()
    except RewriteConflictError:
        raise  # the caller drops the groups that lost and deletes their files
    except BaseException:
        if not producer.in_doubt:  # known not to have landed: the written files are garbage
            table.discard(messages)
        raise
    if result.outcome is not CommitOutcome.COMMITTED or result.snapshot is None:  # pragma: no cover - has work
        raise CommitError(f"a compaction with {len(groups)} group(s) committed nothing ({result.outcome})")
    return result.snapshot


def _fill(
    report: CompactionReport,
    groups: Sequence[CompactionGroup],
    written: Mapping[str, tuple[int, int]],
    snap: Snapshot,
) -> None:
    report.snapshot = snap
    report.rewritten_files = sum(g.num_files for g in groups)
    report.rewritten_bytes = sum(g.num_bytes for g in groups)
    report.rows = sum(g.num_rows for g in groups)
    seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for g in groups:
        seen.setdefault(_key(g.partition), g.partition)
    report.partitions = list(seen.values())
    for files, size in written.values():  # per writer
        report.written_files += files
        report.written_bytes += size


# -- all three -------------------------------------------------------------------------------------------------
def compact(
    table: Table,
    partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    *,
    target_file_size: int | None = None,
    min_files: int | None = None,
    sort_by: Sequence[str] | str | None = None,
    dry_run: bool = False,
    parallelism: int | None = None,
    progress: Progress | None = None,
    tiered: bool = False,
) -> CompactionReport:
    """Plan, rewrite (``parallelism`` groups at a time in threads; pyarrow releases the GIL) and commit a
    compaction; see :meth:`lakefmt.Table.compact`."""
    started = time.monotonic()
    if parallelism is not None:  # refused whether or not there is work (checked before planning)
        threads = _whole(parallelism)
        if threads is None or threads < 1:
            raise InvalidOptionError(f"parallelism must be a positive whole number, got {parallelism!r}")
        parallelism = threads
    plan = plan_compaction(
        table, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by, tiered=tiered
    )
    if dry_run or not plan.groups:
        report = CompactionReport(
            dry_run=dry_run,
            files_before=plan.files_before,
            bytes_before=plan.bytes_before,
            rewritten_files=plan.num_files,
            rewritten_bytes=plan.num_bytes,
            rows=sum(g.num_rows for g in plan.groups),
            partitions=plan.partitions,
        )
        report.seconds = time.monotonic() - started
        return report
    report = _run(table, plan, parallelism, progress)
    report.seconds = time.monotonic() - started
    return report


def _run(
    table: Table, plan: CompactionPlan, parallelism: int | None, progress: Progress | None, after_commit: bool = True
) -> CompactionReport:
    """Rewrite every group of ``plan`` here (in threads with ``parallelism``), then commit."""
    total = len(plan.groups)
    done = 0
    if progress:
        progress(0, total, "rewriting")

    unread: set[str] = set()  # input files removed and deleted before they were read: their groups lost a race

    def one(group: CompactionGroup) -> CommitMessage | None:
        if unread.intersection(group.paths):
            return None
        try:
            return rewrite_group(table, group, plan.sort_by, target_file_size=plan.target_file_size)
        except RewriteConflictError as exc:
            unread.update(exc.gone)
            return None

    messages: list[CommitMessage] = []
    owner = {g.group_id: g.group_id for g in plan.groups}
    try:
        if (parallelism is None or parallelism <= 1) and not plan.sort_by and total > 1:
            # one writer for every group: one per-task manifest to write and merge instead of one per group
            unit = uuid.uuid4().hex
            try:
                messages.append(_rewrite_together(table, plan.groups, unit, plan.target_file_size, progress))
                owner = dict.fromkeys(owner, unit)
            except RewriteConflictError as exc:  # (its writer deleted what it wrote) each other group on its own
                unread.update(exc.gone)
                messages.extend(m for m in map(one, plan.groups) if m is not None)
        elif parallelism is None or parallelism <= 1 or total == 1:
            for g in plan.groups:
                if (m := one(g)) is not None:
                    messages.append(m)
                done += 1
                if progress:
                    progress(done, total, _describe(g.partition))
        else:
            with ThreadPoolExecutor(max_workers=min(parallelism, total), thread_name_prefix="lakefmt-compact") as pool:
                for g, m in zip(plan.groups, pool.map(one, plan.groups), strict=True):
                    if m is not None:
                        messages.append(m)
                    done += 1
                    if progress:
                        progress(done, total, _describe(g.partition))
    except BaseException:
        table.discard(messages)  # nothing was committed: the groups already written are garbage
        raise
    return _commit(table, plan, messages, owner, True, None, after_commit, unread)


def _rewrite_together(
    table: Table, groups: Sequence[CompactionGroup], writer_id: str, target: int, progress: Progress | None
) -> CommitMessage:
    """Several groups through one writer: it keeps a file per partition open and rolls it at ``target``, so each
    group's rows still land in files of their own partition, about the target in size."""
    schema = table.table_schema()
    newest = max((t for t in (_newest(g.entries) for g in groups) if t is not None), default=None)
    with table.new_writer(writer_id=writer_id, target_file_size=target, creation_time_ms=newest) as writer:
        for done, group in enumerate(groups, 1):
            rows = _counted(table, group.entries, _read(table, group.entries, schema))
            for chunk in _chunks(rows, schema.table_options.row_group_rows):
                writer.write(chunk)
            if progress:
                progress(done, len(groups), _describe(group.partition))
        return writer.prepare_commit()


def auto_compact(table: Table, snap: Snapshot) -> CompactionReport | None:
    """The automatic compaction after ``snap`` (a commit that landed): the partitions it touched, in size tiers.
    None when nothing qualified."""
    return _auto_compact(table, touched_partitions(table, snap), snap)


def auto_compact_after(table: Table, snaps: Sequence[Snapshot]) -> CompactionReport | None:
    """The automatic compaction after several commits that landed (``compaction.async``: a worker that fell
    behind takes them together): the partitions any of them touched, planned on the latest snapshot."""
    parts: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for snap in snaps:
        if snap.commit_kind is not CommitKind.COMPACT:
            for p in touched_partitions(table, snap):
                parts.setdefault(_key(p), p)
    latest = table.latest_snapshot() if parts else None
    return None if latest is None else _auto_compact(table, list(parts.values()), latest)


def _auto_compact(table: Table, parts: list[Partition], snap: Snapshot) -> CompactionReport | None:
    if not parts:
        return None
    options = table.table_schema().table_options
    counts = _live_after(table._store, snap, int(options.target_file_size * LARGE_ENOUGH)).small
    if all(counts.get(_key(p), 0) < options.compaction_min_file_num for p in parts):
        return None  # no touched partition holds enough small files: no plan needed
    plan = plan_compaction(table, parts if table.partition_keys else None, tiered=True, strict=False)
    if not plan.groups:
        return None
    report = _run(table, plan, None, None, after_commit=False)  # the data commit's own after-commit work follows
    if report.snapshot is not None:
        log.info(
            "compacted %d file(s) into %d in %d partition(s): snapshot %d",
            report.rewritten_files,
            report.written_files,
            len(report.partitions),
            report.snapshot.id,
        )
    return report
