"""Partitioning a Spark write, against real Spark (the shared session): the ``partitionBy`` option creates a
partitioned table and is accepted again when it names the table's partitioning; ``DataFrameWriter.partitionBy`` is
refused by Spark itself before any lakefmt code runs, even when it equals the table's (pyspark 4.3 reports no
partitioning for a Python data source), so docs/spark.md points to the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakefmt

FMT = "lakefmt"


def test_the_partition_by_option_and_spark_s_own_partition_by(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, dt string")
    df.write.format(FMT).mode("append").option("createTable", "true").option("partitionBy", "dt").save(uri)
    table = lakefmt.open_table(uri)
    assert table.partition_keys == ("dt",)
    assert sorted(f.partition["dt"] for f in table.files()) == ["a", "b"]

    df.write.format(FMT).mode("append").option("partitionBy", "dt").save(uri)  # the table's own: accepted
    assert table.latest_snapshot().total_record_count == 4  # type: ignore[union-attr]

    with pytest.raises(Exception) as exc:
        df.write.format(FMT).mode("append").option("partitionBy", "id").save(uri)
    assert "option partitionBy: id differs from the existing table's partition keys (dt)" in str(exc.value)
    with pytest.raises(Exception, match="partitioning or clustering columns do not match"):
        df.write.format(FMT).mode("append").partitionBy("dt").save(uri)  # Spark's refusal, even when equal
    assert len(table.snapshots()) == 2  # neither refused write committed anything
