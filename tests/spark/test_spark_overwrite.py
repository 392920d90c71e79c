"""Overwrites replace exactly what the user named (real Spark, the shared session): ``replaceWhere`` on partition
columns, ``partitionOverwriteMode=dynamic``, and a row outside the named scope failing the task before any file
is written. Each of these used to replace the whole table, or leave the tasks' files behind, silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
DDL = "id long, dt string, v long"


def partitioned(tmp_path: Path) -> tuple[str, lakefmt.Table]:
    """Partitioned by dt: ids 1, 2 in a; 3 in b; 4 in c."""
    uri = str(tmp_path / "t")
    table = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    table.append(pa.table({"id": [1, 2, 3, 4], "dt": ["a", "a", "b", "c"], "v": [0, 0, 0, 0]}, schema=SCHEMA))
    return uri, table


def content(table: lakefmt.Table) -> list[tuple[str, int]]:
    return sorted((r["dt"], r["id"]) for r in table.to_arrow().to_pylist())


def files_under(root: str) -> set[str]:
    return {p.relative_to(root).as_posix() for p in Path(root).rglob("*") if p.is_file()}


def test_replace_where_replaces_the_matching_partitions_only(spark: Any, tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    df = spark.createDataFrame([(10, "b", 1), (11, "c", 1)], DDL)
    df.write.format(FMT).mode("overwrite").option("replaceWhere", "dt IN ('b', 'c')").save(uri)
    assert content(table) == [("a", 1), ("a", 2), ("b", 10), ("c", 11)]
    snap = table.latest_snapshot()
    assert snap is not None and snap.commit_kind is lakefmt.CommitKind.OVERWRITE and snap.delta_record_count == 0


def test_replace_where_refuses_a_data_column_and_rows_outside_it(spark: Any, tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    before, snaps = files_under(uri), len(table.snapshots())
    # one task with both rows: the task that meets the b row is the only one, so no other task's file (an
    # orphan of a failed job, like any) can remain; the failing task itself must leave nothing
    df = spark.createDataFrame([(10, "a", 1), (11, "b", 1)], DDL).coalesce(1)
    with pytest.raises(Exception) as info:
        df.write.format(FMT).mode("overwrite").option("replaceWhere", "v > 0").save(uri)
    assert "option replaceWhere: 'v > 0' refers to v, which is not a partition column (partition columns: dt)" in (
        str(info.value)
    )
    with pytest.raises(Exception) as info:  # the b row: found in its task before a file is written
        df.write.format(FMT).mode("overwrite").option("replaceWhere", "dt = 'a'").save(uri)
    assert (
        "the data to overwrite the partitions where dt = 'a' has 1 row(s) outside it (the first in partition "
        "{'dt': 'b'}); nothing was committed"
    ) in str(info.value)
    with pytest.raises(Exception) as info:
        df.write.format(FMT).mode("overwrite").option("overwritePartition", "dt=a").save(uri)
    assert "the data to overwrite partition {'dt': 'a'} has 1 row(s) outside it" in str(info.value)
    assert files_under(uri) == before and len(table.snapshots()) == snaps  # no commit, no file left behind
    with pytest.raises(Exception) as info:
        df.write.format(FMT).mode("overwrite").option("replaceWhere", "dt = 'a'").option(
            "partitionOverwriteMode", "dynamic").save(uri)
    assert "options replaceWhere and partitionOverwriteMode are two overwrite scopes; give one" in str(info.value)
    with pytest.raises(Exception) as info:
        df.write.format(FMT).mode("append").option("replaceWhere", "dt = 'a'").save(uri)
    assert "option replaceWhere needs .mode('overwrite') (this write appends)" in str(info.value)


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(spark: Any, tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    df = spark.createDataFrame([(10, "a", 1), (11, "d", 1)], DDL)
    df.write.format(FMT).mode("overwrite").option("partitionOverwriteMode", "dynamic").save(uri)
    assert content(table) == [("a", 10), ("b", 3), ("c", 4), ("d", 11)]
    assert [s.commit_kind for s in table.snapshots()][-1] is lakefmt.CommitKind.OVERWRITE
    assert len(table.snapshots()) == 2  # one commit
