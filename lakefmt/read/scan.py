"""Scans: the rows of a planned read (:mod:`lakefmt.read.scan_plan` plans which version and files it reads), as Arrow
tables, batches, a pyarrow dataset over exactly the planned files, or an engine's frame."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakefmt.errors import DeletionVectorsError, UnsupportedFilterError
from lakefmt.io.storage import explains_storage_errors
from lakefmt.meta import entries as ents
from lakefmt.meta.versions import snapshot_as_of
from lakefmt.read import engine_duckdb, engine_polars, engines
from lakefmt.read.evolve import dataset_for, read_evolved, runs
from lakefmt.read.files import read_entries, read_entries_parallel
from lakefmt.read.masks import deleted_count, mask_whole
from lakefmt.read.scan_plan import ScanPlan
from lakefmt.read.tasks import FileTask, ReadTask, split_scan_kwargs
from lakefmt.spec import TableSchema
from lakefmt.spec.filters import evaluating, referenced_columns
from lakefmt.spec.instants import parse_instant as parse_as_of
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = ["FileTask", "ReadTask", "Scan", "check_snapshot_id", "parse_as_of", "snapshot_as_of", "split_scan_kwargs"]


@explains_storage_errors
class Scan(ScanPlan):
    """A read of one snapshot (or of what a range of snapshots added), optionally filtered and projected.

    ``filter`` is a ``pyarrow.compute`` expression; it prunes manifests and files by partition values and
    column min/max, and is applied exactly to the rows read.

    No form of a scan returns a row its filter excludes: :meth:`to_arrow`, :meth:`to_batches`, :meth:`count`,
    the Arrow stream (``pyarrow.table(scan)``), :meth:`to_duckdb`, :meth:`to_polars`, :meth:`to_pandas` and
    :meth:`to_dataset` (a dataset that carries the filter, or an error for a filter it cannot carry) all apply
    it; only :meth:`files`, :meth:`entries` and :meth:`plan_tasks` list whole files, for an engine that applies
    the filter itself.
    """

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

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Record batches of the rows matching the filter, projected to the columns asked for."""
        with self._reading(), evaluating(self.filter, "scan filter"):
            yield from self._batches()

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

    # -- engines (lakefmt.read.engines, engine_duckdb, engine_polars) ----------------------------------
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream interface: ``pyarrow.table(scan)``, ``polars.DataFrame(scan)``,
        ``duckdb.sql("select * from scan")`` and any engine that speaks it read the rows of :meth:`to_arrow`,
        batch by batch."""
        return engines.arrow_stream(self, requested_schema)

    def to_duckdb(self, connection: Any = None, name: str | None = None) -> Any:
        """The scan as a DuckDB relation on ``connection`` (default: DuckDB's default connection, the one
        ``duckdb.sql`` uses), and with ``name`` also a temporary view of that name. Only the planned files are
        read; DuckDB pushes its projection and filters into the read. Needs ``lakefmt[duckdb]``."""
        return engine_duckdb.to_duckdb(self, connection, name)

    def to_polars(self) -> Any:
        """The scan as a Polars ``LazyFrame``: Polars pushes its projection, predicate (which also prunes the
        planned files) and row limit into the read. Needs ``lakefmt[polars]``."""
        return engine_polars.to_polars(self)

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
