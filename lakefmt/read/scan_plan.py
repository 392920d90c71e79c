"""Which version a scan reads (a snapshot by id, time or tag, or what a range of snapshots added), with which
schema, and which files of it: the engine-neutral plan that :class:`lakefmt.read.scan.Scan` reads rows from."""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import time
from collections.abc import Sequence
from typing import Self

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from lakefmt.binpack import pack
from lakefmt.errors import DeletionVectorsError, InvalidOptionError, SchemaMismatchError
from lakefmt.io import FileIO
from lakefmt.io.storage import explains_storage_errors
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import tagged_snapshot
from lakefmt.meta.versions import snapshot_as_of
from lakefmt.read.bounds import SchemaLookup
from lakefmt.read.expired import expired_reads
from lakefmt.read.incremental import added_between
from lakefmt.read.masks import Vector, deleted_positions, load_vectors
from lakefmt.read.net import net_rows
from lakefmt.read.plan import live_entries, prune_entries
from lakefmt.read.tasks import FileTask, ReadTask
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import check_filter, pushdown_safe, referenced_columns
from lakefmt.spec.instants import Instant
from lakefmt.spec.instants import to_millis as _to_millis
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = ["ScanPlan"]


@explains_storage_errors
class ScanPlan:
    """The plan of a :class:`~lakefmt.read.scan.Scan`: the snapshot it reads and its schema (the options checked
    before any metadata is read), the manifest entries and deletion vectors of the files it covers after pruning,
    and the file tasks an engine reads; the filter and projection it reads them with.
    """

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        *,
        filter: str | pc.Expression | None = None,
        columns: Sequence[str] | None = None,
        snapshot_id: int | None = None,
        as_of: Instant | None = None,
        tag: str | None = None,
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
    ) -> None:
        if snapshot_id is not None and as_of is not None:
            raise InvalidOptionError("pass snapshot_id or as_of, not both")
        if tag is not None and (snapshot_id, as_of, from_snapshot, to_snapshot) != (None, None, None, None):
            raise InvalidOptionError("pass tag alone: it names the snapshot to read")
        if from_snapshot is not None and (snapshot_id is not None or as_of is not None):
            raise InvalidOptionError("an incremental scan (from_snapshot/to_snapshot) takes no snapshot_id or as_of")
        # checked before any metadata is read: snapshot -1 is not "expired", it never can exist
        if snapshot_id is not None:
            snapshot_id = check_snapshot_id(snapshot_id, "snapshot_id")
        if from_snapshot is not None:
            from_snapshot = check_snapshot_id(from_snapshot, "from_snapshot", minimum=0)
        if to_snapshot is not None:
            to_snapshot = check_snapshot_id(to_snapshot, "to_snapshot")
        as_of_millis = None if as_of is None else _to_millis(as_of)
        self._io = io
        self._store = store
        self._tagged = False
        self.filter: pc.Expression | None = None
        self.columns = list(columns) if columns is not None else None
        self._incremental = from_snapshot is not None or to_snapshot is not None
        if self._incremental:
            self.snapshot = self._resolve_range(from_snapshot, to_snapshot)
        elif tag is not None:  # the tag's copy of its snapshot: it reads after the snapshot file expired
            self._tagged = True
            self.snapshot = tagged_snapshot(store.io, tag, int(time.time() * 1000)).snapshot
        elif snapshot_id is not None:
            self.snapshot = store.snapshot(snapshot_id)
        elif as_of_millis is not None:
            self.snapshot = snapshot_as_of(store, as_of_millis)
        else:
            self.snapshot = store.latest_snapshot()
        # a read of the latest snapshot uses the current schema; time travel uses the schema its snapshot was
        # committed under (files written under other schemas are mapped to it by field id: lakefmt.read.evolve)
        pinned = (snapshot_id, as_of, tag, to_snapshot) != (None, None, None, None)
        self.schema: TableSchema = (
            store.schema(self.snapshot.schema_id) if pinned and self.snapshot else store.schema_for(self.snapshot)
        )
        if filter is not None:  # a column it names that the schema lacks, or a type error, before anything is read
            self.filter = check_filter(filter, self.schema.arrow_schema, "scan filter")
        self._runs: dict[bool, list[tuple[TableSchema | None, pa.Table]]] | None = None
        if self.columns is not None:
            unknown = [c for c in self.columns if c not in self.schema.arrow_schema.names]
            if unknown:
                raise SchemaMismatchError(
                    f"unknown column(s) {', '.join(unknown)}; the table has {', '.join(self.schema.arrow_schema.names)}"
                )
        self._entries: pa.Table | None = None
        self._vectors: dict[str, Vector] | None = None
        self._vector_entries: pa.Table | None = None
        self._net = False  # read from the change feed (:meth:`_net_rows`)
        self._net_table: pa.Table | None = None

    def _resolve_range(self, start: int | None, end: int | None) -> Snapshot | None:
        end_snap = self._store.snapshot(end) if end is not None else self._store.latest_snapshot()
        if end_snap is None:
            self._from = 0
            return None
        self._from = start if start is not None else 0
        if self._from > end_snap.id:
            raise ValueError(f"from_snapshot {self._from} is after to_snapshot {end_snap.id}")
        return end_snap

    # -- planning ---------------------------------------------------------------------------------------
    def entries(self) -> pa.Table:
        """The manifest entries (ADD) of the files this scan reads, after pruning."""
        if self._entries is None:
            if self.snapshot is None:
                entries = ents.empty_entries_for(self.schema)
                self._vector_entries = entries
            elif self._incremental:
                mixed: list[bool] = []
                entries = added_between(self._store, self._from, self.snapshot, self.schema, mixed)
                # rows the range added and the end of the range still holds: its snapshot's vectors apply
                if ents.CONTENT in entries.column_names:
                    self._net = bool(mixed)  # unless a compaction mixed in-range files with older ones
                    live = live_entries(self._store, self.snapshot, self.schema, self.filter)
                    self._vector_entries = ents.vector_files(live)
                entries = ents.data_files(entries)
            else:
                entries = live_entries(self._store, self.snapshot, self.schema, self.filter)
                self._vector_entries = ents.vector_files(entries)
                entries = ents.data_files(entries)
            self._entries = prune_entries(entries, self.filter, self.schema, self._store.schema)
        return self._entries

    def vectors(self) -> dict[str, Vector]:
        """The deletion vectors of the planned files that have one, by data-file path (empty for a table without
        deletion vectors). Every read of the scan applies them; an engine reading :meth:`files` itself must too
        (:attr:`FileTask.deletion_vector`)."""
        if self._vectors is None:
            entries = self.entries()
            dv = self._vector_entries
            self._vectors = {} if dv is None or dv.num_rows == 0 else load_vectors(self._io, dv, data=entries)
        return self._vectors

    def deleted_positions(self, file: FileTask) -> pa.Array:
        """The row positions (int64, 0-based in the file's row order, sorted) that ``file``'s deletion vector
        deletes; empty for a file without one. For an engine that reads :meth:`files` with its own Parquet reader
        and drops these rows by position (Spark's ``_metadata.row_index``: :mod:`pyspark_lakefmt.native`)."""
        if file.deletion_vector is None:
            return pa.array([], pa.int64())
        return pa.array(deleted_positions(self._io, file.deletion_vector, file.row_count), pa.int64())

    def feed_rows(self) -> pa.Table | None:
        """For an incremental scan that cannot be read file by file (a table with deletion vectors, and a compaction
        in the range that merged files the range added with older ones): its rows, from the change feed
        (:mod:`lakefmt.read.net`), filtered and projected; None for every other scan."""
        self.entries()
        if not self._net or self.snapshot is None:
            return None
        if self._net_table is None:
            rows = net_rows(self._io, self._store, self._from, self.snapshot.id, self.schema)
            if self.filter is not None:
                rows = rows.filter(self.filter)
            self._net_table = rows if self.columns is None else rows.select(self.columns)
        return self._net_table

    def _check_by_file(self, what: str) -> None:
        if self.feed_rows() is not None:
            raise DeletionVectorsError(
                f"{what}: snapshots {self._from + 1}..{self.snapshot.id if self.snapshot else '-'} cannot be read "
                "file by file: a compaction in the range merged files the range added with older ones, and on a "
                "table with deletion vectors their rows are read from the change feed instead; use to_arrow(), "
                "to_batches(), to_pandas() or count() (or a range that ends before the compaction)"
            )

    def files(self) -> list[FileTask]:
        """The data files this scan reads. An incremental scan read from the change feed (a compaction in its range
        mixed its files with older ones, on a table with deletion vectors) has none to give:
        :class:`~lakefmt.errors.DeletionVectorsError` says so."""
        self._check_by_file("Scan.files()")
        e = self.entries()
        paths = ents.paths(e)
        full = self.full_paths(paths)
        sizes = e.column(ents.FILE_SIZE).to_pylist()
        rows = e.column(ents.ROW_COUNT).to_pylist()
        if ents.PARTITION in e.column_names:
            parts = [part or {} for part in e.column(ents.PARTITION).to_pylist()]  # fresh dicts, one per file
        else:
            parts = [{} for _ in paths]
        sids = e.column(ents.SCHEMA_ID).to_pylist() if ents.SCHEMA_ID in e.column_names else [None] * len(paths)
        vectors = self.vectors()
        dvs = [vectors.get(p) for p in paths]
        return [FileTask(*t) for t in zip(paths, full, sizes, rows, parts, sids, dvs, strict=True)]

    def plan_tasks(self, split_size: int) -> list[ReadTask]:
        """The files of :meth:`files`, in order, packed into read tasks of about ``split_size`` bytes each: a task
        takes consecutive files until they reach ``split_size`` (so a file larger than that is a task of its
        own, and the last task may be smaller). No files, no tasks."""
        if isinstance(split_size, bool) or not isinstance(split_size, int) or split_size < 1:
            raise ValueError(f"split_size must be a positive number of bytes, got {split_size!r}")
        return [ReadTask(tuple(group)) for group in pack(self.files(), lambda f: f.file_size, split_size)]

    def full_paths(self, paths: list[str]) -> list[str]:
        """Filesystem paths of the planned files, joined to the root at once (a per-path ``FileIO.full_path``
        costs more than the rest of planning at 100,000 files). Every path was checked, vectorised, when the
        entries were read (:func:`lakefmt.meta.entries.check_data_paths`)."""
        if not paths:
            return []
        first = self._io.full_path(paths[0])
        prefix = first[: len(first) - len(paths[0])]
        if prefix + paths[0] != first:  # a FileIO that does more than prefix the root
            return [self._io.full_path(p) for p in paths]
        return [prefix + p for p in paths]

    @property
    def schema_lookup(self) -> SchemaLookup:
        """The schemas of the table by id (for files written under another schema than the scan's)."""
        return self._store.schema

    @property
    def uri(self) -> str:
        """The table's location."""
        return self._io.uri

    @property
    def on_local_disk(self) -> bool:
        """Whether the table's files are on local disk (an engine may open them by path)."""
        return isinstance(self._io.arrow_filesystem(), pafs.LocalFileSystem)

    def narrowed(self, prune: pc.Expression | None = None, columns: Sequence[str] | None = None) -> Self:
        """This scan (same snapshot, same row filter) with its planned files pruned further by ``prune`` (only
        files whose partition values and statistics allow a row where it holds are kept; it is not applied to
        rows) and only ``columns`` read."""
        self.entries()  # planned first: the copy shares the plan's deletion-vector entries
        out = copy.copy(self)
        if prune is not None:
            out._entries = prune_entries(self.entries(), prune, self.schema, self._store.schema)
        if columns is not None:
            unknown = [c for c in columns if c not in self.schema.arrow_schema.names]
            if unknown:
                raise SchemaMismatchError(f"unknown column(s) {', '.join(unknown)}")
            out.columns = list(columns)
        return out

    def pushdown_safe(self) -> bool:
        """Whether pyarrow may evaluate the filter inside its Parquet scan. It prunes row groups by their
        Parquet min/max, which leave NaN out, so a row group holding NaN and -inf claims ``f == -inf`` and
        drops the NaN rows of ``is_nan(f)``, ``f != -inf`` or ``~(f < 0)``; and it orders a NaN literal above
        every number (``~(x < nan)`` drops everything). Filters that may touch a floating-point column or a NaN
        literal are therefore applied to the rows after reading instead."""
        return pushdown_safe(self.filter, self.schema.arrow_schema)

    def _reading(self) -> contextlib.AbstractContextManager[None]:
        """Within the block (where the planned files are read), a file missing because the scan's snapshot (for an
        incremental scan, the first of its range) expired after it was planned is :class:`SnapshotNotFoundError`
        naming that snapshot. A tag's snapshot is the tag's copy: the tag keeps its files."""
        if self.snapshot is None or self._tagged:
            return contextlib.nullcontext()
        first = self._from + 1 if self._incremental else self.snapshot.id
        return expired_reads(self._store, min(first, self.snapshot.id), "this scan")

    def check_present(self, full_paths: Sequence[str]) -> None:
        """Before an engine opens planned files by path on local disk (DuckDB's or Polars' own reader, a pyarrow
        dataset), where its own error would name only a path: a file gone because the scan's snapshot expired
        since it was planned is :class:`SnapshotNotFoundError` naming the snapshot (:meth:`_reading`), any other
        missing file :class:`FileNotFoundError`. Nothing is checked off local disk (a request per file)."""
        if not self.on_local_disk:
            return
        with self._reading():
            for path in full_paths:
                if not os.path.exists(path):
                    raise FileNotFoundError(errno.ENOENT, "a planned file is missing", path)

    def columns_to_read(self) -> list[str] | None:
        """The projection plus the columns the filter needs (None: all columns)."""
        if self.columns is None:
            return None
        extra = referenced_columns(self.filter, self.schema.arrow_schema)
        return list(dict.fromkeys([*self.columns, *extra]))
