"""Schema evolution through the Spark connector (real Spark, ``local[2]``): ``mergeSchema`` on batch and
streaming writes, a replayed micro-batch after a schema change skipped, a running stream that another writer
changes the schema under, reads of the current schema and time travel to an older one, and streaming reads
across a change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark_lakefmt.evolution import stream_readable, write_schema

import lakefmt
from lakefmt.commit.schema_change import OPERATION_PROPERTY, SCHEMA_CHANGE_OPERATION

FMT = "lakefmt"
BASE = pa.schema([("id", pa.int64()), ("g", pa.string())])


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "g": [f"g{i % 3}" for i in ids]})


def _source_file(folder: Path, k: int, rows: int = 4) -> list[int]:
    """Input file ``k`` of a file-source stream: ``rows`` rows, ids from ``k * rows``."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = list(range(k * rows, (k + 1) * rows))
    pq.write_table(_rows(ids), folder / f"part-{k:04d}.parquet")
    return ids


def _by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def _schema_changes(table: lakefmt.Table) -> list[lakefmt.Snapshot]:
    return [s for s in table.snapshots() if (s.properties or {}).get(OPERATION_PROPERTY) == SCHEMA_CHANGE_OPERATION]


def _country(ids: Any) -> Any:
    return F.concat(F.lit("c"), (ids % 2).cast("string"))


# -- batch writes -------------------------------------------------------------------------------------------
def test_batch_merge_schema_adds_the_new_columns_and_is_refused_without_it(spark: Any, tmp_path: Path) -> None:
    table = lakefmt.create_table(str(tmp_path / "t"), BASE)
    table.append(_rows([1, 2]))
    df = spark.createDataFrame([(3, "g0", "fr", (7,))], "id long, g string, country string, info struct<a:int>")

    with pytest.raises(Exception) as exc:  # without mergeSchema: the mismatch it always was, and a hint
        df.write.format(FMT).mode("append").save(table.uri)
    assert "extra column(s) country, info not in the table" in str(exc.value)
    assert ".option('mergeSchema', 'true') adds the data's new columns" in str(exc.value)
    assert [s.id for s in table.schemas()] == [0] and len(table.snapshots()) == 1

    df.write.format(FMT).mode("append").option("mergeSchema", "true").save(table.uri)
    table = lakefmt.open_table(table.uri)  # changed by another process: a fresh look
    schema = table.table_schema()
    assert schema.id == 1 and schema.arrow_schema.names == ["id", "g", "country", "info"]
    assert [f.nullable for f in schema.arrow_schema] == [True, True, True, True]
    expected = [
        {"id": 1, "g": "g1", "country": None, "info": None},
        {"id": 2, "g": "g2", "country": None, "info": None},
        {"id": 3, "g": "g0", "country": "fr", "info": {"a": 7}},
    ]
    assert _by_id(table.to_arrow().to_pylist()) == expected  # (Spark's reads: test_reads_use_...)
    # the change is a snapshot of its own, then the data (later writes find nothing to add: the stream tests)
    assert [s.id for s in _schema_changes(table)] == [2] and table.latest_snapshot().schema_id == 1  # type: ignore[union-attr]


def test_a_write_matching_an_older_schema_is_written_under_it(tmp_path: Path) -> None:
    """The driver-side choice of the schema the tasks write under (no Spark job needed)."""
    table = lakefmt.create_table(str(tmp_path / "t"), BASE)
    with table.update_schema() as u:
        u.add_column("country", pa.string()).rename_column("g", "grp")
    old, new = BASE, table.schema()
    assert write_schema(table, new, merge=False).id == 1
    assert write_schema(table, old, merge=False).id == 0  # lacks an added column, uses a renamed one's old name
    with table.update_schema() as u:
        u.drop_column("country")
    assert write_schema(table, old, merge=False).id == 0
    with pytest.raises(lakefmt.SchemaMismatchError, match=r"extra column\(s\) country"):
        write_schema(table, new, merge=False)  # it holds a column dropped since: never silently lost
    assert write_schema(table, new, merge=True).id == 3  # merge adds it again, as a new column
    assert table.table_schema().column_ids == {"id": 1, "grp": 2, "country": 4}


