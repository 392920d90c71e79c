"""One call makes lakefmt's SQL functions callable by name in a session: :func:`register`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from .source import LakefmtDataSource
from .sql_common import TableFunction
from .sql_procedures import (
    COMPACT_SCHEMA,
    DELETE_SCHEMA,
    EXPIRE_SCHEMA,
    RESTORE_SCHEMA,
    Compact,
    Delete,
    Expire,
    Restore,
)
from .sql_tables import FILES_SCHEMA, HISTORY_SCHEMA, SNAPSHOTS_SCHEMA, Files, History, Snapshots, TableChanges

__all__ = ["FUNCTIONS", "TIME_TRAVEL_KEYS", "TIME_TRAVEL_OFF", "register"]

#: every SQL function :func:`register` registers: name -> (UDTF class, output schema; None: decided by ``analyze``)
FUNCTIONS: dict[str, tuple[type[TableFunction], str | None]] = {
    "lakefmt_history": (History, HISTORY_SCHEMA),
    "lakefmt_snapshots": (Snapshots, SNAPSHOTS_SCHEMA),
    "lakefmt_files": (Files, FILES_SCHEMA),
    "lakefmt_table_changes": (TableChanges, None),
    "lakefmt_compact": (Compact, COMPACT_SCHEMA),
    "lakefmt_expire": (Expire, EXPIRE_SCHEMA),
    "lakefmt_restore": (Restore, RESTORE_SCHEMA),
    "lakefmt_delete": (Delete, DELETE_SCHEMA),
}


#: the session confs naming the read options Spark takes for its own time travel (``WITH ('versionAsOf' = ...)``,
#: ``spark.read.option('versionAsOf', ...).table(t)``), and their defaults
TIME_TRAVEL_KEYS = {
    "spark.sql.timeTravelVersionKey": "versionAsOf",
    "spark.sql.timeTravelTimestampKey": "timestampAsOf",
}
#: what :func:`register` sets them to: keys no query gives, so that Delta's spellings reach lakefmt's read options
TIME_TRAVEL_OFF = {
    "spark.sql.timeTravelVersionKey": "lakefmt.spark-time-travel-off.version",
    "spark.sql.timeTravelTimestampKey": "lakefmt.spark-time-travel-off.timestamp",
}


def register(
    spark: Any, *, storage_options: Mapping[str, str] | None = None, time_travel_options: bool = True
) -> list[str]:
    """Register the ``lakefmt`` data source and lakefmt's SQL functions (:data:`FUNCTIONS`) in ``spark``'s session,
    so that SQL can call them by name: ``SELECT * FROM lakefmt_history('/data/events')``. Returns their names.

    ``storage_options`` (fsspec/s3fs options, e.g. an S3 endpoint) are used for every table the functions open;
    they travel inside the registered functions to Spark's Python workers, never into a query's text or plan
    string. Calling it again replaces the functions (with new storage options, say). The functions are
    non-deterministic, so Spark never runs one more often than the query asks.

    ``time_travel_options``: Spark takes the read options ``versionAsOf`` and ``timestampAsOf`` of a SQL table
    (``SELECT * FROM ev WITH ('versionAsOf' = '1')``, ``spark.read.option(...).table('ev')``) for its own time
    travel, which a Python data source does not support, so they never reach lakefmt and the query fails
    (``UNSUPPORTED_FEATURE.TIME_TRAVEL``). Spark finds them by the session confs of :data:`TIME_TRAVEL_KEYS`;
    ``register`` points each one that still holds its default at a key no query gives (:data:`TIME_TRAVEL_OFF`),
    so both spellings reach lakefmt as ``snapshotId`` and ``asOf`` do. In a session that also time-travels another
    format's SQL tables by these options, pass ``False`` (its ``VERSION AS OF`` syntax is not affected either way)."""
    from pyspark.sql.functions import udtf

    spark.dataSource.register(LakefmtDataSource)
    if time_travel_options:
        for key, default in TIME_TRAVEL_KEYS.items():
            if spark.conf.get(key, default) == default:
                spark.conf.set(key, TIME_TRAVEL_OFF[key])
    options = dict(storage_options or {})
    for name, (cls, schema) in FUNCTIONS.items():
        handler = cls if not options else _with_storage(cls, options)
        # plain (not Arrow) UDTFs: their rows are few, and Arrow's would need pandas, which a lakefmt install lacks
        fn = udtf(handler, returnType=schema, useArrow=False) if schema else udtf(handler, useArrow=False)
        spark.udtf.register(name, fn)
    return list(FUNCTIONS)


def _with_storage(cls: type[TableFunction], options: dict[str, str]) -> type[TableFunction]:
    """A subclass of ``cls`` that opens tables with ``options``; its ``analyze`` (a static method, which sees no
    class) gets them bound too."""
    attrs: dict[str, Any] = {"storage_options": options}
    analyze = inspect.getattr_static(cls, "analyze", None)
    if isinstance(analyze, staticmethod) and isinstance(analyze.__func__, functools.partial):
        attrs["analyze"] = staticmethod(functools.partial(analyze.__func__.func, options))
    return type(cls.__name__, (cls,), attrs)
