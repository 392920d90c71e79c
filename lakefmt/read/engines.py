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

The engines are optional dependencies: a missing one raises :class:`~lakefmt.errors.MissingDependencyError`
naming the extra that installs it (``pip install 'lakefmt[duckdb]'``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError, MissingDependencyError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.read import polars_vectors
from lakefmt.read.bounds import SchemaLookup, column_bounds
from lakefmt.read.masks import Vector, check_vectors, deleted_positions
from lakefmt.read.plan import prune_entries
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import has_float, has_nan_literal


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


__all__ = ["arrow_stream", "narrow", "native_paths", "output_schema", "require", "to_duckdb", "to_pandas", "to_polars"]

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


def _filter_decided(scan: Scan) -> bool:
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
    scan's schema, the scan's filter decided for every row (:func:`_filter_decided`) and no file with a deletion
    vector; else None."""
    entries = scan.entries() if entries is None else entries
    vectors = scan.vectors()
    if vectors and any(p in vectors for p in ents.paths(entries)):
        return None
    return _local_paths(scan, entries)


def _local_paths(scan: Scan, entries: pa.Table) -> list[str] | None:
    """:func:`native_paths` with no regard to deletion vectors: the paths of the rows of ``entries`` as an engine
    reads them, before any mask."""
    if not scan.on_local_disk:
        return None
    if entries.num_rows and not bool(pc.all(pc.equal(entries.column("schema_id"), scan.schema.id)).as_py()):
        return None
    if not _filter_decided(scan) or _may_hold_nan(scan, entries):
        return None
    paths = scan.full_paths(ents.paths(entries))
    if any(_GLOB.search(p) for p in paths):
        return None
    scan.check_present(paths)  # the engine's reader would name only a path
    return paths


def _may_hold_nan(scan: Scan, entries: pa.Table) -> bool:
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


# -- DuckDB ------------------------------------------------------------------------------------------------------
def to_duckdb(scan: Scan, connection: Any = None, name: str | None = None) -> Any:
    """The scan as a DuckDB relation on ``connection`` (default: DuckDB's default connection, the one
    ``duckdb.sql`` uses); with ``name``, also a temporary view of that name. DuckDB pushes its projection and
    filters into the read."""
    duckdb = require("duckdb", "duckdb", "Scan.to_duckdb()")
    con = connection if connection is not None else duckdb.default_connection()
    vectors = scan.vectors()
    by_feed = scan.feed_rows() is not None  # rows from the change feed: no file to hand DuckDB
    paths = None if by_feed else _local_paths(scan, scan.entries())
    relation = None
    if paths is not None:
        columns = scan.columns
        if vectors:  # DuckDB's reader, the deleted positions anti-joined (None: a column name clashes)
            with scan._reading():  # the vectors read now: a file gone with an expired snapshot is named so
                relation = _duckdb_masked(con, scan, paths, vectors)
            columns = scan.schema.arrow_schema.names if columns is None else columns
        elif paths:
            relation = con.read_parquet(paths, hive_partitioning=False, union_by_name=False)
        else:
            relation = con.from_arrow(scan.schema.arrow_schema.empty_table())
        if relation is not None and columns is not None:
            relation = relation.select(*_columns(duckdb, columns))
    if relation is None:
        if by_feed or vectors or not scan.pushdown_safe() or _may_hold_nan(scan, scan.entries()):
            # lakefmt's reader masks and filters; DuckDB reads the stream (asked for again at every execution)
            relation = con.from_arrow(scan)
        else:  # the dataset carries the filter; DuckDB pushes its own into pyarrow's Parquet scan (never over NaN)
            relation = con.from_arrow(scan.to_dataset())
            if scan.columns is not None:
                relation = relation.select(*_columns(duckdb, scan.columns))
    if name is not None:
        relation.create_view(name, replace=True)
    return relation


def _columns(duckdb: Any, names: Sequence[str]) -> list[Any]:
    """DuckDB expressions of the columns ``names``, each a quoted identifier (``duckdb.ColumnExpression("*")`` is
    every column, not the column named ``*``)."""
    return [duckdb.SQLExpression('"' + name.replace('"', '""') + '"') for name in names]


#: the column DuckDB's Parquet reader numbers a file's rows in (physical positions, whatever it skips)
_ROW = "file_row_number"
#: files of fewer rows than this are anti-joined on one 64-bit key (file index and position in 32 bits each)
_ONE_KEY_ROWS = 1 << 32


def _duckdb_masked(con: Any, scan: Scan, paths: list[str], vectors: dict[str, Vector]) -> Any:
    """DuckDB's own Parquet reader over ``paths`` (the scan's planned files, in order) that leaves out the rows the
    deletion vectors delete: every file's rows numbered by position in the file and anti-joined with the deleted
    (file, position) pairs, so DuckDB's filters and row-group skipping never shift a position. A file is named by
    its index in ``paths`` (DuckDB's ``file_index``: an integer, where a file name would hash a string per row),
    and the pair is one 64-bit join key, ``index << 32 | position``, when every file holds fewer than 2**32 rows
    (two keys otherwise). Every column of the table, and the ones it adds; None when a column of the table takes
    the name of one of DuckDB's."""
    names = scan.schema.arrow_schema.names
    folded = {n.lower() for n in names}  # DuckDB's identifiers ignore case: File_Index is file_index to it
    key_col = "__lakefmt_file"
    while key_col in folded:
        key_col += "_"
    if _ROW in folded or "file_index" in folded:  # DuckDB's virtual columns: a table's own would shadow them
        return None
    entries = scan.entries()
    counts = entries.column(ents.ROW_COUNT).to_pylist()
    one_key = max(counts, default=0) < _ONE_KEY_ROWS
    files, positions = [], []
    for i, (rel, full, count) in enumerate(zip(ents.paths(entries), paths, counts, strict=True)):
        if (vector := vectors.get(rel)) is None:
            continue  # a position is checked below the file's rows by its entry and footer (one key: not the next's)
        deleted = deleted_positions(scan._io, vector, polars_vectors.footer_rows(full, rel, count))
        files.append(np.full(len(deleted), i, dtype=np.uint64))
        positions.append(deleted)
    file_of = np.concatenate(files) if files else np.zeros(0, np.uint64)
    position = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    listed = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    read = f"read_parquet([{listed}], file_row_number=true, hive_partitioning=false, union_by_name=false)"
    if one_key:
        marks = pa.table({key_col: pa.array((file_of << np.uint64(32)) | position.astype(np.uint64), pa.uint64())})
        rows = con.sql(f'SELECT *, (file_index::UBIGINT << 32) | {_ROW}::UBIGINT AS "{key_col}" FROM {read}')
        on = f'rows."{key_col}" = marks."{key_col}"'
    else:
        marks = pa.table({key_col: pa.array(file_of, pa.uint64()), _ROW: pa.array(position, pa.int64())})
        rows = con.sql(f'SELECT *, file_index AS "{key_col}" FROM {read}')
        on = f'rows."{key_col}" = marks."{key_col}" AND rows.{_ROW} = marks.{_ROW}'
    return rows.set_alias("rows").join(con.from_arrow(marks).set_alias("marks"), on, how="anti")


# -- Polars ------------------------------------------------------------------------------------------------------
def _conjuncts(node: ast.expr) -> list[ast.expr]:
    """The top-level ``a & b & ...`` terms of a parsed expression."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        return [*_conjuncts(node.left), *_conjuncts(node.right)]
    return [node]


def _prunable(node: ast.expr, schema: pa.Schema) -> bool:
    """Whether a term of a translated Polars predicate may prune files: it names columns of the table, none of
    them floating-point (statistics leave NaN out, and Polars orders NaN above every number), and holds no
    boolean constant (Polars' own caution: one may stand for an expression that is null for null rows)."""
    names = []
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        first = call.args[0] if call.args else None
        if call.func.attr == "scalar" and isinstance(first, ast.Constant) and isinstance(first.value, bool):
            return False
        if call.func.attr == "field":
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                return False
            names.append(first.value)
    return bool(names) and all(n in schema.names and not has_float(schema.field(n).type) for n in names)


def _arrow_predicate(pl: Any, predicate: Any, scan: Scan) -> pc.Expression | None:
    """The terms of a Polars predicate (``a & b & ...``) that translate to pyarrow expressions able to prune the
    scan's files, and-ed (None when there is none). Used only to choose files, never to filter rows: Polars
    applies its own predicate to the rows, with its own semantics."""
    schema = scan.schema.arrow_schema
    try:
        # the text Polars itself builds (and evaluates) to push a predicate into a pyarrow dataset
        text = predicate._pyexpr.to_pyarrow_predicate(pl.DataFrame(schema.empty_table()).schema)
        terms = [t for t in _conjuncts(ast.parse(text, mode="eval").body) if _prunable(t, schema)] if text else []
        exprs = [eval(compile(ast.Expression(t), "<polars predicate>", "eval"), {"pa": pa}) for t in terms]
    except Exception:  # an expression Polars cannot translate: no file pruning, the rows are still filtered
        return None
    exprs = [e for e in exprs if isinstance(e, pc.Expression) and not has_nan_literal(e)]
    return functools.reduce(lambda a, b: a & b, exprs) if exprs else None


def _polars_frames(
    pl: Any,
    scan: Scan,
    with_columns: list[str] | None,
    predicate: Any,
    n_rows: int | None,
    batch_size: int | None,
) -> Iterator[Any]:
    """The frames of the IO source: the scan narrowed by what Polars pushed down, read natively or by lakefmt. A
    file gone because the scan's snapshot expired since it was planned (a deletion-vector file, which Polars'
    callback reads) is :class:`~lakefmt.errors.SnapshotNotFoundError` naming the snapshot."""
    with scan._reading():
        yield from _polars_read(pl, scan, with_columns, predicate, n_rows)


def _polars_read(
    pl: Any, scan: Scan, with_columns: list[str] | None, predicate: Any, n_rows: int | None
) -> Iterator[Any]:
    """:func:`_polars_frames`, outside the scan's reading context."""
    names = output_schema(scan).names
    columns = list(with_columns) if with_columns is not None else names
    needed = list(columns)
    if predicate is not None:
        needed = list(dict.fromkeys([*needed, *predicate.meta.root_names()]))
    prune = _arrow_predicate(pl, predicate, scan) if predicate is not None else None
    narrowed = narrow(scan, prune, columns=needed or names[:1])  # no column asked (a count): read one
    entries = narrowed.entries()
    paths = native_paths(scan, entries)
    if paths is None and scan.vectors():
        local = _local_paths(scan, entries)
        if local is not None:  # Polars' reader, each file's deleted positions left out before anything else
            read = narrowed.columns or names[:1]
            if polars_vectors.reader_masks(pl):  # as it reads
                counts = entries.column(ents.ROW_COUNT).to_pylist()
                lazy = polars_vectors.masked_scan(pl, scan._io, ents.paths(entries), local, counts, scan.vectors())
                yield from _polars_native(lazy.select(read), predicate, columns, n_rows)
            else:  # after the read
                yield from _polars_masked(pl, scan, entries, local, read, columns, predicate, n_rows)
            return
    if paths is not None:
        if paths:
            lazy = pl.scan_parquet(paths, hive_partitioning=False, glob=False).select(narrowed.columns)
            yield from _polars_native(lazy, predicate, columns, n_rows)
        return
    yield from _limited((pl.from_arrow(batch) for batch in narrowed.to_batches()), predicate, columns, n_rows)


def _polars_native(lazy: Any, predicate: Any, columns: list[str], n_rows: int | None) -> Iterator[Any]:
    """The frames of a scan by Polars' own reader: filtered by ``predicate``, projected to ``columns``, cut at
    ``n_rows``, all pushed into the reader; Polars sizes the chunks."""
    if predicate is not None:
        lazy = lazy.filter(predicate)
    lazy = lazy.select(columns)
    if n_rows is not None:
        lazy = lazy.head(n_rows)
    yield from lazy.collect_batches()


def _limited(frames: Iterator[Any], predicate: Any, columns: list[str], n_rows: int | None) -> Iterator[Any]:
    """``frames`` (Polars frames of masked rows) filtered by ``predicate``, projected to ``columns`` and cut at
    ``n_rows`` in all: the predicate and the limit applied after masking, never below it."""
    remaining = n_rows
    for frame in frames:
        if predicate is not None:
            frame = frame.filter(predicate)
        frame = frame.select(columns)
        if remaining is not None:
            frame = frame.head(remaining)
            remaining -= frame.height
        if frame.height:
            yield frame
        if remaining == 0:
            return


#: files a masked Polars read collects at once (enough for Polars' threads, few enough to bound the memory)
_POLARS_GROUP_FILES = 16
_POLARS_GROUP_ROWS = 4 << 20


def _polars_masked(
    pl: Any,
    scan: Scan,
    entries: pa.Table,
    paths: list[str],
    read: list[str],
    columns: list[str],
    predicate: Any,
    n_rows: int | None,
) -> Iterator[Any]:
    """The frames of files some of which have a deletion vector, read by Polars' own Parquet reader: each file with a
    vector read whole (only the columns ``read``, nothing pushed into the reader) and its deleted positions left out
    by a boolean mask over its rows, once it is read; a run of files without one read as it is. The predicate and
    the row limit are applied to the masked frames. Files are collected in groups (Polars reads a group's files in
    parallel)."""
    vectors = scan.vectors()
    counts = entries.column(ents.ROW_COUNT).to_pylist()

    def frames(group: list[tuple[str, str, int]]) -> Iterator[Any]:
        lazies: list[Any] = []
        masks: list[tuple[str, int, np.ndarray] | None] = []  # per frame: (file, rows, rows kept), or a plain run
        plain: list[str] = []
        for rel, full, count in group:
            vector = vectors.get(rel)
            if vector is None:
                plain.append(full)
                continue
            if plain:
                lazies.append(pl.scan_parquet(plain, hive_partitioning=False, glob=False).select(read))
                masks.append(None)
                plain = []
            deleted = deleted_positions(scan._io, vector, count)
            keep = np.ones(count, dtype=bool)
            keep[deleted] = False
            lazies.append(pl.scan_parquet(full, hive_partitioning=False, glob=False).select(read))
            masks.append((rel, count, keep))
        if plain:
            lazies.append(pl.scan_parquet(plain, hive_partitioning=False, glob=False).select(read))
            masks.append(None)
        for frame, mask in zip(pl.collect_all(lazies), masks, strict=True):
            if mask is None:
                yield frame
                continue
            rel, count, keep = mask
            if frame.height != count:
                raise CorruptMetadataError(
                    f"data file {rel} holds {frame.height} rows, its manifest entry says {count}"
                )
            yield frame.filter(pl.Series(keep))

    groups: list[list[tuple[str, str, int]]] = [[]]
    rows = 0
    for item in zip(ents.paths(entries), paths, counts, strict=True):
        if groups[-1] and (len(groups[-1]) >= _POLARS_GROUP_FILES or rows + item[2] > _POLARS_GROUP_ROWS):
            groups.append([])
            rows = 0
        groups[-1].append(item)
        rows += item[2]
    collected = (frame for group in groups if group for frame in frames(group))
    yield from _limited(collected, predicate, columns, n_rows)


def to_polars(scan: Scan) -> Any:
    """The scan as a Polars ``LazyFrame``: Polars pushes its projection, predicate and row limit into the read
    (an IO plugin, :func:`polars.io.plugins.register_io_source`)."""
    pl = require("polars", "polars", "Scan.to_polars()")
    from polars.io.plugins import register_io_source

    net = scan.feed_rows()
    if net is not None:  # rows from the change feed: no file to hand Polars
        return pl.from_arrow(net).lazy()

    schema = pl.DataFrame(output_schema(scan).empty_table()).schema
    snap = f"snapshot {scan.snapshot.id}" if scan.snapshot is not None else "empty"

    def source(
        with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None
    ) -> Iterator[Any]:
        return _polars_frames(pl, scan, with_columns, predicate, n_rows, batch_size)

    return register_io_source(
        source,
        schema=schema,
        is_pure=True,
        explain_name="lakefmt",
        explain_detail=f"{scan.uri} {snap}, {scan.entries().num_rows} planned file(s)",
    )


# -- pandas ------------------------------------------------------------------------------------------------------
def to_pandas(scan: Scan, **kwargs: Any) -> Any:
    """The scan's rows as a pandas ``DataFrame`` (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
    require("pandas", "pandas", "Scan.to_pandas()")
    return scan.to_arrow().to_pandas(**kwargs)
