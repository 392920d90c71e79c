"""Batch reads: a snapshot (latest, ``snapshotId``, ``asOf`` or ``tag``) planned on the driver into read tasks of about
``READ_SPLIT_BYTES``, each read with pyarrow on an executor; Spark's simple filters optionally prune files."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

import lakefmt

from .evolution import check_spark_schema
from .options import Options, TableRef

__all__ = ["READ_SPLIT_BYTES", "PushdownReader", "Reader"]

READ_SPLIT_BYTES = 128 << 20


@dataclass
class _FilesPartition(InputPartition):
    """One read task: planned files (each with the id of the schema it was written under) and the id of the
    schema the read returns, which the files are matched to by field id."""

    files: list[lakefmt.FileTask]
    schema_id: int | None = None


_SPARK_TO_PC = {
    EqualTo: lambda c, v: c == v,
    GreaterThan: lambda c, v: c > v,
    GreaterThanOrEqual: lambda c, v: c >= v,
    LessThan: lambda c, v: c < v,
    LessThanOrEqual: lambda c, v: c <= v,
}


def _to_expression(f: Filter) -> pc.Expression | None:
    """A pyarrow expression for a simple Spark filter on a top-level column (None when not expressible)."""
    attr = getattr(f, "attribute", ())
    if len(attr) != 1:
        return None
    col = pc.field(attr[0])
    if type(f) in _SPARK_TO_PC:
        value = f.value  # type: ignore[attr-defined]
        if value is None or (isinstance(value, float) and value != value):
            return None
        return _SPARK_TO_PC[type(f)](col, value)  # type: ignore[no-untyped-call]
    if isinstance(f, In):
        if any(v is None for v in f.value):
            return None
        return col.isin(list(f.value))
    if isinstance(f, IsNull):
        return col.is_null()
    if isinstance(f, IsNotNull):
        return col.is_valid()
    return None


class Reader(DataSourceReader):
    def __init__(self, ref: TableRef, options: Options, spark_schema: StructType | None = None) -> None:
        self.ref = ref
        self.spark_schema = spark_schema  #: what schema() returned when the DataFrame was defined
        self.snapshot_id: int | None = options.get("snapshotId")  # or its Delta spelling, versionAsOf
        self.as_of: int | None = options.get("asOf")  # or timestampAsOf; epoch milliseconds
        self.tag: str | None = options.get("tag")
        self.filter: pc.Expression | None = None
        given = [options.spelled(k) for k in ("snapshotId", "asOf", "tag") if options.get(k) is not None]
        self.both = f"options {' and '.join(given)}" if len(given) > 1 else ""

    def _scan(self, table: lakefmt.Table, current: lakefmt.TableSchema) -> lakefmt.Scan:
        """The snapshot's files. Spark's pushed filters name the current schema's columns, so they prune only a
        snapshot committed under it (a column renamed or added since is not the snapshot's); Spark evaluates
        every filter on the rows anyway."""
        if self.both:  # raised when Spark plans the read, so that the reader itself can be built and inspected
            raise lakefmt.InvalidOptionError(f"{self.both}: give one (a snapshot id, a time or a tag)")
        pinned = self.tag is not None or self.snapshot_id is not None or self.as_of is not None
        if self.filter is None or not pinned:
            return self._snapshot_scan(table, self.filter)
        scan = self._snapshot_scan(table, None)
        return self._snapshot_scan(table, self.filter) if scan.schema.id == current.id else scan

    def _snapshot_scan(self, table: lakefmt.Table, filter: pc.Expression | None) -> lakefmt.Scan:
        if self.tag is not None:
            return table.scan(filter=filter, tag=self.tag)
        return table.scan(filter=filter, snapshot_id=self.snapshot_id, as_of=self.as_of)

    def partitions(self) -> list[_FilesPartition]:
        """One partition per read task of about ``READ_SPLIT_BYTES`` (one empty partition for no files). Every
        read, time travel included, returns the table's current schema (:func:`.evolution.read_schema`)."""
        table = self.ref.open()
        current = table.table_schema()
        scan = self._scan(table, current)
        check_spark_schema(self.spark_schema, current, "this DataFrame")
        sid = current.id
        parts = [_FilesPartition(list(task.files), sid) for task in scan.plan_tasks(READ_SPLIT_BYTES)]
        return parts or [_FilesPartition([], sid)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's files as the read's schema (the current one when planned on the driver), matched by field
        id: a column the snapshot's files lack reads as nulls."""
        assert isinstance(partition, _FilesPartition)
        if partition.files:
            yield from self.ref.open().read_files(partition.files, schema=partition.schema_id)


class PushdownReader(Reader):
    """A reader that also prunes by Spark's filters (``spark.sql.python.filterPushdown.enabled=true`` and
    ``.option("pushFilters", "true")``; Spark refuses a reader with ``pushFilters`` when that conf is off)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Simple filters prune manifests and files by partition values and column min/max. Every filter
        is still handed back to Spark, which evaluates it on the rows: pruning only skips files."""
        for f in filters:
            expr = _to_expression(f)
            if expr is not None:
                self.filter = expr if self.filter is None else self.filter & expr
            yield f

