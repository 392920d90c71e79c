"""SQL tables: what Spark 4.x lets a Python data source do with the session catalog, and lakefmt's way through it.

Measured on pyspark 4.3 (``docs/spark.md``, section SQL, has the whole table):

* ``CREATE TABLE t USING lakefmt LOCATION 'uri'`` (no column list) calls the source's ``schema()`` once, with the
  options ``path`` and ``location`` (as ``file:/...`` for a local folder), ``provider`` and ``owner``; the catalog
  keeps the schema it returns, field metadata included.
* Afterwards, ``SELECT`` and ``INSERT`` create the source with **no options at all**: Spark's ``PythonTable`` drops
  the table's properties, location included. ``reader(schema)`` does receive the catalog's schema, so the
  location travels to reads in that schema's field metadata (:data:`LOCATION_KEY`), written by :func:`sql_schema`.
* ``writer(schema, overwrite)`` receives the schema of the *query*, not the table's: when the query's columns
  already have the table's names and types, Spark passes them through unchanged, with whatever metadata they
  carry — in ``INSERT INTO a SELECT * FROM b`` that is ``b``'s location. A write therefore never takes its
  location from metadata; it needs the ``path`` option (``INSERT INTO t WITH ('path' = 'uri') ...``).
* ``CREATE TABLE t (cols) USING lakefmt ...`` calls nothing on the source: no table is created, and later reads
  and writes get neither options nor a location. They fail with :func:`no_location_error`, naming the fix.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pyspark.sql.types import StructField, StructType

import lakefmt

__all__ = [
    "LOCATION_KEY",
    "check_declaration_options",
    "check_sql_columns",
    "declares_sql_table",
    "location_from_schema",
    "no_location_error",
    "sql_schema",
    "table_location",
]

#: field metadata key carrying a SQL table's location from ``CREATE TABLE`` to its reads
LOCATION_KEY = "lakefmt.location"


def declares_sql_table(options: Mapping[str, str]) -> bool:
    """Whether Spark is declaring a catalog table (``CREATE TABLE ... USING lakefmt``): only then does it put
    ``provider`` into a Python source's options."""
    return "provider" in options


def check_declaration_options(options: Mapping[str, str], spark_keys: Collection[str]) -> None:
    """Refuse ``OPTIONS (...)`` and ``TBLPROPERTIES (...)`` on ``CREATE TABLE ... USING lakefmt`` (Spark hands both
    over as options, once, now): reads and writes of the table never see them again, so a read option or a table
    option given there would silently do nothing. ``storage.<key>`` passes (it opens the table now), and so do
    ``spark_keys``, Spark's own (``path``, ``location``, ``provider``, ...)."""
    spark = {k.lower() for k in spark_keys}
    ignored = sorted(
        k for k in options if k.lower() not in spark and not k.lower().startswith(("storage.", "option."))
    )
    if ignored:
        raise lakefmt.InvalidOptionError(
            f"CREATE TABLE ... USING lakefmt takes no OPTIONS or TBLPROPERTIES ({', '.join(map(repr, ignored))}): "
            "Spark 4.x hands them to a Python data source at CREATE TABLE only, never to the table's reads and "
            "writes, so they would do nothing. Table options are set when the lakefmt table is created "
            "(lakefmt.create_table(uri, schema, options={...})); read options go in the query: "
            "SELECT * FROM t WITH ('snapshotId' = '3')"
        )


def sql_schema(schema: StructType, location: str) -> StructType:
    """``schema`` with ``location`` in every field's metadata (:data:`LOCATION_KEY`): the catalog keeps it and
    hands it back to ``reader(schema)``, which is the only way a SQL table's reads can find the table."""
    return StructType(
        [StructField(f.name, f.dataType, f.nullable, {**(f.metadata or {}), LOCATION_KEY: location}) for f in schema]
    )


