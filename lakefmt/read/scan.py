"""Scans: which files a read covers (engine-neutral file tasks) and a pyarrow dataset over exactly them."""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from lakefmt.binpack import pack
from lakefmt.errors import (
    DeletionVectorsError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedFilterError,
)
from lakefmt.io import FileIO
from lakefmt.io.storage import explains_storage_errors
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import tagged_snapshot
from lakefmt.meta.versions import snapshot_as_of
from lakefmt.read import engines
from lakefmt.read.bounds import SchemaLookup
from lakefmt.read.evolve import dataset_for, read_evolved, runs
from lakefmt.read.expired import expired_reads
from lakefmt.read.files import read_entries, read_entries_parallel
from lakefmt.read.incremental import added_between
from lakefmt.read.masks import Vector, deleted_count, deleted_positions, load_vectors, mask_whole
from lakefmt.read.net import net_rows
from lakefmt.read.plan import live_entries, prune_entries
from lakefmt.read.tasks import FileTask, ReadTask, split_scan_kwargs
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import check_filter, evaluating, pushdown_safe, referenced_columns
from lakefmt.spec.instants import Instant
from lakefmt.spec.instants import parse_instant as parse_as_of
from lakefmt.spec.instants import to_millis as _to_millis
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = ["FileTask", "ReadTask", "Scan", "check_snapshot_id", "parse_as_of", "snapshot_as_of", "split_scan_kwargs"]


