"""The native read path: lakefmt plans, Spark's own Parquet reader reads.

``pyspark_lakefmt.read(spark, uri, **options)`` returns an ordinary DataFrame: on the driver lakefmt picks the
snapshot (``snapshotId``/``versionAsOf``, ``asOf``/``timestampAsOf``, ``tag``), its schema and its live data files
(pruned by partition values and column statistics with ``filter=``), and the deletion vectors' positions; the
executors then read the files with ``spark.read.parquet`` (column pruning, predicate pushdown, vectorised
decoding; the optimizer sees an ordinary Parquet scan).

* **Columns by field id.** The schema carries each field's id (:mod:`.native_types`) and the read turns on
  ``spark.sql.parquet.fieldId.read.enabled`` in the session, so renames, drops, re-adds and columns added since
  read as ``Table.scan(...).to_arrow()`` reads them. Partition values are in the data files themselves.
* **Deletion vectors** (key tables, ``write.delete.mode=merge-on-read``): the files that have one are read with
  ``_metadata.file_name`` and ``_metadata.row_index`` (the row's physical position in its file, which neither row
  group skipping nor a pushed filter changes), anti-joined with the deleted positions, broadcast when there are at
  most :data:`BROADCAST_POSITIONS`. Files without one are read plainly and the two reads are unioned.
* A type Spark cannot read as lakefmt does (:func:`.native_types.native_unsupported`: unsigned integers, ...) is
  :class:`lakefmt.UnsupportedTypeError` naming the column (the Python data source cannot read it either). Files
  that need matching by id but were written without ids (format version 1, then evolved), and a change-feed read,
  are read by the Python data source (``format("lakefmt")``) instead, with the reason logged.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lakefmt

from .native_types import native_unsupported, spark_schema
from .options import Options, TableRef, parse_options

__all__ = ["BROADCAST_POSITIONS", "FIELD_ID_CONF", "NativePlan", "create_view", "plan", "read"]

log = logging.getLogger("pyspark_lakefmt.native")

#: the session conf that makes Spark's Parquet reader match columns by field id
FIELD_ID_CONF = "spark.sql.parquet.fieldId.read.enabled"
#: deleted positions up to this many are broadcast to the anti-join (else Spark picks the join)
BROADCAST_POSITIONS = 4_000_000
_FILE = "__lakefmt_file"
_POS = "__lakefmt_pos"


class NativePlan:
    """What the driver planned for a native read: the scan, its files, the Spark schema the files are read into,
    and (when the native path cannot read the table) why not."""

    def __init__(self, scan: lakefmt.Scan, table: lakefmt.Table) -> None:
        self.scan = scan
        self.files = scan.files() if scan.snapshot is not None else []
        self.schema = scan.schema
        file_schemas = {s.id: s for s in table.schemas()}
        versions = {file_schemas[f.schema_id].format_version for f in self.files if f.schema_id in file_schemas}
        by_name = self.schema.format_version < 2 or min(versions, default=2) < 2  # files without field ids
        unsupported = native_unsupported(self.schema.arrow_schema)
        if unsupported is not None:  # the Python data source cannot read these either (pyspark's Arrow conversion)
            raise lakefmt.UnsupportedTypeError(f"{unsupported}; read the table with Table.scan(...).to_arrow()")
        self.reason: str | None = None
        if by_name and any(f.schema_id not in (None, self.schema.id) for f in self.files):
            self.reason = "files written without Parquet field ids (format version 1) need matching by id"
        if self.reason is None and any(f.schema_id not in file_schemas for f in self.files if f.schema_id is not None):
            self.reason = "a file's schema is not in the table"
        self.spark_schema = spark_schema(self.schema, with_ids=not by_name)
        names = [posixpath.basename(f.path) for f in self.files]
        if self.reason is None and len(set(names)) != len(names):
            self.reason = "two planned data files share a file name (deletion vectors are matched by file name)"

    @property
    def paths(self) -> list[str]:
        """The planned files, as Spark's reader is given them."""
        return [f.full_path for f in self.files]


def _scan(table: lakefmt.Table, options: Options, filter: str | pc.Expression | None) -> lakefmt.Scan:
    given = [options.spelled(k) for k in ("snapshotId", "asOf", "tag") if options.get(k) is not None]
    if len(given) > 1:
        raise lakefmt.InvalidOptionError(f"options {' and '.join(given)}: give one (a snapshot id, a time or a tag)")
    if options.get("tag") is not None:
        return table.scan(filter=filter, tag=options.get("tag"))
    return table.scan(filter=filter, snapshot_id=options.get("snapshotId"), as_of=options.get("asOf"))