def location_from_schema(schema: StructType | None) -> str | None:
    """The location :func:`sql_schema` put into a catalog table's schema, or None. Fields without one (a column
    the catalog alone added) do not count; fields that disagree (a schema assembled from two tables) name none."""
    if schema is None:
        return None
    found = {str(loc) for f in schema.fields if (loc := (f.metadata or {}).get(LOCATION_KEY))}
    return found.pop() if len(found) == 1 else None


def table_location(spark: Any, name: str) -> str:
    """The location of the SQL table ``name`` declared over a lakefmt table (``CREATE TABLE ev USING lakefmt LOCATION
    '/data/ev'``), for the calls that take a location: lakefmt's SQL functions (``lakefmt_history(...)``),
    :func:`lakefmt.open_table`, ``.load(...)``. Spark's catalog does not show a Python source's location (``DESCRIBE
    TABLE EXTENDED`` has none); lakefmt reads the one it recorded in the table's columns at ``CREATE TABLE``.
    :class:`lakefmt.InvalidLocationError` when ``name`` is a table of another source or carries no location."""
    schema = spark.table(name).schema
    location = location_from_schema(schema)
    if location is None:
        raise lakefmt.InvalidLocationError(
            f"the SQL table {name} carries no lakefmt location: it is not a table declared with CREATE TABLE "
            f"{name} USING lakefmt LOCATION 'uri' (a table of another source, or one declared with a column list)"
        )
    return location


def check_sql_columns(schema: StructType, table: lakefmt.Table) -> None:
    """Refuse a read whose SQL table declares other columns than the lakefmt table has: the catalog keeps the
    columns it saw at ``CREATE TABLE``, and ``ALTER TABLE ... ADD COLUMNS`` changes the catalog alone."""
    declared, actual = [f.name for f in schema.fields], table.schema().names
    if declared != actual:
        raise lakefmt.SchemaMismatchError(
            f"the SQL table over {table.uri} declares the columns {declared}, but the lakefmt table has {actual}: "
            "Spark's catalog keeps the columns it saw at CREATE TABLE, and ALTER TABLE does not reach lakefmt. "
            f"Declare the table again: DROP TABLE t, then CREATE TABLE t USING lakefmt LOCATION '{table.uri}'"
        )


_DATAFRAME = "In the DataFrame API, give the table: .save(uri), .load(uri), .start(uri) or .option('path', uri)."
_DECLARE = (
    "A SQL table over lakefmt is declared without a column list, over an existing lakefmt table: "
    "CREATE TABLE t USING lakefmt LOCATION 'uri'. Create that table first with lakefmt.create_table(uri, schema, "
    "partition_by=[...]) or a DataFrame write with .option('createTable', 'true').option('partitionBy', 'dt')."
)


def no_location_error(options: Mapping[str, str], *, write: bool) -> lakefmt.LakefmtError:
    """The error for a source Spark gave no table location, naming what to do instead."""
    if declares_sql_table(options):
        return lakefmt.InvalidLocationError(
            "CREATE TABLE ... USING lakefmt needs LOCATION 'uri' naming an existing lakefmt table (Spark's own "
            f"warehouse folder is not one). {_DECLARE}"
        )
    if write:
        return lakefmt.InvalidLocationError(
            "no table location: Spark 4.x gives a Python data source no location when it writes to a SQL table "
            "(INSERT INTO, INSERT OVERWRITE, CREATE TABLE AS SELECT), and lakefmt will not guess one. Name it: "
            f"INSERT INTO t WITH ('path' = 'uri') SELECT ... {_DATAFRAME}"
        )
    return lakefmt.InvalidLocationError(
        "no table location: Spark handed the lakefmt source neither a path nor a SQL table's schema carrying its "
        "location. A SQL table declared with a column list (CREATE TABLE t (cols) USING lakefmt ...) is never "
        f"seen by lakefmt, so no lakefmt table was created for it. {_DECLARE} {_DATAFRAME}"
    )