def test_a_merge_write_refused_for_another_mismatch_changes_nothing(tmp_path: Path) -> None:
    table = lakefmt.create_table(str(tmp_path / "t"), BASE)
    bad = pa.schema([("id", pa.string()), ("g", pa.string()), ("country", pa.string())])  # id: another type
    with pytest.raises(lakefmt.SchemaMismatchError, match="column 'id' has type string, the table expects int64"):
        write_schema(table, bad, merge=True)
    assert [s.id for s in table.schemas()] == [0] and table.snapshots() == []


# -- streaming writes ---------------------------------------------------------------------------------------
def _start(spark: Any, source: Path, uri: str, checkpoint: Path, *, country: bool, **options: str) -> Any:
    df = spark.readStream.schema("id long, g string").option("maxFilesPerTrigger", 1).parquet(str(source))
    if country:
        df = df.withColumn("country", _country(F.col("id")))
    writer = df.writeStream.format(FMT).option("checkpointLocation", str(checkpoint))
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start(uri)


def test_stream_merge_schema_and_a_replayed_batch_after_the_change_is_skipped(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    lakefmt.create_table(uri, BASE)
    before = _source_file(source, 0) + _source_file(source, 1)
    _start(spark, source, uri, checkpoint, country=False).awaitTermination()
    table = lakefmt.open_table(uri)
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1]

    # the driver died after lakefmt published batch 1, before Spark recorded it; the query is restarted with a
    # new column: Spark replays batch 1 (same id, rows now with the column), then runs batch 2
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    after = _source_file(source, 2)
    query = _start(spark, source, uri, checkpoint, country=True, mergeSchema="true")
    query.awaitTermination()
    assert [p["batchId"] for p in query.recentProgress if p["numInputRows"]] == [1, 2]

    table = lakefmt.open_table(uri)
    snaps = table.snapshots()
    data = [s for s in snaps if s not in _schema_changes(table)]
    assert [s.commit_identifier for s in data] == [0, 1, 2]  # the replay of batch 1 was skipped
    assert len(_schema_changes(table)) == 1 and [s.id for s in table.schemas()] == [0, 1]
    assert data[1].schema_id == 0 and data[2].schema_id == 1
    rows = _by_id(table.to_arrow().to_pylist())
    assert [r["id"] for r in rows] == before + after
    assert all(r["country"] is None for r in rows if r["id"] in before)  # committed before the change, once
    assert all(r["country"] == f"c{r['id'] % 2}" for r in rows if r["id"] in after)


def test_a_running_stream_keeps_going_when_another_writer_changes_the_schema(spark: Any, tmp_path: Path) -> None:
    """A column added and another renamed by someone else between two micro-batches of one running query: the
    query's data matches the schema it started with, which the new one reads whole, so it keeps writing."""
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    table = lakefmt.create_table(uri, BASE)
    ids = _source_file(source, 0)
    df = spark.readStream.schema("id long, g string").parquet(str(source))
    query = df.writeStream.format(FMT).option("checkpointLocation", str(checkpoint)).start(uri)
    try:
        query.processAllAvailable()
        with table.update_schema() as u:
            u.add_column("country", pa.string()).rename_column("g", "grp")
        ids += _source_file(source, 1)
        query.processAllAvailable()
        assert query.exception() is None and query.isActive
    finally:
        query.stop()
    table = lakefmt.open_table(uri)
    rows = _by_id(table.to_arrow().to_pylist())
    assert rows == [{"id": i, "grp": f"g{i % 3}", "country": None} for i in ids]
    last = table.latest_snapshot()
    assert last is not None and last.schema_id == 1 and last.commit_identifier == 1