def plan(uri: str, *, filter: str | pc.Expression | None = None, **options: Any) -> NativePlan:
    """The driver's plan of a native read of the table at ``uri`` (``options`` as for :func:`read`)."""
    strings = {str(k): str(v) for k, v in options.items()}
    parsed = parse_options(strings, "read")
    ref = TableRef.from_options({**strings, "path": uri})
    table = ref.open()
    return NativePlan(_scan(table, parsed, filter), table)


def _positions(native: NativePlan) -> pa.Table:
    names: list[str] = []
    parts: list[pa.Array] = []
    for f in native.files:
        if f.deletion_vector is not None:
            positions = native.scan.deleted_positions(f)
            names.append(posixpath.basename(f.path))
            parts.append(positions)
    counts = [len(p) for p in parts]
    files = pa.array(names, pa.string()).take(pa.array([i for i, n in enumerate(counts) for _ in range(n)], pa.int64()))
    positions = pa.concat_arrays(parts) if parts else pa.array([], pa.int64())
    return pa.table({_FILE: files, _POS: positions})


def _parquet(spark: SparkSession, native: NativePlan, paths: list[str]) -> DataFrame:
    return spark.read.schema(native.spark_schema).parquet(*paths)


def read(spark: SparkSession, uri: str, *, filter: str | pc.Expression | None = None, **options: Any) -> DataFrame:
    """The table at ``uri`` as a DataFrame read by Spark's own Parquet reader, as ``Table.scan(...).to_arrow()``
    reads it (the snapshot's schema, deletion vectors applied).

    ``options`` are the batch read options of ``format("lakefmt")`` (``snapshotId``, ``versionAsOf``, ``asOf``,
    ``timestampAsOf``, ``tag``, ``storage.<key>``; any case). ``filter`` (SQL text or a pyarrow expression) prunes
    files by partition values and column statistics; SQL text is also applied to the rows by Spark (a pyarrow
    expression only prunes: apply the filter with ``where`` yourself). Sets ``spark.sql.parquet.fieldId.read.enabled``
    in the session. A read that the native path cannot do falls back to ``format("lakefmt")`` (see the module)."""
    low = {str(k).lower() for k in options}
    if "readchangefeed" in low or "pushfilters" in low:
        return _fallback(spark, uri, options, "a change feed read (or pushFilters) is the Python data source's")
    native = plan(uri, filter=filter, **options)
    if native.reason is not None:
        return _fallback(spark, uri, options, native.reason)
    spark.conf.set(FIELD_ID_CONF, "true")
    log.info("lakefmt native read of %s: %d file(s) of snapshot %s", uri, len(native.files), native.scan.snapshot)
    plain = [f.full_path for f in native.files if f.deletion_vector is None]
    masked = [f.full_path for f in native.files if f.deletion_vector is not None]
    frames: list[DataFrame] = []
    if plain or not masked:
        frames.append(_parquet(spark, native, plain) if plain else spark.createDataFrame([], native.spark_schema))
    if masked:
        deleted = _positions(native)
        dv = spark.createDataFrame(deleted)
        if deleted.num_rows <= BROADCAST_POSITIONS:
            dv = F.broadcast(dv)
        rows = _parquet(spark, native, masked).select(
            "*", F.col("_metadata.file_name").alias(_FILE), F.col("_metadata.row_index").alias(_POS)
        )
        frames.append(rows.join(dv, on=[_FILE, _POS], how="left_anti").drop(_FILE, _POS))
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return df.where(filter) if isinstance(filter, str) else df


def _fallback(spark: SparkSession, uri: str, options: dict[str, Any], reason: str) -> DataFrame:
    log.warning("lakefmt: %s is read by the Python data source, not natively: %s", uri, reason)
    reader = spark.read.format("lakefmt")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(uri)


def create_view(spark: SparkSession, name: str, uri: str, **options: Any) -> DataFrame:
    """A temporary view ``name`` of :func:`read` (for SQL: ``SELECT ... FROM name``), fixed to the snapshot read
    now: call it again to see later commits. Returns the DataFrame."""
    df = read(spark, uri, **options)
    df.createOrReplaceTempView(name)
    return df
