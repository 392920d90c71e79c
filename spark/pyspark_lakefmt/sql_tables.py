"""System tables in SQL: a table's history, snapshots, live files and change feed, as Python UDTFs Spark SQL calls
by name once :func:`pyspark_lakefmt.register` has registered them::

    SELECT * FROM lakefmt_history('/data/events')
    SELECT * FROM lakefmt_snapshots('/data/events')
    SELECT * FROM lakefmt_files('/data/events')
    SELECT * FROM lakefmt_table_changes('/data/events', 2)        -- what snapshots 3 .. latest changed
    SELECT * FROM lakefmt_table_changes('/data/events', 2, 5)     -- what snapshots 3 .. 5 changed

The output columns of the first three are fixed (:data:`HISTORY_SCHEMA`, :data:`SNAPSHOTS_SCHEMA`,
:data:`FILES_SCHEMA`); ``lakefmt_table_changes`` returns the table's current columns followed by
``_change_type``, ``_commit_snapshot`` and ``_commit_timestamp`` (:meth:`lakefmt.Table.changes`), decided when
Spark analyses the query (so the uri and the snapshot ids must be constants there). Everything is read with
lakefmt's public API in the Python worker that runs the function.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

import lakefmt
from lakefmt.read import inspect

from .sql_common import TableFunction, check_snapshot, open_uri, reported

__all__ = [
    "CHANGE_COLUMNS",
    "FILES_SCHEMA",
    "HISTORY_SCHEMA",
    "SNAPSHOTS_SCHEMA",
    "Files",
    "History",
    "Snapshots",
    "TableChanges",
    "changes_schema",
    "history_records",
]

#: the SQL type of each Arrow type the metadata tables use
_SQL_TYPES = {
    pa.int8(): "TINYINT", pa.int32(): "INT", pa.int64(): "BIGINT", pa.string(): "STRING", pa.bool_(): "BOOLEAN",
    pa.timestamp("ms", tz="UTC"): "TIMESTAMP", pa.map_(pa.string(), pa.string()): "MAP<STRING, STRING>",
}  # fmt: skip


def _ddl(schema: pa.Schema, last: str) -> str:
    """The DDL of ``schema``'s columns up to ``last``: a SQL function's schema is a prefix of its metadata table's
    (:mod:`lakefmt.read.inspect`), whose later columns SQL leaves out so that ``SELECT *`` keeps its columns."""
    fields = list(schema)[: schema.get_field_index(last) + 1]
    return ", ".join(f"{f.name} {_SQL_TYPES[f.type]}" for f in fields)


#: ``lakefmt_history(uri[, limit])``: one row per retained snapshot, oldest first (Delta's ``DESCRIBE HISTORY``)
HISTORY_SCHEMA = _ddl(inspect.HISTORY_SCHEMA, "commit_identifier")
#: ``lakefmt_snapshots(uri)``: one row per retained snapshot, oldest first (Paimon's ``T$snapshots``)
SNAPSHOTS_SCHEMA = _ddl(inspect.SNAPSHOTS_SCHEMA, "properties")
#: ``lakefmt_files(uri[, snapshot_id])``: one row per live data file of the snapshot (Paimon's ``T$files``)
FILES_SCHEMA = _ddl(inspect.FILES_SCHEMA, "schema_id")
#: the columns ``lakefmt_table_changes`` appends to the table's own
CHANGE_COLUMNS = (
    StructField("_change_type", StringType()),
    StructField("_commit_snapshot", LongType()),
    StructField("_commit_timestamp", TimestampType()),
)


def history_records(table: lakefmt.Table, limit: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``lakefmt_history``, in :data:`HISTORY_SCHEMA`'s order, oldest first: the leading columns of
    :meth:`lakefmt.Table.inspect` ``.history()`` (:meth:`lakefmt.Table.history`'s records: operation, its
    parameters, rows and data files added and removed, who committed it, with each snapshot's properties as
    ``parameters``), so SQL shows what Python and ``lakefmt history`` show."""
    return list(_rows(table.inspect.history(limit), HISTORY_SCHEMA))


class History(TableFunction):
    """``lakefmt_history(uri[, limit])``: :data:`HISTORY_SCHEMA`; with ``limit``, the latest ``limit`` snapshots."""

    def eval(self, uri: str, limit: Any = None) -> Iterator[tuple[Any, ...]]:
        args = (uri,) if limit is None else (uri, limit)
        with reported("lakefmt_history", *args):
            rows = history_records(open_uri(uri, self.storage_options), limit)
        yield from rows