# -- reads --------------------------------------------------------------------------------------------------
def test_reads_use_the_current_schema_and_time_travel_the_snapshots(spark: Any, tmp_path: Path) -> None:
    table = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int32()), ("g", pa.string())]))
    table.append(pa.table({"id": pa.array([1, 2], pa.int32()), "g": ["a", "b"]}))
    first = table.latest_snapshot()
    assert first is not None
    stale = spark.read.format(FMT).load(table.uri)  # defined now, run after the change
    with table.update_schema() as u:
        u.update_column("id", pa.int64()).rename_column("g", "grp").add_column("n", pa.float64())
    table.append(pa.table({"id": [2**40], "grp": ["c"], "n": [0.5]}))

    latest = spark.read.format(FMT).load(table.uri)
    assert latest.schema.simpleString() == "struct<id:bigint,grp:string,n:double>"
    assert _by_id([r.asDict() for r in latest.collect()]) == [
        {"id": 1, "grp": "a", "n": None},
        {"id": 2, "grp": "b", "n": None},
        {"id": 2**40, "grp": "c", "n": 0.5},
    ]
    pushed = spark.read.format(FMT).option("pushFilters", "true").load(table.uri).where("grp = 'b'")
    assert [r.id for r in pushed.collect()] == [2]  # a filter on the renamed column, over a file of schema 0

    # time travel reads the old snapshot's rows under the current schema: by field id, the added column null
    for option, value in (("snapshotId", first.id), ("versionAsOf", first.id), ("asOf", first.time_millis)):
        old = spark.read.format(FMT).option(option, str(value)).load(table.uri)
        assert old.schema.simpleString() == "struct<id:bigint,grp:string,n:double>", option
        assert _by_id([r.asDict() for r in old.collect()]) == [
            {"id": 1, "grp": "a", "n": None}, {"id": 2, "grp": "b", "n": None}
        ]

    with pytest.raises(Exception) as exc:
        stale.collect()
    assert "this DataFrame was defined with the columns struct<id:int,g:string>" in str(exc.value)
    assert "load the table again" in str(exc.value)


def test_a_streaming_read_follows_added_columns_and_stops_at_a_change_it_cannot_show(
    spark: Any, tmp_path: Path
) -> None:
    table = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int32()), ("g", pa.string())]))
    table.append(pa.table({"id": pa.array([1], pa.int32()), "g": ["a"]}))
    checkpoint = tmp_path / "ck"

    def start(name: str) -> Any:
        stream = spark.readStream.format(FMT).load(table.uri)
        writer = stream.writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
        return writer.start(str(tmp_path / name))

    def rows(name: str) -> list[dict[str, Any]]:  # the sink's files (its log starts at the restart's batch)
        files = sorted((tmp_path / name).glob("part-*.parquet"))
        return _by_id([r for f in files for r in pq.read_table(f).to_pylist()])

    query = start("evolving_read")
    try:
        query.processAllAvailable()
        with table.update_schema() as u:  # an added column and a rename: the running query keeps its columns
            u.add_column("n", pa.float64()).rename_column("g", "grp")
        table.append(pa.table({"id": pa.array([2], pa.int32()), "grp": ["b"], "n": [0.5]}))
        query.processAllAvailable()
        assert rows("evolving_read") == [{"id": 1, "g": "a"}, {"id": 2, "g": "b"}]

        with table.update_schema() as u:  # a widened column: its values may not fit the query's int
            u.update_column("id", pa.int64())
        table.append(pa.table({"id": [2**40], "grp": ["c"], "n": [1.5]}))
        with pytest.raises(Exception) as exc:
            query.processAllAvailable()
    finally:
        query.stop()
    assert "column 'id' (field id 1) is a int64 in schema 2, not a int32" in str(exc.value)
    assert "Restart the query: it then reads with the table's current schema" in str(exc.value)

    query = start("restarted_read")  # restarted from its checkpoint: the new schema, from where it stopped
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows("restarted_read") == [{"id": 2**40, "grp": "c", "n": 1.5}]


def test_stream_readable_rules() -> None:
    base = lakefmt.TableSchema(0, pa.schema([pa.field("id", pa.int32(), nullable=False), ("g", pa.string())]))
    from lakefmt.spec.evolution.editor import SchemaEditor

    def change(f: Any) -> lakefmt.TableSchema:
        e = SchemaEditor(base)
        f(e)
        out = e.result()
        assert out is not None
        return out

    assert stream_readable(change(lambda e: e.add_column("n", pa.int8())), base) is None
    assert stream_readable(change(lambda e: e.rename_column("g", "grp")), base) is None
    assert stream_readable(base, change(lambda e: e.drop_column("g"))) is None  # an older schema's files
    assert "was dropped" in str(stream_readable(change(lambda e: e.drop_column("g")), base))
    assert "may hold nulls" in str(stream_readable(change(lambda e: e.make_nullable("id")), base))
