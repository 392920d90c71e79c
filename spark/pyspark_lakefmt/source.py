"""The data source itself: picks the reader or writer for what Spark asks."""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

import lakefmt

from .catalog import check_declaration_options, check_sql_columns, declares_sql_table, sql_schema
from .evolution import read_schema
from .feed import FEED_OPTIONS, ChangeFeedReader, ChangeFeedStreamReader, spark_feed_schema
from .options import SPARK_OPTIONS, TableRef, parse_options
from .reader import PushdownReader, Reader
from .writer import BatchWriter, StreamWriter, commit_user, overwrite_from_options, table_for_write

__all__ = ["LakefmtDataSource"]

log = logging.getLogger("pyspark_lakefmt.source")
#: the first line a batch read through the Python data source logs: where the faster path is
FAST_PATH_HINT = (
    "lakefmt: format('lakefmt') reads through Python workers; pyspark_lakefmt.read(spark, uri, **options) reads "
    "the same snapshot with Spark's own Parquet reader, several times faster (docs/spark.md, Reads)"
)


class LakefmtDataSource(DataSource):
    """Spark data source ``lakefmt``: batch and streaming writes (exactly-once), batch and streaming reads."""

    @classmethod
    def name(cls) -> str:
        return "lakefmt"

    def schema(self) -> StructType:
        """The table's current schema; for a read with ``snapshotId``/``asOf``/``tag``, that snapshot's."""
        ref = TableRef.from_options(self.options)
        if self._change_feed():
            return spark_feed_schema(ref.open())
        schema = from_arrow_schema(read_schema(ref.open(), self.options).arrow_schema)
        if declares_sql_table(self.options):  # CREATE TABLE ... USING lakefmt LOCATION: see .catalog
            check_declaration_options(self.options, SPARK_OPTIONS)
            return sql_schema(schema, ref.path)
        return schema

    def _change_feed(self) -> bool:
        """Whether the read is of the change feed (``readChangeFeed``, see :mod:`.feed`)."""
        low = {str(k).lower(): v for k, v in self.options.items()}
        return str(low.get("readchangefeed", "false")).strip().lower() in ("true", "1", "yes")

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_options(self.options, "read")
        if options.get("readChangeFeed"):
            return ChangeFeedReader(TableRef.from_options(self.options, read_schema=schema), options)
        given = [options.spelled(k) for k in FEED_OPTIONS if options.get(k) is not None]
        if given:
            raise lakefmt.InvalidOptionError(
                f"option {given[0]} is for a change feed read: add .option('readChangeFeed', 'true')"
            )
        log.info(FAST_PATH_HINT)
        cls = PushdownReader if options.get("pushFilters") else Reader
        return cls(self._read_ref(schema), options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_options(self.options, "stream-read")  # an unknown option or a bad value: an error naming it
        if options.get("readChangeFeed"):
            return ChangeFeedStreamReader(TableRef.from_options(self.options, read_schema=schema), options)
        try:  # imported here: batch reads and the sinks work on pyspark 4.1, which lacks what this needs
            from .stream_reader import StreamReader
        except ImportError as exc:
            raise lakefmt.LakefmtError(
                f"streaming reads need pyspark >= 4.2 (admission control for Python sources): {exc}"
            ) from None
        return StreamReader(self._read_ref(schema), self.options, schema)

    def _read_ref(self, schema: StructType) -> TableRef:
        """The table a read names; a SQL table's declared columns are checked against the table's first."""
        ref = TableRef.from_options(self.options, read_schema=schema)
        if ref.sql_table:
            check_sql_columns(schema, ref.open())
        return ref

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        options = parse_options(self.options, "write")
        ref = TableRef.from_options(self.options, write=True)
        table, schema_id = table_for_write(ref, schema, options)
        write_only = bool(options.get("writeOnly", False))
        return BatchWriter(
            ref, overwrite_from_options(table, options, overwrite), write_only=write_only, schema_id=schema_id
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = parse_options(self.options, "stream-write")
        ref = TableRef.from_options(self.options, write=True)
        user = commit_user(self.options)  # first: a stream refused for want of one creates no table
        # called before every micro-batch's tasks and again before its commit: see .evolution
        _, schema_id = table_for_write(ref, schema, options)
        write_only = bool(options.get("writeOnly", False))
        return StreamWriter(ref, user, complete=overwrite, write_only=write_only, schema_id=schema_id)
