"""A local SparkSession set up the way lakefmt's jobs, tests and benchmarks run Spark: ``local[2]``, no UI, two
shuffle partitions, UTC, and Python workers on this interpreter (so executors and the driver-side commit
worker import the same lakefmt)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["local_session"]

DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


def local_session(
    app_name: str,
    conf: Mapping[str, str] | None = None,
    *,
    log_config: Path | None = None,
    java_options: str = "",
) -> Any:
    """Get or create the session. ``conf`` adds to (or overrides) the defaults; ``log_config`` is a log4j2
    properties file for the driver; ``java_options`` are extra driver JVM flags. Spark's log level is ERROR."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    flags = " ".join(f for f in (java_options, f"-Dlog4j2.configurationFile={log_config.as_uri()}"
                                 if log_config else "") if f)
    if flags:
        builder = builder.config("spark.driver.extraJavaOptions", flags)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
