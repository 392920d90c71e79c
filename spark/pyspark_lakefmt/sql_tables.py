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

from .sql_common import TableFunction, check_snapshot, open_uri, reported, timestamp_ms

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

#: ``lakefmt_history(uri[, limit])``: one row per retained snapshot, oldest first (Delta's ``DESCRIBE HISTORY``)
HISTORY_SCHEMA = (
    "version BIGINT, timestamp TIMESTAMP, operation STRING, operation_parameters MAP<STRING, STRING>, "
    "parameters MAP<STRING, STRING>, rows_added BIGINT, rows_removed BIGINT, files_added BIGINT, "
    "files_removed BIGINT, commit_user STRING, commit_identifier BIGINT"
)
#: ``lakefmt_snapshots(uri)``: one row per retained snapshot, oldest first (Paimon's ``T$snapshots``)
SNAPSHOTS_SCHEMA = (
    "snapshot_id BIGINT, schema_id BIGINT, commit_user STRING, commit_identifier BIGINT, commit_kind STRING, "
    "commit_time TIMESTAMP, total_record_count BIGINT, delta_record_count BIGINT, total_file_count BIGINT, "
    "watermark BIGINT, properties MAP<STRING, STRING>"
)
#: ``lakefmt_files(uri[, snapshot_id])``: one row per live data file of the snapshot (Paimon's ``T$files``)
FILES_SCHEMA = (
    "file_path STRING, partition MAP<STRING, STRING>, record_count BIGINT, deleted_record_count BIGINT, "
    "file_size_in_bytes BIGINT, schema_id BIGINT"
)
#: the columns ``lakefmt_table_changes`` appends to the table's own
CHANGE_COLUMNS = (
    StructField("_change_type", StringType()),
    StructField("_commit_snapshot", LongType()),
    StructField("_commit_timestamp", TimestampType()),
)


def history_records(table: lakefmt.Table, limit: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``lakefmt_history``, in :data:`HISTORY_SCHEMA`'s order, oldest first: :meth:`lakefmt.Table
    .history` (the latest ``limit``: operation, its parameters, rows and data files added and removed, who committed
    it), so SQL shows what Python and ``lakefmt history`` show, with each snapshot's properties as ``parameters``."""
    properties = {s.id: s.properties for s in table.snapshots()}
    out = []
    for rec in reversed(table.history(limit=limit)):
        params = {k: str(v) for k, v in properties.get(rec["version"], {}).items() if k != "lakefmt.operation"}
        out.append((
            rec["version"], timestamp_ms(rec["timestamp"]), rec["operation"], dict(rec["operation_parameters"]),
            params, rec["rows_added"], rec["rows_removed"], rec["files_added"], rec["files_removed"],
            rec["commit_user"], rec["commit_identifier"],
        ))
    return out


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
            snaps = open_uri(uri, self.storage_options).snapshots()
        for s in snaps:
            yield (
                s.id, s.schema_id, s.commit_user, s.commit_identifier, s.commit_kind.value,
                timestamp_ms(s.time_millis), s.total_record_count, s.delta_record_count, s.total_file_count,
                s.watermark, {k: str(v) for k, v in s.properties.items()},
            )


class Files(TableFunction):
    """``lakefmt_files(uri[, snapshot_id])``: :data:`FILES_SCHEMA`, of the latest snapshot or ``snapshot_id``."""

    def eval(self, uri: str, snapshot_id: Any = None) -> Iterator[tuple[Any, ...]]:
        with reported("lakefmt_files", uri, *([] if snapshot_id is None else [snapshot_id])):
            table = open_uri(uri, self.storage_options)
            sid = None if snapshot_id is None else check_snapshot(snapshot_id, "snapshot_id")
            files = table.files(sid)
        for f in files:
            part = {k: None if v is None else str(v) for k, v in f.partition.items()}
            deleted = f.deletion_vector.cardinality if f.deletion_vector else 0
            yield f.path, part, f.row_count, deleted, f.file_size, f.schema_id


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


def _tuples(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    columns = [c.to_pylist() for c in batch.columns]
    return zip(*columns, strict=True) if columns else iter(())
