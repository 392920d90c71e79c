"""The ``lakefmt`` Spark data source (pyspark >= 4.1 Python Data Source API), and the native read path.

The fast read: lakefmt plans on the driver, Spark's own Parquet reader reads (:mod:`pyspark_lakefmt.native`)::

    df = pyspark_lakefmt.read(spark, "s3://bucket/events", versionAsOf=12)
    pyspark_lakefmt.create_view(spark, "events", "s3://bucket/events")    # SELECT ... FROM events

Installed as the top-level module ``pyspark_lakefmt``, it is found by pyspark without a register call::

    df.write.format("lakefmt").mode("append").save("s3://bucket/events")
    df.writeStream.format("lakefmt").option("checkpointLocation", ck).start("/data/events")
    spark.read.format("lakefmt").option("snapshotId", 12).load("/data/events")
    spark.readStream.format("lakefmt").option("consumerId", "silver").load("/data/events")

Built on lakefmt's public API only: tasks write with ``Table.new_writer()`` and return the small commit message;
the driver-side ``commit`` publishes with ``Table.new_committer(commit_user).commit(messages, identifier)``.
For streams the identifier is the micro-batch id, so a batch Spark replays after a crash is skipped.

Options (case-insensitive) are a contract: :data:`pyspark_lakefmt.options.OPTIONS` lists every one, with the
uses it belongs to (read, write, stream-read, stream-write) and Delta's spellings (``versionAsOf``,
``timestampAsOf``, ``replaceWhere``, ``partitionOverwriteMode``, ``mergeSchema``); an unknown option or a bad value
is an error naming it. Spark's own options (``path``, ``checkpointLocation``, ...) and ``storage.<key>`` (an
fsspec/s3fs storage option, never logged) pass. docs/spark.md has the table.

Rewrites from PySpark, planned on the driver and run in Spark tasks (:mod:`pyspark_lakefmt.rewrites`)::

    pyspark_lakefmt.delete(spark, "s3://bucket/events", "dt < '2026-01-01'")
    pyspark_lakefmt.compact(spark, "s3://bucket/events", target_file_size=128 << 20)

MERGE of a DataFrame, collected to Arrow on the driver (:mod:`pyspark_lakefmt.merge`)::

    pyspark_lakefmt.merge(spark, uri, df, "t.id = s.id", source_alias="s", target_alias="t") \
        .when_matched_update_all().when_not_matched_insert_all().execute()

SQL functions (:mod:`pyspark_lakefmt.sql_tables`, :mod:`pyspark_lakefmt.sql_procedures`), after one
``pyspark_lakefmt.register(spark)``::

    SELECT * FROM lakefmt_history('s3://bucket/events')
    SELECT * FROM lakefmt_delete('s3://bucket/events', 'dt < ''2026-01-01''')

Of the session conf, only ``spark.sql.sources.partitionOverwriteMode`` counts, and only the write tasks see it:
a batch overwrite that names no scope replaces the partitions written when the tasks saw ``dynamic``, else the
whole table (:func:`pyspark_lakefmt.writer.session_overwrite`).
"""

from __future__ import annotations

from .catalog import table_location
from .merge import merge
from .native import create_view, read
from .rewrites import compact, delete
from .source import LakefmtDataSource
from .sql_register import register

__all__ = [
    "DefaultSource",
    "LakefmtDataSource",
    "compact",
    "create_view",
    "delete",
    "merge",
    "read",
    "register",
    "table_location",
]

#: the name pyspark's data source lookup looks for in a ``pyspark_*`` module
DefaultSource = LakefmtDataSource