@explains_storage_errors
class Scan:
    """A read of one snapshot (or of what a range of snapshots added), optionally filtered and projected.

    ``filter`` is a ``pyarrow.compute`` expression; it prunes manifests and files by partition values and
    column min/max, and is applied exactly to the rows read.

    No form of a scan returns a row its filter excludes: :meth:`to_arrow`, :meth:`to_batches`, :meth:`count`,
    the Arrow stream (``pyarrow.table(scan)``), :meth:`to_duckdb`, :meth:`to_polars`, :meth:`to_pandas` and
    :meth:`to_dataset` (a dataset that carries the filter, or an error for a filter it cannot carry) all apply
    it; only :meth:`files`, :meth:`entries` and :meth:`plan_tasks` list whole files, for an engine that applies
    the filter itself.
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
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
        tag: str | None = None,
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

    def narrowed(self, prune: pc.Expression | None = None, columns: Sequence[str] | None = None) -> Scan:
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

    # -- reading ----------------------------------------------------------------------------------------
    def to_dataset(self) -> ds.Dataset:
        """A ``pyarrow.dataset`` over exactly the planned files that carries the scan's filter, so every read of
        it (``to_table``, ``to_batches``, ``count_rows``, DuckDB, Polars) returns only the rows the filter keeps.
        It has every column of the table (pass ``columns=`` to its reads to project).

        A filter on a floating-point column (or with a NaN literal) is refused with
        :class:`~lakefmt.errors.UnsupportedFilterError`: pyarrow's Parquet scan would drop NaN rows such a filter
        keeps (see :meth:`pushdown_safe`). Read such a scan with :meth:`to_arrow`, :meth:`to_batches`,
        ``pyarrow.table(scan)`` or an engine (:meth:`to_duckdb`, :meth:`to_polars`), which apply it exactly."""
        self._check_by_file("Scan.to_dataset()")
        if self.vectors():
            raise DeletionVectorsError(
                f"to_dataset() cannot apply the deletion vectors of {len(self.vectors())} planned file(s) of snapshot "
                f"{self.snapshot.id if self.snapshot else '-'} (rows deleted or replaced by key): a pyarrow dataset "
                "has no row mask. Read this scan with to_arrow(), to_batches(), pyarrow.table(scan), to_duckdb(), "
                "to_polars() or to_pandas(), which apply them"
            )
        self.check_present(self.full_paths(ents.paths(self.entries())))  # the dataset reads them later
        dataset = self._files_dataset()
        if self.filter is None:
            return dataset
        if not self.pushdown_safe():
            raise UnsupportedFilterError(
                f"to_dataset() cannot carry the filter {self.filter}: it reads a floating-point column or a NaN "
                "literal, and pyarrow's Parquet scan drops NaN rows such a filter keeps; read this scan with "
                "to_arrow(), to_batches(), pyarrow.table(scan), to_duckdb() or to_polars(), which apply it exactly"
            )
        return dataset.filter(self.filter)

    def _files_dataset(self) -> ds.Dataset:
        """A ``pyarrow.dataset`` over exactly the planned files, the filter not applied to rows (internal: every
        caller applies it). Files that need mapping by field id (:mod:`lakefmt.read.evolve`: written before a
        rename, say) cannot be part of a Parquet dataset: they are read here, mapped, and joined in memory."""
        if self._mapped():
            parts = [
                dataset_for(self._io, run, self.schema, self.full_paths(ents.paths(run)))
                if old is None
                else ds.InMemoryDataset(
                    self._read_mapped(old, run, columns=None, filter=None), schema=self.schema.arrow_schema
                )
                for old, run in self._layout_runs(grouped=True)
            ]
            return ds.dataset(parts)
        full = self.full_paths(ents.paths(self.entries()))
        return ds.FileSystemDataset.from_paths(
            full,
            schema=self.schema.arrow_schema,
            format=ds.ParquetFileFormat(),
            filesystem=self._io.arrow_filesystem(),
        )

    # -- files written under other schemas (lakefmt.read.evolve) -------------------------------------------
    def _layout_runs(self, grouped: bool = False) -> list[tuple[TableSchema | None, pa.Table]]:
        """The planned entries in consecutive runs: ``(None, run)`` read by name, ``(old, run)`` mapped by id;
        ``grouped``: one group per way of reading (larger reads, the files' order kept only within a group)."""
        if self._runs is None:
            self._runs = {}
        if grouped not in self._runs:
            self._runs[grouped] = runs(self.entries(), self.schema, self._store.schema, grouped=grouped)
        return self._runs[grouped]

    def _mapped(self) -> bool:
        """Whether some planned file was written under a schema it cannot be read by name with."""
        return any(old is not None for old, _ in self._layout_runs())

    def _read_mapped(
        self, old: TableSchema, run: pa.Table, *, columns: list[str] | None, filter: pc.Expression | None
    ) -> pa.Table:
        parts = list(
            read_evolved(
                self._io,
                run,
                old,
                self.schema,
                columns=columns,
                filter=filter,
                filter_columns=referenced_columns(filter, self.schema.arrow_schema),
                whole=True,
            )
        )
        names = self.schema.arrow_schema.names if columns is None else columns
        out_schema = pa.schema([self.schema.arrow_schema.field(c) for c in names])
        return pa.Table.from_batches([b for p in parts for b in p.to_batches()], schema=out_schema)

    def _mapped_batches(self, whole: bool = False) -> Iterator[pa.RecordBatch]:
        """The rows matching the filter, run by run: runs read by name as :meth:`to_batches` reads a plain scan,
        the others read with their own schema and mapped by id (the filter applied after mapping). ``whole``:
        the files are read in one group per way of reading, each as one table (pyarrow's threaded scan, for
        :meth:`to_arrow`)."""
        for old, run in self._layout_runs(grouped=whole):
            if old is None:
                dataset = dataset_for(self._io, run, self.schema, self.full_paths(ents.paths(run)))
                if self.pushdown_safe():
                    if whole:
                        yield from dataset.to_table(columns=self.columns, filter=self.filter).to_batches()
                    else:
                        yield from dataset.to_batches(columns=self.columns, filter=self.filter)
                    continue
                parts = (
                    [dataset.to_table(columns=self.columns_to_read())]
                    if whole
                    else (pa.Table.from_batches([b]) for b in dataset.to_batches(columns=self.columns_to_read()))
                )
                for part in parts:
                    kept = part.filter(self.filter)
                    yield from (kept if self.columns is None else kept.select(self.columns)).to_batches()
                continue
            wanted = self.columns_to_read() if self.columns is not None else None
            for table in read_evolved(
                self._io,
                run,
                old,
                self.schema,
                columns=wanted,
                filter=self.filter,
                filter_columns=referenced_columns(self.filter, self.schema.arrow_schema),
                whole=whole,
            ):
                yield from (table if self.columns is None else table.select(self.columns)).to_batches()

    def pushdown_safe(self) -> bool:
        """Whether pyarrow may evaluate the filter inside its Parquet scan. It prunes row groups by their
        Parquet min/max, which leave NaN out, so a row group holding NaN and -inf claims ``f == -inf`` and
        drops the NaN rows of ``is_nan(f)``, ``f != -inf`` or ``~(f < 0)``; and it orders a NaN literal above
        every number (``~(x < nan)`` drops everything). Filters that may touch a floating-point column or a NaN
        literal are therefore applied to the rows after reading instead."""
        return pushdown_safe(self.filter, self.schema.arrow_schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Record batches of the rows matching the filter, projected to the columns asked for."""
        with self._reading(), evaluating(self.filter, "scan filter"):
            yield from self._batches()

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

    def _masked(self, columns: list[str] | None, filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
        """The planned files' rows with the deletion vectors applied (:func:`lakefmt.read.files.read_entries`)."""
        return read_entries(
            self._io,
            self.entries(),
            self.schema,
            columns=columns,
            filter=filter,
            schemas=self._store.schema,
            vectors=self.vectors(),
        )

    def _batches(self) -> Iterator[pa.RecordBatch]:
        net = self.feed_rows()
        if net is not None:
            yield from net.to_batches()
            return
        if self.vectors():
            yield from self._masked(self.columns, self.filter)
            return
        if self._mapped():
            yield from self._mapped_batches()
            return
        if self.pushdown_safe():
            yield from self._files_dataset().to_batches(columns=self.columns, filter=self.filter)
            return
        for batch in self._files_dataset().to_batches(columns=self.columns_to_read()):
            kept = pa.Table.from_batches([batch]).filter(self.filter)
            yield from (kept if self.columns is None else kept.select(self.columns)).to_batches()

    def columns_to_read(self) -> list[str] | None:
        """The projection plus the columns the filter needs (None: all columns)."""
        if self.columns is None:
            return None
        extra = referenced_columns(self.filter, self.schema.arrow_schema)
        return list(dict.fromkeys([*self.columns, *extra]))

    def to_arrow(self) -> pa.Table:
        """The rows matching the filter as one Arrow table."""
        with self._reading(), evaluating(self.filter, "scan filter"):
            return self._table()

    def _table(self) -> pa.Table:
        net = self.feed_rows()
        if net is not None:
            return net
        names = self.schema.arrow_schema.names if self.columns is None else self.columns
        if self.vectors():
            if not self._mapped():
                return self._masked_whole()
            out = pa.schema([self.schema.arrow_schema.field(c) for c in names])
            return pa.Table.from_batches(list(self._masked_parallel()), schema=out)
        if self._mapped():
            out = pa.schema([self.schema.arrow_schema.field(c) for c in names])
            return pa.Table.from_batches(list(self._mapped_batches(whole=True)), schema=out)
        if self.pushdown_safe():
            return self._files_dataset().to_table(columns=self.columns, filter=self.filter)
        kept = self._files_dataset().to_table(columns=self.columns_to_read()).filter(self.filter)
        return kept if self.columns is None else kept.select(self.columns)

    # -- engines (lakefmt.read.engines) ------------------------------------------------------------------
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream interface: ``pyarrow.table(scan)``, ``polars.DataFrame(scan)``,
        ``duckdb.sql("select * from scan")`` and any engine that speaks it read the rows of :meth:`to_arrow`,
        batch by batch."""
        return engines.arrow_stream(self, requested_schema)

    def to_duckdb(self, connection: Any = None, name: str | None = None) -> Any:
        """The scan as a DuckDB relation on ``connection`` (default: DuckDB's default connection, the one
        ``duckdb.sql`` uses), and with ``name`` also a temporary view of that name. Only the planned files are
        read; DuckDB pushes its projection and filters into the read. Needs ``lakefmt[duckdb]``."""
        return engines.to_duckdb(self, connection, name)

    def to_polars(self) -> Any:
        """The scan as a Polars ``LazyFrame``: Polars pushes its projection, predicate (which also prunes the
        planned files) and row limit into the read. Needs ``lakefmt[polars]``."""
        return engines.to_polars(self)

    def to_pandas(self, **kwargs: Any) -> Any:
        """The rows of :meth:`to_arrow` as a pandas ``DataFrame`` (``kwargs`` go to
        ``pyarrow.Table.to_pandas``). Needs ``lakefmt[pandas]``."""
        return engines.to_pandas(self, **kwargs)

    def _masked_whole(self) -> pa.Table:
        """:meth:`to_arrow` of files all read by name: pyarrow's threaded scan of every planned file (in file
        order, the filter not pushed down), masked at each file's offset (:func:`lakefmt.read.masks.mask_whole`),
        then filtered and projected."""
        entries = self.entries()
        table = self._files_dataset().to_table(columns=self.columns_to_read())
        what = f"the planned data files of snapshot {self.snapshot.id if self.snapshot else '-'}"
        kept = mask_whole(self._io, table, entries, self.vectors(), what)
        if self.filter is not None:
            kept = kept.filter(self.filter)
        return kept if self.columns is None else kept.select(self.columns)

    def _masked_parallel(self) -> Iterator[pa.RecordBatch]:
        """:meth:`_masked`, files read by a few threads at once (in order): what :meth:`to_arrow` reads."""
        return read_entries_parallel(
            self._io,
            self.entries(),
            self.schema,
            columns=self.columns,
            filter=self.filter,
            schemas=self._store.schema,
            vectors=self.vectors(),
        )

    def count(self) -> int:
        """Number of matching rows (from metadata alone when there is no filter)."""
        with self._reading():
            net = self.feed_rows()
            if net is not None:
                return int(net.num_rows)
            if self.filter is None:
                rows = int(pc.sum(self.entries().column("row_count")).as_py() or 0)
                vectors = self.vectors()
                if not vectors:
                    return rows
                entries = self.entries()
                counts = entries.column("row_count").to_pylist()
                return rows - deleted_count(self._io, vectors, ents.paths(entries), counts)
            with evaluating(self.filter, "scan filter"):
                return self._count()

    def _count(self) -> int:
        if not self.pushdown_safe() or self._mapped() or self.vectors():
            return sum(b.num_rows for b in self.to_batches())
        return int(self._files_dataset().count_rows(filter=self.filter))
