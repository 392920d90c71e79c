"""Reading a scan from an engine: the Arrow PyCapsule stream (any engine), DuckDB, Polars and pandas.

Every form returns exactly the rows of :meth:`Scan.to_arrow` (the scan's filter applied to rows, its projection)
and reads only the files the scan planned. Where it can, an engine reads those files with its own Parquet
reader, which is as fast as the engine over the same files listed by hand:

* the files are on local disk, every one was written under the scan's schema (no mapping of older files), and
  the scan's filter holds for every row of every planned file (a partition filter, or a column filter that the
  files' statistics decide), so no row has to be dropped for it;

otherwise the rows come from lakefmt's own reader (a ``pyarrow.dataset`` carrying the filter for DuckDB, the
scan's record batches for Polars and for a filter on a floating-point column). Either way the engine's own
projection and predicate are pushed down: DuckDB pushes them into its Parquet reader or into the dataset;
Polars hands them to :func:`polars.io.plugins.register_io_source`, and a predicate on columns other than
floating-point ones also prunes the scan's files by partition values and column statistics before any is
opened.

Files with a deletion vector (a key table's replaced or deleted rows, :mod:`lakefmt.read.masks`) are never read
natively as they are: every form drops their deleted rows by physical row position, before any filter. DuckDB
still reads such files with its own Parquet reader when the conditions above hold, numbering each file's rows
(``file_row_number``, the position in the file whatever it skips) and leaving out the deleted positions by an
anti-join on (``file_index``, position); Polars reads them with its own reader too, which takes each file's
keep-mask and applies it as it reads, before its predicate, slices and row limit
(:mod:`lakefmt.read.polars_vectors`), or, with a Polars that cannot, reads each such file whole and drops its
deleted rows by a mask before its predicate and limit are applied to the frames; every other form reads the scan's
masked record batches (:meth:`Scan.to_batches`).

This module holds what every engine shares (the scan an engine reads, when files may be read natively, the
optional imports), the Arrow stream and pandas; DuckDB's handoff is :mod:`lakefmt.read.engine_duckdb`, Polars'
:mod:`lakefmt.read.engine_polars`. The engines are optional dependencies: a missing one raises
:class:`~lakefmt.errors.MissingDependencyError` naming the extra that installs it (``pip install 'lakefmt[duckdb]'``).
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import MissingDependencyError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.read.bounds import SchemaLookup, column_bounds
from lakefmt.read.masks import Vector, check_vectors
from lakefmt.read.plan import prune_entries
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import has_float


class Scan(Protocol):
    """What an engine reads of a scan (:class:`lakefmt.read.scan.Scan` is one; named here so that this module,
    which the scan calls, does not import it back)."""

    schema: TableSchema
    columns: list[str] | None
    filter: pc.Expression | None
    snapshot: Snapshot | None
    _io: FileIO  # where the deletion vectors of vectors() are read from

    @property
    def schema_lookup(self) -> SchemaLookup: ...
    @property
    def uri(self) -> str: ...
    @property
    def on_local_disk(self) -> bool: ...
    def entries(self) -> pa.Table: ...
    def to_batches(self) -> Iterator[pa.RecordBatch]: ...
    def to_arrow(self) -> pa.Table: ...
    def to_dataset(self) -> Any: ...
    def vectors(self) -> dict[str, Vector]: ...
    def feed_rows(self) -> pa.Table | None: ...
    def pushdown_safe(self) -> bool: ...
    def full_paths(self, paths: list[str]) -> list[str]: ...
    def check_present(self, full_paths: Sequence[str]) -> None: ...
    def _reading(self) -> contextlib.AbstractContextManager[None]: ...
    def narrowed(self, prune: pc.Expression | None = None, columns: Sequence[str] | None = None) -> Scan: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


__all__ = [
    "arrow_stream",
    "filter_decided",
    "local_paths",
    "may_hold_nan",
    "narrow",
    "native_paths",
    "output_schema",
    "require",
    "to_pandas",
]

#: characters DuckDB reads as a glob pattern in a path
_GLOB = re.compile(r"[*?\[\]{}]")


def require(module: str, extra: str, what: str) -> Any:
    """Import the optional dependency ``module`` for ``what``, or raise :class:`MissingDependencyError` naming
    the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{what} needs the optional dependency {module}, which cannot be imported ({exc}): "
            f"pip install 'lakefmt[{extra}]'"
        ) from exc


def output_schema(scan: Scan) -> pa.Schema:
    """The Arrow schema of the scan's rows: the table's columns, or the projection."""
    schema = scan.schema.arrow_schema
    if scan.columns is None:
        return schema
    return pa.schema([schema.field(c) for c in scan.columns])


