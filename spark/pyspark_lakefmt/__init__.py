"""The ``lakefmt`` Spark data source (pyspark >= 4.1 Python Data Source API).

Installed as the top-level module ``pyspark_lakefmt``, it is found by pyspark without a register call::

    df.write.format("lakefmt").mode("append").save("s3://bucket/events")
    df.writeStream.format("lakefmt").option("checkpointLocation", ck).start("/data/events")
    spark.read.format("lakefmt").option("snapshotId", 12).load("/data/events")

Built on lakefmt's public API only: tasks write with ``Table.new_writer()`` and return the small commit message;
the driver-side ``commit`` publishes with ``Table.new_committer(commit_user).commit(messages, identifier)``.
For streams the identifier is the micro-batch id, so a batch Spark replays after a crash is skipped.

Options (case-insensitive):

=====================  ===================================================================================
``path``               the table location (``save(uri)`` / ``load(uri)`` / ``start(uri)``)
``commitUser``         streams: the commit user (default: derived from the query id Spark keeps in
                       ``<checkpointLocation>/metadata``, stable across restarts from one checkpoint)
``createTable``        ``true``: create a missing table from the data's schema (else a missing table is an error)
``partitionBy``        with ``createTable``: comma-separated partition columns (Spark refuses ``partitionBy``
                       for Python sources)
``tableOptions``       with ``createTable``: table options as ``key=value,key=value``
``overwritePartition`` batch overwrite of one partition: ``dt=2026-11-01[,k=v]``
``snapshotId``         reads: time travel to a snapshot id
``pushFilters``        reads: ``true`` to prune files with Spark's filters (also set the session conf
                       ``spark.sql.python.filterPushdown.enabled=true``)
``asOf``               reads: time travel to an instant (epoch millis or ISO-8601)
``storage.<key>``      an fsspec/s3fs storage option, e.g. ``storage.endpoint_url``; never logged
=====================  ===================================================================================
"""

from __future__ import annotations

from .source import LakefmtDataSource

__all__ = ["DefaultSource", "LakefmtDataSource"]

#: the name pyspark's data source lookup looks for in a ``pyspark_*`` module
DefaultSource = LakefmtDataSource