class Snapshots(TableFunction):
    """``lakefmt_snapshots(uri)``: :data:`SNAPSHOTS_SCHEMA`."""

    def eval(self, uri: str) -> Iterator[tuple[Any, ...]]:
        with reported("lakefmt_snapshots", uri):
            snaps = open_uri(uri, self.storage_options).inspect.snapshots()
        yield from _rows(snaps, SNAPSHOTS_SCHEMA)


class Files(TableFunction):
    """``lakefmt_files(uri[, snapshot_id])``: :data:`FILES_SCHEMA`, of the latest snapshot or ``snapshot_id``."""

    def eval(self, uri: str, snapshot_id: Any = None) -> Iterator[tuple[Any, ...]]:
        with reported("lakefmt_files", uri, *([] if snapshot_id is None else [snapshot_id])):
            table = open_uri(uri, self.storage_options)
            sid = None if snapshot_id is None else check_snapshot(snapshot_id, "snapshot_id")
            files = table.inspect.files(sid)
        yield from _rows(files, FILES_SCHEMA)


def changes_schema(
    storage_options: Mapping[str, str], uri: Any, from_snapshot: Any = None, to_snapshot: Any = None
) -> Any:
    """The output schema of ``lakefmt_table_changes`` (an ``AnalyzeResult``): the table's current columns and
    :data:`CHANGE_COLUMNS`. The call is checked here, when Spark analyses the query, before any task runs."""
    from pyspark.sql.udtf import AnalyzeResult

    args = [a for a in (uri, from_snapshot, to_snapshot) if a is not None]
    values = [getattr(a, "value", None) for a in args]
    with reported("lakefmt_table_changes", *values):
        if from_snapshot is None:
            raise TypeError("takes the table uri and the snapshot to start after: lakefmt_table_changes(uri, "
                            "from_snapshot[, to_snapshot]) (0: from the first commit)")
        if any(not getattr(a, "isConstantExpression", True) for a in args):
            raise ValueError("its arguments must be constants (a literal uri and snapshot ids)")
        _, end = _range(values[1], values[2] if len(values) > 2 else None)
        table = open_uri(values[0], storage_options)
        if end is not None:
            table.snapshot(end)  # one that does not exist: now, before any task runs
        columns = from_arrow_schema(table.schema()).fields
    return AnalyzeResult(StructType([*columns, *CHANGE_COLUMNS]))


class TableChanges(TableFunction):
    """``lakefmt_table_changes(uri, from_snapshot[, to_snapshot])``: the rows snapshots ``from_snapshot+1 ..
    to_snapshot`` (default: the latest) inserted, updated and deleted (:meth:`lakefmt.Table.changes`; 0 from the
    first commit), as the table's current columns and :data:`CHANGE_COLUMNS`."""

    #: Spark's analysis calls it with the call's arguments (``AnalyzeArgument``s); a static method, as pyspark
    #: requires, with the storage options bound (:func:`pyspark_lakefmt.register` binds its own)
    analyze = staticmethod(functools.partial(changes_schema, {}))

    def eval(self, uri: str, from_snapshot: Any = None, to_snapshot: Any = None) -> Iterator[tuple[Any, ...]]:
        shown = [a for a in (uri, from_snapshot, to_snapshot) if a is not None]
        with reported("lakefmt_table_changes", *shown):
            start, end = _range(from_snapshot, to_snapshot)
            changes = open_uri(uri, self.storage_options).changes(start, end)
        for batch in changes.to_batches():
            yield from _tuples(batch)


def _range(start: Any, end: Any) -> tuple[int, int | None]:
    last = None if end is None else check_snapshot(end, "to_snapshot")
    return check_snapshot(start, "from_snapshot", minimum=0), last


def _rows(table: pa.Table, ddl: str) -> Iterator[tuple[Any, ...]]:
    """The rows of the columns ``ddl`` names (the leading columns of ``table``) as tuples, maps as dicts."""
    picked = table.select([item.split(" ", 1)[0] for item in _items(ddl)])
    maps = [pa.types.is_map(f.type) for f in picked.schema]
    for batch in picked.to_batches():
        for row in _tuples(batch):
            yield tuple(dict(v) if m and v is not None else v for v, m in zip(row, maps, strict=True))


def _items(ddl: str) -> list[str]:
    """The column definitions of a DDL schema string, split at its top-level commas."""
    out, depth, current = [], 0, ""
    for ch in ddl:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    return [*out, current.strip()]


def _tuples(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    columns = [c.to_pylist() for c in batch.columns]
    return zip(*columns, strict=True) if columns else iter(())
