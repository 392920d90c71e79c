"""Issue 14 attacked from outside, in the connector: option values and spellings a careless user gives, and
streams resumed against a table that is not the one their checkpoint read. Each once replaced more than the
user named, read the wrong snapshot, or skipped rows, silently.

The connector is driven the way Spark's planner worker drives it (``LakefmtDataSource(options).writer(...)``,
the stream reader's ``latestOffset``/``partitions``), which needs no SparkSession: each of these paths is the same
under real Spark, whose part (lower-casing keys, values as strings) is reproduced here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark_lakefmt import LakefmtDataSource
from pyspark_lakefmt.options import TableRef
from pyspark_lakefmt.stream_reader import PENDING, StreamReader

import lakefmt
from lakefmt.errors import InvalidOptionError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("dt", StringType())])


def source(**options: Any) -> LakefmtDataSource:
    return LakefmtDataSource(CaseInsensitiveDict({k: str(v) for k, v in options.items()}))


def partitioned(tmp_path: Path) -> tuple[str, lakefmt.Table]:
    uri = str(tmp_path / "t")
    table = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    table.append(pa.table({"id": [1, 2, 3], "dt": ["a", "b", "c"]}, schema=SCHEMA))
    return uri, table


# -- overwrites ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["", " , ", ","])
def test_an_empty_overwrite_partition_is_refused_not_the_whole_table(tmp_path: Path, value: str) -> None:
    # .option("overwritePartition", f"dt={day}" if day else "") used to overwrite the whole table
    uri, _ = partitioned(tmp_path)
    with pytest.raises(lakefmt.InvalidPartitionError, match="option overwritePartition: an empty partition"):
        source(path=uri, overwritePartition=value).writer(SPARK_SCHEMA, True)


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    uri, _ = partitioned(tmp_path)
    with pytest.raises(InvalidOptionError, match="option overwritePartition: dt is given twice"):
        source(path=uri, overwritePartition="dt=a,dt=b").writer(SPARK_SCHEMA, True)
    with pytest.raises(InvalidOptionError, match="option tableOptions: target-file-size is given twice"):
        source(path=str(tmp_path / "new"), createTable="true",
               tableOptions="target-file-size=1mb,target-file-size=2mb").writer(SPARK_SCHEMA, False)


def test_an_option_under_the_sql_prefix_is_checked_as_the_option(tmp_path: Path) -> None:
    # ``option.<key>`` passed unchecked (it is how a SQL table's OPTIONS arrive, beside ``<key>``), so
    # .option("option.replaceWhere", ...) was ignored and the write replaced the whole table
    uri, _ = partitioned(tmp_path)
    with pytest.raises(lakefmt.UnknownOptionError, match=r"unknown option 'option\.replacewhere'"):
        source(path=uri, **{"option.replaceWhere": "dt = 'a'"}).writer(SPARK_SCHEMA, True)
    # beside its own key (a SQL table's OPTIONS), it is that key
    writer = source(path=uri, replaceWhere="dt = 'a'", **{"option.replaceWhere": "dt = 'a'"}).writer(SPARK_SCHEMA, True)
    assert writer.overwrite is not None and writer.overwrite.where == "dt = 'a'"


# -- reads -----------------------------------------------------------------------------------------------------
def test_a_snapshot_and_a_time_together_name_both_options(tmp_path: Path) -> None:
    uri, table = partitioned(tmp_path)
    millis = table.snapshots()[0].time_millis
    with pytest.raises(InvalidOptionError, match=r"options versionAsOf and timestampAsOf: give one"):
        source(path=uri, versionAsOf=1, timestampAsOf=millis).reader(SPARK_SCHEMA).partitions()


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "1_000", "+1"])
def test_a_snapshot_id_is_ascii_digits(tmp_path: Path, value: str) -> None:
    uri, _ = partitioned(tmp_path)
    with pytest.raises(InvalidOptionError, match=r"option versionAsOf: .* is not a snapshot id"):
        source(path=uri, versionAsOf=value).reader(SPARK_SCHEMA)
    with pytest.raises(InvalidOptionError, match=r"option maxFilesPerTrigger: .* is not a positive whole number"):
        source(path=uri, maxFilesPerTrigger=value).streamReader(SPARK_SCHEMA)


# -- streams resumed against another table ---------------------------------------------------------------------
def stream_reader(table: lakefmt.Table) -> StreamReader:
    return StreamReader(TableRef(table.uri), {})


def drain(r: StreamReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """Micro-batches until caught up, each committed; the last end offset and every id read."""
    ids: list[int] = []
    for _ in range(20):
        end = r.latestOffset(start, ReadAllAvailable())
        if end == start:
            return end, sorted(ids)
        for part in r.partitions(start, end):
            ids += [i for b in r.read(part) for i in b.column("id").to_pylist()]
        r.commit(end)
        start = end
    raise AssertionError("never caught up")


def recreated(tmp_path: Path, appends: int) -> tuple[dict[str, Any], lakefmt.Table]:
    """A stream's checkpointed offset after reading a table of 5 snapshots, and a new table at the same path
    with ``appends`` snapshots."""
    uri, table = partitioned(tmp_path)
    for k in range(4):
        table.append(pa.table({"id": [10 + k], "dt": ["a"]}, schema=SCHEMA))
    end, ids = drain(stream_reader(table), PENDING)
    assert ids == [1, 2, 3, 10, 11, 12, 13]
    shutil.rmtree(uri)
    table = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    for k in range(appends):
        table.append(pa.table({"id": [100 + k], "dt": ["a"]}, schema=SCHEMA))
    return end, table


@pytest.mark.parametrize("appends", [2, 8])
def test_a_stream_never_resumes_on_a_recreated_table(tmp_path: Path, appends: int) -> None:
    # fewer snapshots: the stream waited silently for snapshot 6, then read from there; more: it read the new
    # table's snapshots 6.. and never its first five
    end, table = recreated(tmp_path, appends)
    r = stream_reader(table)
    with pytest.raises(lakefmt.LakefmtError, match="not the table this stream's checkpoint was reading"):
        r.latestOffset(end, ReadAllAvailable())
    with pytest.raises(lakefmt.LakefmtError, match="not the table this stream's checkpoint was reading"):
        r.partitions(end, {**end, "snapshot": end["snapshot"] + 1})


def test_a_stream_on_a_recreated_table_leaves_no_consumer_record_there(tmp_path: Path) -> None:
    end, table = recreated(tmp_path, 2)
    r = StreamReader(TableRef(table.uri), {"consumerid": "silver"})
    with pytest.raises(lakefmt.LakefmtError, match="not the table this stream's checkpoint was reading"):
        r.latestOffset(end, ReadAllAvailable())
    assert table.consumers() == []  # a record of the old table's position would hold the new table's snapshots
