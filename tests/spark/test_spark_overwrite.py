"""Overwrites replace exactly what the user named (real Spark, the shared session): ``replaceWhere`` on partition
columns, ``partitionOverwriteMode=dynamic`` (the option, and Spark's session conf, which the tasks see), and a row
outside the named scope failing the task before any file is written. Each of these used to replace the whole
table, or leave the tasks' files behind, silently."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark_lakefmt import LakefmtDataSource

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


CONF = "spark.sql.sources.partitionOverwriteMode"


@contextmanager
def session_conf(spark: Any, value: str) -> Iterator[None]:
    """Spark's session conf set for the block, and unset after it whatever happens: other tests share the session."""
    spark.conf.set(CONF, value)
    try:
        yield
    finally:
        spark.conf.unset(CONF)


def test_the_session_conf_dynamic_replaces_only_the_partitions_written(spark: Any, tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    with session_conf(spark, "dynamic"):
        spark.createDataFrame([(10, "a", 1), (11, "d", 1)], DDL).write.format(FMT).mode("overwrite").save(uri)
        assert content(table) == [("a", 10), ("b", 3), ("c", 4), ("d", 11)]
        assert table.latest_snapshot().commit_kind is lakefmt.CommitKind.OVERWRITE  # type: ignore[union-attr]
        # no rows: Spark still runs a task, which reports the conf, and a dynamic overwrite of nothing replaces
        # nothing (replacing the whole table, for want of knowing the conf, would delete a, b, c and d)
        spark.createDataFrame([], DDL).write.format(FMT).mode("overwrite").save(uri)
        assert content(table) == [("a", 10), ("b", 3), ("c", 4), ("d", 11)] and len(table.snapshots()) == 2
        # an explicit scope wins over the conf
        one_b = spark.createDataFrame([(12, "b", 1)], DDL)
        one_b.write.format(FMT).mode("overwrite").option("replaceWhere", "dt = 'b'").save(uri)
        assert content(table) == [("a", 10), ("b", 12), ("c", 4), ("d", 11)]
        one_b.write.format(FMT).mode("overwrite").option("partitionOverwriteMode", "static").save(uri)
        assert content(table) == [("b", 12)]


def test_the_session_conf_static_or_unset_replaces_the_table(spark: Any, tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    with session_conf(spark, "static"):
        spark.createDataFrame([(10, "a", 1)], DDL).write.format(FMT).mode("overwrite").save(uri)
    assert content(table) == [("a", 10)]
    # unset, with no rows (one empty task): the whole table, so an empty overwrite still empties it
    spark.createDataFrame([(11, "b", 1)], DDL).where("false").write.format(FMT).mode("overwrite").save(uri)
    assert content(table) == [] and len(table.snapshots()) == 3


SPARK_SCHEMA = StructType(
    [StructField("id", LongType()), StructField("dt", StringType()), StructField("v", LongType())]
)


def planned_overwrite(uri: str, **options: str) -> Any:
    """The writer Spark's planner gets for ``.mode('overwrite')`` with these options, used without a Spark job: to
    hand ``commit`` what no real job produces (no message at all, tasks that disagree)."""
    return LakefmtDataSource(CaseInsensitiveDict({"path": uri, **options})).writer(SPARK_SCHEMA, True)


def test_an_overwrite_whose_mode_no_task_reported_commits_nothing(tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    before, snaps = files_under(uri), len(table.snapshots())
    writer = planned_overwrite(uri)
    for messages in ([], [None, None]):  # Spark ran no task, or none returned a message
        with pytest.raises(lakefmt.InvalidOptionError) as info:
            writer.commit(messages)
        assert (
            "this overwrite names no scope and no write task reported the session conf "
            "spark.sql.sources.partitionOverwriteMode (Spark ran no task), so lakefmt cannot tell whether to replace "
            "the whole table or only the partitions written, and guesses neither; nothing was committed"
        ) in str(info.value)
    rows = pa.RecordBatch.from_pylist([{"id": 10, "dt": "d", "v": 1}], schema=SCHEMA)
    written = [writer.write(iter([rows])) for _ in range(2)]
    assert [m.overwrite_mode for m in written] == [None, None]  # outside a Spark task: not known
    disagree = [dataclasses.replace(written[0], overwrite_mode="dynamic"), written[1]]
    with pytest.raises(lakefmt.InvalidOptionError, match=f"saw the session conf {CONF} as dynamic, static; one job"):
        writer.commit(disagree)
    assert files_under(uri) == before and len(table.snapshots()) == snaps  # the refused tasks' files are gone
    # said with the option: the whole table, with or without a message
    planned_overwrite(uri, partitionOverwriteMode="static").commit([])
    assert content(table) == []


def test_the_session_conf_dynamic_on_an_unpartitioned_table_is_spark_s_static(tmp_path: Path) -> None:
    """As in Spark's file sources, dynamic applies to partitioned tables only: an empty overwrite empties."""
    uri = str(tmp_path / "flat")
    table = lakefmt.create_table(uri, SCHEMA)
    table.append(pa.table({"id": [1], "dt": ["a"], "v": [0]}, schema=SCHEMA))
    writer = planned_overwrite(uri)
    empty = dataclasses.replace(writer.write(iter([])), overwrite_mode="dynamic")
    writer.commit([empty])
    assert content(table) == [] and len(table.snapshots()) == 2
