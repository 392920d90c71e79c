"""Schema evolution in the connector: the schema a write's tasks write under (``mergeSchema``), and the schema a
read returns.

**Writes.** Spark hands a Python data source's writer the DataFrame's schema on the driver, and only there: when
a batch job is planned, and for a stream before *every* micro-batch (measured on pyspark 4.3: ``streamWriter`` is
called in the planning worker before each micro-batch's tasks, and again in the commit worker before each
``commit``). :func:`write_schema` runs there, each time:

1. with ``mergeSchema=true``, the DataFrame's columns the table lacks (and the fields its struct columns lack) are
   added as nullable columns, in one schema change (``UpdateSchema.union_by_name``) published before any task
   starts, once the data is known to match the result (a write refused for another mismatch changes nothing);
   when there are none nothing is written, so a stream pays one read of the latest schema per micro-batch.
   ``mergeSchema`` adds columns; it never changes one's type (widen with ``Table.update_schema``);
2. the tasks write under the current schema if the data matches it; else under the newest earlier schema the
   data matches, provided the current schema reads that schema's files whole (the data lacks only columns added
   since, or uses a column's name from before a rename): a stream started before someone else changed the schema
   keeps running, and its rows read the new columns as null. Otherwise the mismatch with the current schema is
   the error, before any task runs;
3. the writer carries that schema's id to its tasks (``Table.new_writer(schema_id=)``), so a schema change between
   planning and the tasks changes nothing they accept. The commit records the table's newest schema and refuses,
   with ``SchemaConflictError`` and nothing committed, files holding a column that was dropped in between.

A schema change is committed on the driver, before the data commit and once: later micro-batches find nothing to
add. A replayed micro-batch (same batch id, after a crash) is skipped by the commit's dedup whatever schema its new
files were written under.

**Reads.** A batch read returns the table's current schema, also with ``snapshotId``/``asOf``/``tag`` (and Delta's
spellings): an older snapshot's files are matched to it by field id on the executors (``Table.read_files``), so a
column added since reads as nulls and a renamed one under its new name (:func:`read_schema`, what
``DataSource.schema()`` returns). A SQL table's catalog keeps the current columns, and ``SELECT ... WITH
('snapshotId' = '1')`` reads that way too. A DataFrame defined before the
table's schema changed is refused when it runs (:func:`check_spark_schema`): load it again. A streaming read keeps
the schema it started with; files of a later schema are read into it while that loses nothing (columns added
since are left out, a renamed column keeps its old name), and a change it cannot show (a column it returns was
dropped, widened or made nullable) stops it with an error saying to restart it (:func:`stream_readable`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

import lakefmt
from lakefmt.spec.evolution.changes import readable_under

from .options import parse_options

__all__ = [
    "TIME_TRAVEL_OPTIONS",
    "check_spark_schema",
    "read_schema",
    "stream_readable",
    "write_schema",
]

#: the read options that pick a snapshot other than the latest (lower-cased, as Spark hands them)
TIME_TRAVEL_OPTIONS = ("snapshotid", "versionasof", "asof", "timestampasof", "tag")


# -- writes ---------------------------------------------------------------------------------------------------
def write_schema(table: lakefmt.Table, incoming: pa.Schema, *, merge: bool) -> lakefmt.TableSchema:
    """The schema the tasks of a write (a batch job, or one micro-batch) write data of schema ``incoming``
    under, decided on the driver before they start (see the module docstring). ``merge``: add ``incoming``'s
    new columns first. :class:`lakefmt.SchemaMismatchError` if the data matches no usable schema."""
    if merge:
        update = table.update_schema().union_by_name(incoming)
        merged = update.preview()
        if merged is not None:  # nothing new: nothing is written
            lakefmt.TableWriter.check_schema(incoming, merged.arrow_schema)  # refused: the table is unchanged
            update.commit()
    current = table.table_schema()
    try:
        lakefmt.TableWriter.check_schema(incoming, current.arrow_schema)
        return current
    except lakefmt.SchemaMismatchError as exc:
        mismatch = exc
    for older in reversed(table.schemas()):
        if older.id >= current.id or readable_under(older, current) is not None:
            continue
        try:
            lakefmt.TableWriter.check_schema(incoming, older.arrow_schema)
        except lakefmt.SchemaMismatchError:
            continue
        return older
    hint = "" if merge else " (.option('mergeSchema', 'true') adds the data's new columns to the table)"
    raise lakefmt.SchemaMismatchError(f"{mismatch}{hint}") from None


# -- reads ----------------------------------------------------------------------------------------------------
def read_schema(table: lakefmt.Table, options: Mapping[str, str]) -> lakefmt.TableSchema:
    """The schema a batch read with ``options`` returns: the table's current one, also for a snapshot that
    ``snapshotId``/``asOf`` (or Delta's ``versionAsOf``/``timestampAsOf``) or ``tag`` names, which is looked up
    now so that a snapshot that does not exist fails when the DataFrame is defined."""
    chosen = {k: v for k, v in options.items() if str(k).lower() in TIME_TRAVEL_OPTIONS}
    current = table.table_schema()
    if not chosen:
        return current
    opts = parse_options(chosen, "read")
    given = [opts.spelled(k) for k in ("snapshotId", "asOf", "tag") if opts.get(k) is not None]
    if len(given) > 1:  # the reader's own message (see Reader._scan)
        raise lakefmt.InvalidOptionError(
            f"options {' and '.join(given)}: give one: a snapshot id, a time or a tag, not two"
        )
    if opts.get("tag") is not None:
        table.scan(tag=opts.get("tag"))
    else:
        table.scan(snapshot_id=opts.get("snapshotId"), as_of=opts.get("asOf"))
    return current


def _columns(schema: StructType) -> list[tuple[str, object]]:
    return [(f.name, f.dataType) for f in schema.fields]


def check_spark_schema(spark_schema: StructType | None, schema: lakefmt.TableSchema, what: str) -> None:
    """Refuse a read whose Spark schema (what ``schema()`` returned when the DataFrame was defined) is not the
    schema it reads with now: the table's schema changed in between. ``what`` names the read."""
    if spark_schema is None:
        return
    now = from_arrow_schema(schema.arrow_schema)
    if _columns(spark_schema) != _columns(now):
        raise lakefmt.SchemaMismatchError(
            f"{what} was defined with the columns {spark_schema.simpleString()}, but the table's schema is now "
            f"schema {schema.id}: {now.simpleString()} (it changed since); load the table again to read it with "
            "its new schema"
        )


def stream_readable(written: lakefmt.TableSchema, read: lakefmt.TableSchema) -> str | None:
    """None when files written under ``written`` read into ``read``, the schema a stream started with, losing
    nothing; else why not. Files of an earlier schema always do (they are read as any reader reads them); a
    later schema's do unless a column ``read`` returns was dropped, changed type or became nullable since."""
    if written.id <= read.id:
        return None
    for fid, (path, node) in read.by_id.items():
        now = written.by_id.get(fid)
        name = ".".join(path)
        if now is None:
            return f"column {name!r} (field id {fid}) was dropped in schema {written.id}"
        if not (node.children or now[1].children) and node.type != now[1].type:
            return f"column {name!r} (field id {fid}) is a {now[1].type} in schema {written.id}, not a {node.type}"
        if not node.field.nullable and now[1].field.nullable:
            return f"column {name!r} (field id {fid}) may hold nulls since schema {written.id}"
    return None
