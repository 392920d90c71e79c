"""Reading a scan from Polars: the scan handed to Polars as a ``LazyFrame`` (:func:`to_polars`), an IO plugin.

Polars pushes its projection, predicate and row limit into the read; the predicate's terms that translate to
pyarrow expressions also prune the scan's files. Polars' own Parquet reader reads the planned files when
:func:`lakefmt.read.engines.local_paths` allows, each file's deleted rows left out by a keep-mask before the
predicate and the limit (:mod:`lakefmt.read.polars_vectors`, or a mask over each whole file after the read);
otherwise the frames come from the scan's masked record batches.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError
from lakefmt.meta import entries as ents
from lakefmt.read import polars_vectors
from lakefmt.read.engines import Scan, local_paths, narrow, native_paths, output_schema, require
from lakefmt.read.masks import deleted_positions
from lakefmt.spec.filters import has_float, has_nan_literal

__all__ = ["to_polars"]


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
        local = local_paths(scan, entries)
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