def narrow(scan: Scan, prune: pc.Expression | None = None, columns: Sequence[str] | None = None) -> Scan:
    """:meth:`Scan.narrowed`: the scan's planned files pruned further by ``prune``, only ``columns`` read."""
    return scan.narrowed(prune, columns)


def filter_decided(scan: Scan) -> bool:
    """Whether the scan's filter holds (true, not null) for every row of every planned file, as the files'
    partition values and statistics prove: then a reader need not apply it. Never for a filter pyarrow's
    simplifier cannot judge exactly (a floating-point column, whose statistics leave NaN out, or a NaN
    literal)."""
    if scan.filter is None:
        return True
    if not scan.pushdown_safe():
        return False
    entries = scan.entries()
    undecided = prune_entries(entries, ~scan.filter, scan.schema, scan.schema_lookup)  # files where it may fail
    return bool(entries.num_rows == 0 or undecided.num_rows == 0)


def native_paths(scan: Scan, entries: pa.Table | None = None) -> list[str] | None:
    """The local paths of the files of ``entries`` (default: the scan's planned files) when an engine may read
    them with its own Parquet reader and return the scan's rows: local disk, every file written under the
    scan's schema, the scan's filter decided for every row (:func:`filter_decided`) and no file with a deletion
    vector; else None."""
    entries = scan.entries() if entries is None else entries
    vectors = scan.vectors()
    if vectors and any(p in vectors for p in ents.paths(entries)):
        return None
    return local_paths(scan, entries)


def local_paths(scan: Scan, entries: pa.Table) -> list[str] | None:
    """:func:`native_paths` with no regard to deletion vectors: the paths of the rows of ``entries`` as an engine
    reads them, before any mask."""
    if not scan.on_local_disk:
        return None
    if entries.num_rows and not bool(pc.all(pc.equal(entries.column("schema_id"), scan.schema.id)).as_py()):
        return None
    if not filter_decided(scan) or may_hold_nan(scan, entries):
        return None
    paths = scan.full_paths(ents.paths(entries))
    if any(_GLOB.search(p) for p in paths):
        return None
    scan.check_present(paths)  # the engine's reader would name only a path
    return paths


def may_hold_nan(scan: Scan, entries: pa.Table) -> bool:
    """Whether a file of ``entries`` may hold a NaN in a floating-point column. An engine's own Parquet reader
    skips row groups by their Parquet min/max, which leave NaN out, so it would lose the NaN rows of its own
    ``isnan(f)`` or (DuckDB orders NaN above every number) ``f > 3``. lakefmt's statistics know better: a float
    column holding NaN has no min/max. A float inside a struct or a list has no statistics at all."""
    for field in scan.schema.arrow_schema:
        if not has_float(field.type):
            continue
        bounds = column_bounds(entries, field.name, scan.schema, scan.schema_lookup)
        if not pa.types.is_floating(field.type) or bounds is None:
            return True
        lo, _, nulls = bounds
        all_null = pc.fill_null(pc.equal(nulls, entries.column(ents.ROW_COUNT).combine_chunks()), False)
        if pc.any(pc.and_(pc.is_null(lo), pc.invert(all_null))).as_py():
            return True
    return False


# -- the Arrow PyCapsule stream ----------------------------------------------------------------------------------
def arrow_stream(scan: Scan, requested_schema: object | None = None) -> object:
    """An ``ArrowArrayStream`` PyCapsule of the scan's rows (``__arrow_c_stream__``): filtered and projected as
    :meth:`Scan.to_arrow`, read lazily as the consumer pulls; the vectors checked first (a damaged one is lakefmt's
    error here, where once pulled it would cross the C interface as ``ArrowInvalid``, keeping only the message)."""
    schema = output_schema(scan)
    if scan.feed_rows() is None:  # (rows from the change feed are read already)
        with scan._reading():  # a vector file gone with an expired snapshot is named so
            check_vectors(scan._io, scan.vectors(), ents.paths(scan.entries()))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in scan.to_batches():
            yield batch if batch.schema.equals(schema) else batch.cast(schema)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    return reader.__arrow_c_stream__(requested_schema)


# -- pandas ------------------------------------------------------------------------------------------------------
def to_pandas(scan: Scan, **kwargs: Any) -> Any:
    """The scan's rows as a pandas ``DataFrame`` (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
    require("pandas", "pandas", "Scan.to_pandas()")
    return scan.to_arrow().to_pandas(**kwargs)
