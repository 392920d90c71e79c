"""The change data feed through Spark: ``.option("readChangeFeed", "true")`` on batch and streaming reads, on the
shared ``local[2]`` session. The core's ``Table.changes`` is the reference the rows are compared with."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
CHANGE_COLUMNS = ["_change_type", "_commit_snapshot", "_commit_version", "_commit_timestamp"]


def key_table(tmp_path: Path, name: str = "t") -> lakefmt.Table:
    table = lakefmt.create_table(str(tmp_path / name), SCHEMA, primary_key=["id"], options={"bucket": "2"})
    table.upsert(pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}, schema=SCHEMA))  # snapshot 1
    return table


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    """(id, v, change type, snapshot) of each change row, sorted."""
    cols = [table.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_snapshot")]
    return sorted(zip(*cols, strict=True))


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"], r["_change_type"], r["_commit_snapshot"]) for r in df.collect())


def test_batch_change_feed_with_versions_and_timestamps(spark: Any, tmp_path: Path) -> None:
    table = key_table(tmp_path)
    table.upsert(pa.table({"id": [2, 5], "v": ["B", "e"]}, schema=SCHEMA))  # 2: an update and an insert
    table.delete_keys(pa.table({"id": [3]}))  # 3
    table.upsert(pa.table({"id": [1], "v": ["A"]}, schema=SCHEMA))  # 4

    def read(**options: object) -> Any:
        r = spark.read.format(FMT).option("readChangeFeed", "true")
        for key, value in options.items():
            r = r.option(key, str(value))
        return r.load(table.uri)

    df = read(startingVersion=2, endingVersion=3)
    assert df.columns == ["id", "v", *CHANGE_COLUMNS]
    assert spark_rows(df) == rows_of(table.changes(1, 3)) == [
        (2, "B", "update_postimage", 2), (2, "b", "update_preimage", 2), (3, "c", "delete", 3), (5, "e", "insert", 2),
    ]  # fmt: skip
    got = df.collect()
    assert all(r["_commit_version"] == r["_commit_snapshot"] for r in got)
    when = {s.id: s.time_millis for s in table.snapshots()}
    assert {r["_commit_snapshot"]: int(r["_commit_timestamp"].timestamp() * 1000) for r in got} == {
        2: when[2], 3: when[3],
    }  # fmt: skip
    assert spark_rows(read(startingVersion=1)) == rows_of(table.changes(0, 4))  # to the latest by default
    at = datetime.datetime.fromtimestamp(when[4] / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    assert spark_rows(read(startingTimestamp=at)) == rows_of(table.changes(3, 4))  # committed at or after it

    with pytest.raises(Exception, match="startingVersion is for a change feed read"):
        spark.read.format(FMT).option("startingVersion", "2").load(table.uri).collect()
    with pytest.raises(Exception, match="endingVersion: snapshot 9 is after the latest snapshot 4"):
        read(startingVersion=2, endingVersion=9).collect()


def collect_stream(spark: Any, uri: str, checkpoint: Path, out: list[tuple[Any, ...]], **options: object) -> None:
    """Run the change feed of ``uri`` as a stream until caught up (Trigger.AvailableNow), its rows into ``out``."""
    r = spark.readStream.format(FMT).option("readChangeFeed", "true")
    for key, value in options.items():
        r = r.option(key, str(value))

    def sink(df: Any, _: int) -> None:
        out.extend(spark_rows(df))

    query = (
        r.load(uri).writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()


def test_stream_of_upserts_and_deletes_with_a_consumer_holding_expiration(spark: Any, tmp_path: Path) -> None:
    table = key_table(tmp_path)
    table.upsert(pa.table({"id": [2, 5], "v": ["B", "e"]}, schema=SCHEMA))
    first = latest(table)
    out: list[tuple[Any, ...]] = []
    checkpoint = tmp_path / "ck"
    # no starting option: the table as of its latest snapshot, as inserts, then the changes after it
    collect_stream(spark, table.uri, checkpoint, out, consumerId="feed")
    assert sorted(out) == [(1, "a", "insert", first), (2, "B", "insert", first), (3, "c", "insert", first),
                           (4, "d", "insert", first), (5, "e", "insert", first)]  # fmt: skip
    assert [(c.consumer_id, c.next_snapshot) for c in table.consumers()] == [("feed", first)]  # the last read

    table.delete_keys(pa.table({"id": [3]}))  # a delete does not stop this stream
    table.upsert(pa.table({"id": [1, 6], "v": ["A", "f"]}, schema=SCHEMA))
    table.upsert(pa.table({"id": [2], "v": ["BB"]}, schema=SCHEMA))
    last = latest(table)
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert table.snapshots()[0].id == first  # the consumer holds the snapshot its next changes are read against
    out.clear()
    collect_stream(spark, table.uri, checkpoint, out, consumerId="feed")
    assert sorted(out) == rows_of(table.changes(first, last))
    assert {(3, "c", "delete"), (1, "a", "update_preimage"), (1, "A", "update_postimage"), (6, "f", "insert"),
            (2, "B", "update_preimage"), (2, "BB", "update_postimage")} == {r[:3] for r in out}  # fmt: skip
    assert [(c.consumer_id, c.next_snapshot) for c in table.consumers()] == [("feed", last)]

    table.delete_consumer("feed")
    table.expire_snapshots(retain_min=1, retain_max=1)
    with pytest.raises(Exception, match=f"need snapshot {last - 1}"):  # its changes need the files before it
        collect_stream(spark, table.uri, tmp_path / "ck2", out, startingVersion=last)


def latest(table: lakefmt.Table) -> int:
    snap = table.latest_snapshot()
    assert snap is not None
    return snap.id


def test_delta_versions_start_at_a_snapshot_and_version_0_is_the_creation(spark: Any, tmp_path: Path) -> None:
    """Delta's spellings are inclusive, as ``Table.changes(starting_version=)``; lakefmt's SQL function keeps
    starting after its snapshot, as ``Table.changes(a, b)``; a bad version is an error naming the option."""
    table = key_table(tmp_path)
    table.upsert(pa.table({"id": [2], "v": ["B"]}, schema=SCHEMA))  # 2
    table.delete_keys(pa.table({"id": [3]}))  # 3

    def read(**options: object) -> Any:
        r = spark.read.format(FMT).option("readChangeFeed", "true")
        for key, value in options.items():
            r = r.option(key, str(value))
        return r.load(table.uri)

    every = rows_of(table.changes(starting_version=0))
    assert spark_rows(read(startingVersion=0)) == spark_rows(read(startingVersion=1)) == every
    assert {r[3] for r in every} == {1, 2, 3}
    assert spark_rows(read(startingVersion=2, endingVersion=2)) == rows_of(table.changes(starting_version=2,
                                                                                         ending_version=2))  # fmt: skip
    assert spark_rows(read(startingVersion=0, endingVersion=0)) == []  # the creation changed no row
    import pyspark_lakefmt

    pyspark_lakefmt.register(spark)
    sql = spark.sql(f"SELECT * FROM lakefmt_table_changes('{table.uri}', 1, 2)")
    assert spark_rows(sql.withColumn("_commit_version", sql["_commit_snapshot"])) == rows_of(table.changes(1, 2))
    for bad, message in (
        ({"startingVersion": "-1"}, "option startingVersion: '-1' is not a version"),
        ({"startingVersion": "x"}, "option startingVersion: 'x' is not a version"),
        ({"startingVersion": 1, "endingVersion": "y"}, "option endingVersion: 'y' is not a version"),
        ({"startingVersion": 5}, "it starts at snapshot 5 (startingVersion, startingTimestamp: inclusive) and ends"),
    ):
        with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
            read(**bad).collect()
