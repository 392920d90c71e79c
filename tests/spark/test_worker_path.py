"""The Python processes of the tests' Spark sessions import the installed pyspark (worker_path/pyspark_site.py):
what the suite's time budget counts on (about 1.2 s of CPU saved for every Python process Spark starts)."""

from __future__ import annotations

from typing import Any


def test_spark_python_workers_import_the_installed_pyspark(spark: Any) -> None:
    def origin(_: Any) -> str:  # defined here: cloudpickle sends it by value
        import sys

        import pyspark

        zips = [p for p in sys.path if p.endswith(".zip") and "pyspark" in p]
        return f"{pyspark.__file__} {zips}"

    got = spark.sparkContext.parallelize([0], 1).map(origin).collect()[0]
    assert ".zip" not in got, f"a Python worker imported pyspark from a zip: {got}"
