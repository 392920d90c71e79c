"""The data source itself: picks the reader or writer for what Spark asks."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

import lakefmt

from .options import TableRef, flag, pairs
from .reader import PushdownReader, Reader
from .stream_reader import StreamReader
from .writer import BatchWriter, StreamWriter, commit_user, table_for_write

__all__ = ["LakefmtDataSource"]


class LakefmtDataSource(DataSource):
    """Spark data source ``lakefmt``: batch and streaming writes (exactly-once), batch and streaming reads."""

    @classmethod
    def name(cls) -> str:
        return "lakefmt"

    def schema(self) -> StructType:
        table = TableRef.from_options(self.options).open()
        return from_arrow_schema(table.schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = PushdownReader if flag(self.options, "pushFilters") else Reader
        return cls(TableRef.from_options(self.options), self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(TableRef.from_options(self.options), self.options)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        ref = TableRef.from_options(self.options)
        table_for_write(ref, schema, self.options)
        partition = pairs(str(self.options.get("overwritePartition", "")), "overwritePartition") or None
        if partition and not overwrite:
            raise lakefmt.LakefmtError("option overwritePartition needs .mode('overwrite')")
        return BatchWriter(ref, overwrite, partition)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        ref = TableRef.from_options(self.options)
        user = commit_user(self.options)  # first: a stream refused for want of one creates no table
        table_for_write(ref, schema, self.options)
        return StreamWriter(ref, user, complete=overwrite)
