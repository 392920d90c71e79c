"""Options are a contract (real Spark, the shared session): Delta's time-travel spellings read the snapshot they
name, a typo in an option or a table option is an error naming it and the closest valid one (never the default
silently), and a bad value names the option and the value. Each of these used to complete silently."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark_lakefmt import LakefmtDataSource

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
DDL = "id long, dt string"


def history(tmp_path: Path) -> tuple[str, lakefmt.Table]:
    """A table with three snapshots, one row each: ids 0, 1, 2."""
    uri = str(tmp_path / "t")
    table = lakefmt.create_table(uri, SCHEMA)
    for n in range(3):
        table.append(pa.table({"id": [n], "dt": ["a"]}, schema=SCHEMA))
        time.sleep(0.01)  # distinct commit instants
    return uri, table


def read_ids(spark: Any, uri: str, **options: Any) -> list[int]:
    reader = spark.read.format(FMT)
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(r.id for r in reader.load(uri).collect())


SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("dt", StringType())])


def plan(use: str, **options: Any) -> Any:
    """What Spark's planner worker does with these options (``LakefmtDataSource(options).reader(...)`` etc.),
    without the round trip through Spark: for the secondary cases; each habit also goes through real Spark."""
    source = LakefmtDataSource(CaseInsensitiveDict({k: str(v) for k, v in options.items()}))
    if use == "read":
        return source.reader(SPARK_SCHEMA)
    if use == "stream-write":
        return source.streamWriter(SPARK_SCHEMA, False)
    return source.writer(SPARK_SCHEMA, use == "overwrite")


def error_of(action: Any) -> str:
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


def test_delta_time_travel_spellings_read_the_snapshot_they_name(spark: Any, tmp_path: Path) -> None:
    uri, table = history(tmp_path)
    first = table.snapshots()[0]
    assert read_ids(spark, uri, versionAsOf=1) == [0]
    iso = datetime.datetime.fromtimestamp(first.time_millis / 1000, datetime.UTC).isoformat()
    assert read_ids(spark, uri, timestampAsOf=iso) == [0]
    reader = plan("read", path=uri, versionAsOf="2", timestampAsOf=first.time_millis)
    assert (reader.snapshot_id, reader.as_of) == (2, first.time_millis)
    assert plan("read", path=uri, snapshotId=2, versionAsOf=2).snapshot_id == 2  # both spellings, one value
    text = error_of(lambda: plan("read", path=uri, snapshotId=1, versionAsOf=2))
    assert "options snapshotId and versionAsOf name the same setting with different values (1 and 2); give one" in text


def test_an_unknown_option_is_an_error_naming_it_and_the_closest(spark: Any, tmp_path: Path) -> None:
    uri, table = history(tmp_path)
    text = error_of(lambda: read_ids(spark, uri, snapshotIdd=1))
    assert "unknown option 'snapshotidd' for a lakefmt batch read (did you mean snapshotId?)" in text
    assert "Valid options: snapshotId, versionAsOf, asOf, timestampAsOf, pushFilters" in text

    before = [s.id for s in table.snapshots()]
    df = spark.createDataFrame([(9, "a")], DDL)
    text = error_of(lambda: df.write.format(FMT).mode("overwrite").option("overwritePartion", "dt=a").save(uri))
    assert "unknown option 'overwritepartion' for a lakefmt batch write (did you mean overwritePartition?)" in text
    assert [s.id for s in table.snapshots()] == before  # nothing was written
    text = error_of(lambda: plan("overwrite", path=uri, **{"spark.sql.sources.partitionOverwriteMode": "dynamic"}))
    assert "(did you mean partitionOverwriteMode?)" in text
    text = error_of(lambda: plan("append", path=uri, snapshotId=1))
    assert "option snapshotId is not an option of a lakefmt batch write (it is for a lakefmt batch read)" in text
    text = error_of(lambda: plan("stream-write", path=uri, commitUser="u", replaceWhere="dt = 'a'"))
    assert "option replaceWhere is not an option of a lakefmt streaming write (it is for a lakefmt batch write)" in text
    # Spark's own options and storage options pass
    plan("stream-write", path=uri, commitUser="u", checkpointLocation="ck", queryName="q")


def test_a_bad_value_names_the_option_and_the_value(spark: Any, tmp_path: Path) -> None:
    uri, _ = history(tmp_path)
    text = error_of(lambda: read_ids(spark, uri, asOf="yesterday"))
    assert "option asOf: 'yesterday' is not a snapshot time; use ISO-8601 or epoch milliseconds" in text
    text = error_of(lambda: plan("read", path=uri, timestampAsOf="soon"))
    assert "option timestampAsOf: 'soon' is not a snapshot time" in text
    text = error_of(lambda: plan("read", path=uri, versionAsOf="latest"))
    assert "option versionAsOf: 'latest' is not a snapshot id; ids are whole numbers from 1" in text
    text = error_of(lambda: plan("read", path=uri, pushFilters="maybe"))
    assert "option pushFilters: 'maybe' is not a boolean; use true or false" in text
    text = error_of(lambda: plan("overwrite", path=uri, partitionOverwriteMode="dynamc"))
    assert "option partitionOverwriteMode: 'dynamc' is not an overwrite mode; use static or dynamic" in text


def test_table_options_are_checked_and_merge_schema_is_a_boolean(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "new")
    df = spark.createDataFrame([(1, "a")], DDL)

    def create(**options: str) -> None:
        writer = df.write.format(FMT).mode("append").option("createTable", "true")  # a new writer each time
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save(uri)

    text = error_of(lambda: create(tableOptions="target-file-sise=1mb"))
    assert "option tableOptions: unknown table option 'target-file-sise' (did you mean target-file-size?)" in text
    assert not Path(uri).exists() or not any(Path(uri).rglob("*"))  # no table was created
    text = error_of(lambda: plan("append", path=uri, mergeSchema="maybe"))
    assert "option mergeSchema: 'maybe' is not a boolean; use true or false" in text

    create(tableOptions="target-file-size=1mb,user.owner=me", mergeSchema="false")
    table = lakefmt.open_table(uri)
    assert table.options == {"target-file-size": "1mb", "user.owner": "me"}
    # the table exists: tableOptions and partitionBy that differ from it would be silently ignored, so refused
    text = error_of(lambda: plan("append", path=uri, createTable="true", tableOptions="target-file-size=2mb"))
    assert "option tableOptions: target-file-size=2mb (the table has 1mb)" in text
    text = error_of(lambda: plan("append", path=uri, createTable="true", partitionBy="dt"))
    assert "option partitionBy: dt differs from the existing table's partition keys (none)" in text
    assert table.to_arrow().num_rows == 1


def test_stream_read_options_are_checked(spark: Any, tmp_path: Path) -> None:
    uri, _ = history(tmp_path)
    stream = spark.readStream.format(FMT).option("maxFilesPerTriger", 1).load(uri)
    query = stream.writeStream.format("noop").trigger(availableNow=True).start()
    text = error_of(query.awaitTermination)
    assert "unknown option 'maxfilespertriger' for a lakefmt streaming read (did you mean maxFilesPerTrigger?)" in text
