"""Reading a scan from DuckDB: the scan handed to DuckDB as a relation (:func:`to_duckdb`).

DuckDB reads the planned files with its own Parquet reader when :func:`lakefmt.read.engines.local_paths` allows,
files with a deletion vector included: each file's rows are numbered by position and the deleted positions left
out by an anti-join on (``file_index``, position). Otherwise it reads lakefmt's ``pyarrow.dataset`` carrying the
filter, or the scan's masked record batches. Either way DuckDB pushes its own projection and filters into the read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakefmt.meta import entries as ents
from lakefmt.read import polars_vectors
from lakefmt.read.engines import Scan, local_paths, may_hold_nan, require
from lakefmt.read.masks import Vector, deleted_positions

__all__ = ["to_duckdb"]


def to_duckdb(scan: Scan, connection: Any = None, name: str | None = None) -> Any:
    """The scan as a DuckDB relation on ``connection`` (default: DuckDB's default connection, the one
    ``duckdb.sql`` uses); with ``name``, also a temporary view of that name. DuckDB pushes its projection and
    filters into the read."""
    duckdb = require("duckdb", "duckdb", "Scan.to_duckdb()")
    con = connection if connection is not None else duckdb.default_connection()
    vectors = scan.vectors()
    by_feed = scan.feed_rows() is not None  # rows from the change feed: no file to hand DuckDB
    paths = None if by_feed else local_paths(scan, scan.entries())
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
        if by_feed or vectors or not scan.pushdown_safe() or may_hold_nan(scan, scan.entries()):
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
