"""The data source itself: picks the reader or writer for what Spark asks."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from .catalog import declares_sql_table, sql_schema
from .options import TableRef, parse_options
from .reader import PushdownReader, Reader
from .stream_reader import StreamReader
from .writer import BatchWriter, StreamWriter, commit_user, overwrite_from_options, table_for_write

__all__ = ["LakefmtDataSource"]


class LakefmtDataSource(DataSource):
    """Spark data source ``lakefmt``: batch and streaming writes (exactly-once), batch and streaming reads."""

    @classmethod
    def name(cls) -> str:
        return "lakefmt"

    def schema(self) -> StructType:
        ref = TableRef.from_options(self.options)
        schema = from_arrow_schema(ref.open().schema())
        if declares_sql_table(self.options):  # CREATE TABLE ... USING lakefmt LOCATION: see .catalog
            return sql_schema(schema, ref.path)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_options(self.options, "read")
        cls = PushdownReader if options.get("pushFilters") else Reader
        return cls(TableRef.from_options(self.options, read_schema=schema), options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        parse_options(self.options, "stream-read")  # an unknown option or a bad value: an error naming it
        return StreamReader(TableRef.from_options(self.options, read_schema=schema), self.options)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        options = parse_options(self.options, "write")
        ref = TableRef.from_options(self.options, write=True)
        table = table_for_write(ref, schema, options)
        return BatchWriter(ref, overwrite_from_options(table, options, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = parse_options(self.options, "stream-write")
        ref = TableRef.from_options(self.options, write=True)
        user = commit_user(self.options)  # first: a stream refused for want of one creates no table
        table_for_write(ref, schema, options)
        return StreamWriter(ref, user, complete=overwrite)
