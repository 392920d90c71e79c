"""The ``lakefmt`` Spark data source against real Spark (``local[2]``, one session for the run).

Nothing here registers the data source: pyspark finds the installed ``pyspark_lakefmt`` module by itself.
Covered: batch writes (append, overwrite, one-partition overwrite, createTable/partitionBy) over Spark's types,
read back with Spark and with lakefmt/PyArrow; reads with time travel and filter pushdown; Structured Streaming
(exactly-once over micro-batches, restarts, a replayed batch, complete mode, update mode refused, S3); and bad
input, whose errors must reach the user through Spark's exception text and leave the table unchanged.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.meta.store import MetaStore

UTC = datetime.UTC
FMT = "lakefmt"


# -- helpers -------------------------------------------------------------------------------------------------
def snapshot_ids(table: lakefmt.Table) -> list[int]:
    return [s.id for s in table.snapshots()]


def sorted_rows(df: Any, key: str = "id") -> list[dict[str, Any]]:
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r[key])


def files_under(root: str | Path) -> set[str]:
    root = Path(root)
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def write_source_files(folder: Path, first: int, count: int, rows: int = 5) -> list[int]:
    """``count`` Parquet files of ``rows`` rows each (ids from ``first * rows``); returns the ids written."""
    folder.mkdir(parents=True, exist_ok=True)
    ids: list[int] = []
    for k in range(first, first + count):
        chunk = list(range(k * rows, (k + 1) * rows))
        ids += chunk
        data = pa.table({"id": pa.array(chunk, pa.int64()), "g": pa.array([f"g{i % 3}" for i in chunk])})
        pq.write_table(data, folder / f"part-{k:04d}.parquet")
    return ids


SOURCE_SCHEMA = "id long, g string"


def run_stream(spark: Any, source: Path, target: str, checkpoint: Path, **options: str) -> Any:
    """Stream every file in ``source`` (one per micro-batch) into ``target`` until caught up; the query."""
    writer = (
        spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .writeStream.format(FMT)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start(target)
    query.awaitTermination()
    return query


def stream_user(query: Any) -> str:
    """The sink's default commit user: from the query id Spark keeps in the checkpoint."""
    return "spark-stream-" + hashlib.sha256(str(query.id).encode()).hexdigest()[:16]


def batch_ids(query: Any) -> list[int]:
    """Micro-batches this run of the query executed with input rows."""
    return [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]


# -- auto-registration and types -----------------------------------------------------------------------------
def test_auto_registered_without_register_call(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spark.range(5).write.format(FMT).mode("append").option("createTable", "true").save(uri)
    assert spark.read.format(FMT).load(uri).count() == 5
    assert sorted(lakefmt.open_table(uri).to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]


TYPES_DDL = (
    "id long, i int, f float, x double, s string, b boolean, bin binary, d date, ts timestamp, dec decimal(12,3), "
    "arr array<long>, st struct<a:int,b:string>, m map<string,int>, p string"
)


def _typed_rows() -> list[dict[str, Any]]:
    rows = []
    for n in range(6):
        rows.append(
            {
                "id": n,
                "i": n * 10,
                "f": n + 0.5,
                "x": n * 1.25,
                "s": f"str-{n}",
                "b": n % 2 == 0,
                "bin": bytes([n, 255 - n]),
                "d": datetime.date(2026, 11, 1) + datetime.timedelta(days=n),
                "ts": datetime.datetime(2026, 11, 1, 12, n, 30, 123456, tzinfo=UTC),
                "dec": Decimal(f"{n}.125"),
                "arr": [n, None, n * 2],
                "st": {"a": n, "b": None if n == 1 else f"b{n}"},
                "m": {"k": n, "z": None},
                "p": ["a", "b", "c"][n % 3],
            }
        )
    nulls = dict.fromkeys(rows[0])
    nulls["id"] = 6
    nulls["p"] = "a"
    rows.append(nulls)  # every other column null
    return rows


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row as Spark's collect() and lakefmt's to_pylist() both reduce to: instants in UTC, maps as dicts."""
    out = dict(row)
    if out["ts"] is not None:
        out["ts"] = out["ts"].astimezone(UTC)  # Spark returns naive local time
    if isinstance(out["m"], list):
        out["m"] = dict(out["m"])  # pyarrow lists map items as pairs
    if isinstance(out["bin"], bytearray):
        out["bin"] = bytes(out["bin"])
    return out


def test_batch_round_trip_over_spark_types(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "typed")
    rows = _typed_rows()
    df = spark.createDataFrame([tuple(r.values()) for r in rows], TYPES_DDL).repartition(2)
    df.write.format(FMT).mode("append").option("createTable", "true").option("partitionBy", "p").save(uri)

    table = lakefmt.open_table(uri)
    assert table.partition_keys == ("p",)
    schema = table.schema()
    expected_types = {
        "id": pa.int64(),
        "i": pa.int32(),
        "f": pa.float32(),
        "x": pa.float64(),
        "s": pa.string(),
        "b": pa.bool_(),
        "bin": pa.binary(),
        "d": pa.date32(),
        "ts": pa.timestamp("us", tz="UTC"),
        "dec": pa.decimal128(12, 3),
    }
    for name, typ in expected_types.items():
        assert schema.field(name).type == typ, name
    assert pa.types.is_list(schema.field("arr").type) and schema.field("arr").type.value_type == pa.int64()
    assert pa.types.is_struct(schema.field("st").type) and pa.types.is_map(schema.field("m").type)
    # hive-style partition folders, one commit
    assert {f.partition["p"] for f in table.files()} == {"a", "b", "c"}
    assert all(f.path.startswith(f"p={f.partition['p']}/") for f in table.files())
    assert len(table.snapshots()) == 1

    want = [_comparable(r) for r in rows]
    got_lakefmt = sorted((_comparable(r) for r in table.to_arrow().to_pylist()), key=lambda r: r["id"])
    assert got_lakefmt == want
    got_spark = [_comparable(r) for r in sorted_rows(spark.read.format(FMT).load(uri))]
    assert got_spark == want
    assert spark.read.format(FMT).load(uri).schema == df.schema


# -- batch writes to an existing table -----------------------------------------------------------------------
EVENTS = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])


def test_append_to_table_created_with_lakefmt(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    table = lakefmt.create_table(uri, EVENTS, partition_by=["dt"])
    table.append(pa.table({"id": [0], "dt": ["d0"], "v": [0.5]}, schema=EVENTS))
    # columns in another order than the table's: matched by name
    df = spark.createDataFrame([(f"d{i % 2}", float(i), i) for i in range(1, 9)], "dt string, v double, id long")
    df.write.format(FMT).mode("append").save(uri)
    df.where("id > 6").write.format(FMT).mode("append").save(uri)

    snaps = table.snapshots()
    assert [s.id for s in snaps] == [1, 2, 3]
    assert [s.commit_kind for s in snaps] == [lakefmt.CommitKind.APPEND] * 3
    assert len({s.commit_user for s in snaps}) == 3  # one-off batch writes: a fresh user each
    ids = sorted(table.to_arrow().column("id").to_pylist())
    assert ids == sorted([0, *range(1, 9), 7, 8])
    got = sorted_rows(spark.read.format(FMT).load(uri))
    assert [r["id"] for r in got] == ids
    assert table.schema() == EVENTS  # the table's schema is the table's, whatever Spark sent


def test_overwrite_whole_table_and_one_partition(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    table = lakefmt.create_table(uri, EVENTS, partition_by=["dt"])
    table.append(pa.table({"id": [1, 2, 3, 4], "dt": ["a", "a", "b", "b"], "v": [1.0, 2.0, 3.0, 4.0]}, schema=EVENTS))

    spark.createDataFrame([(10, "a", 0.0), (11, "c", 0.0)], "id long, dt string, v double").write.format(FMT).mode(
        "overwrite"
    ).save(uri)
    assert sorted(table.to_arrow().column("id").to_pylist()) == [10, 11]
    assert table.latest_snapshot().commit_kind == lakefmt.CommitKind.OVERWRITE  # type: ignore[union-attr]

    table.append(pa.table({"id": [20, 21], "dt": ["a", "b"], "v": [0.0, 0.0]}, schema=EVENTS))
    new_a = spark.createDataFrame([(30, "a", 1.0), (31, "a", 1.0)], "id long, dt string, v double")
    new_a.write.format(FMT).mode("overwrite").option("overwritePartition", "dt=a").save(uri)
    got = {(r["dt"], r["id"]) for r in table.to_arrow().to_pylist()}
    assert got == {("a", 30), ("a", 31), ("c", 11), ("b", 21)}
    assert sorted_rows(spark.read.format(FMT).load(uri)) == sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])

    before = snapshot_ids(table)
    outside = spark.createDataFrame([(40, "b", 1.0)], "id long, dt string, v double")
    with pytest.raises(Exception) as exc:  # data outside the partition it claims to replace
        outside.write.format(FMT).mode("overwrite").option("overwritePartition", "dt=a").save(uri)
    assert "outside" in str(exc.value) and "nothing was committed" in str(exc.value)
    with pytest.raises(Exception) as exc:
        new_a.write.format(FMT).mode("append").option("overwritePartition", "dt=a").save(uri)
    assert "overwritePartition needs .mode('overwrite')" in str(exc.value)
    assert snapshot_ids(table) == before


# -- reads: time travel and pushdown -------------------------------------------------------------------------
def test_time_travel_by_snapshot_id_and_as_of(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "history")
    table = lakefmt.create_table(uri, EVENTS)
    assert spark.read.format(FMT).load(uri).count() == 0  # no snapshot yet: empty, with the table's schema
    for n in range(3):
        table.append(pa.table({"id": [n], "dt": [f"d{n}"], "v": [float(n)]}, schema=EVENTS))
        time.sleep(0.02)  # distinct commit instants
    snaps = table.snapshots()
    assert [s.id for s in snaps] == [1, 2, 3]

    def ids(**options: Any) -> list[int]:
        reader = spark.read.format(FMT)
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted(r.id for r in reader.load(uri).collect())

    assert ids() == [0, 1, 2]
    assert ids(snapshotId=1) == [0]
    assert ids(snapshotId="2") == [0, 1]
    assert ids(asOf=snaps[1].time_millis) == [0, 1]  # epoch millis
    assert ids(asOf=snaps[1].time_millis + 1) == [0, 1]
    iso = datetime.datetime.fromtimestamp(snaps[0].time_millis / 1000, UTC).isoformat()
    assert ids(asOf=iso) == [0]  # ISO-8601 with offset
    assert ids(asOf=iso.replace("+00:00", "Z")) == [0]

    with pytest.raises(Exception) as exc:
        ids(snapshotId=9)
    assert "snapshot 9 does not exist" in str(exc.value)
    with pytest.raises(Exception) as exc:
        ids(asOf=snaps[0].time_millis - 60_000)
    assert "no snapshot was committed at or before" in str(exc.value)


@pytest.fixture
def pruned_table(tmp_path: Path) -> lakefmt.Table:
    """Four files: dt a/b x ids 0-9 / 10-19 (dt a), 20-29 / 30-39 (dt b)."""
    table = lakefmt.create_table(str(tmp_path / "pruned"), EVENTS, partition_by=["dt"])
    for k, dt in enumerate(["a", "a", "b", "b"]):
        ids = list(range(k * 10, k * 10 + 10))
        table.append(pa.table({"id": ids, "dt": [dt] * 10, "v": [i / 2 for i in ids]}, schema=EVENTS))
    return table


def test_push_filters_prunes_files(spark: Any, pruned_table: lakefmt.Table) -> None:
    from pyspark.sql.datasource import CaseInsensitiveDict, EqualTo, GreaterThanOrEqual
    from pyspark_lakefmt import LakefmtDataSource

    uri = pruned_table.uri
    all_files = {f.path for f in pruned_table.files()}
    assert len(all_files) == 4
    # what the reader plans when Spark pushes `dt = 'b' AND id >= 30` (partition and min/max pruning)
    source = LakefmtDataSource(CaseInsensitiveDict(path=uri, pushFilters="true"))  # as Spark builds it
    reader = source.reader(source.schema())
    pushed = [EqualTo(("dt",), "b"), GreaterThanOrEqual(("id",), 30)]
    assert list(reader.pushFilters(pushed)) == pushed  # all handed back: Spark still filters the rows
    planned = {f.path for part in reader.partitions() for f in part.files}
    scan = pruned_table.scan(filter=(pc.field("dt") == "b") & (pc.field("id") >= 30))
    assert planned == {f.path for f in scan.files()}
    assert len(planned) == 1 < len(all_files)

    condition = "dt = 'b' AND id >= 30"
    full = spark.read.format(FMT).load(uri)
    expected = sorted_rows(full.where(condition))
    assert [r["id"] for r in expected] == list(range(30, 40))
    pushed_df = spark.read.format(FMT).option("pushFilters", "true").load(uri).where(condition)
    assert sorted_rows(pushed_df) == expected
    assert sorted_rows(spark.read.format(FMT).option("pushFilters", "true").load(uri).where("id < 12 OR v > 18")) == (
        sorted_rows(full.where("id < 12 OR v > 18"))
    )

    # Spark really skips the pruned files: remove one; the pushed-down read never opens it
    gone = min(f.path for f in pruned_table.files() if f.partition["dt"] == "a")
    os.remove(os.path.join(uri, gone))
    assert sorted_rows(spark.read.format(FMT).option("pushFilters", "true").load(uri).where(condition)) == expected
    with pytest.raises(Exception, match="FileNotFoundError"):
        full.where(condition).collect()


# -- streaming -----------------------------------------------------------------------------------------------
def test_stream_exactly_once_across_restarts(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    ids = write_source_files(source, 0, 3)
    # every snapshot is a micro-batch's commit: no automatic compaction
    query = run_stream(spark, source, uri, checkpoint, createTable="true", tableOptions="compaction.auto=false")
    assert batch_ids(query) == [0, 1, 2]

    table = lakefmt.open_table(uri)
    snaps = table.snapshots()
    assert [(s.id, s.commit_identifier) for s in snaps] == [(1, 0), (2, 1), (3, 2)]
    (user,) = {s.commit_user for s in snaps}
    assert user == stream_user(query)
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids
    assert table.commit_user_identifier(user) == 2

    # restart from the same checkpoint with new input: same user, next identifiers
    ids += write_source_files(source, 3, 2)
    query = run_stream(spark, source, uri, checkpoint)
    assert batch_ids(query) == [3, 4]
    snaps = table.snapshots()
    assert [(s.id, s.commit_identifier, s.commit_user) for s in snaps[3:]] == [(4, 3, user), (5, 4, user)]
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids
    assert sorted(r.id for r in spark.read.format(FMT).load(uri).collect()) == ids

    # nothing new: nothing committed
    query = run_stream(spark, source, uri, checkpoint)
    assert batch_ids(query) == []
    assert snapshot_ids(table) == [1, 2, 3, 4, 5]


def test_replayed_micro_batch_is_skipped(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    ids = write_source_files(source, 0, 2)
    run_stream(spark, source, uri, checkpoint, createTable="true")
    table = lakefmt.open_table(uri)
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1]
    before = files_under(uri)

    # as if the driver died after lakefmt published batch 1 but before Spark recorded it: Spark re-runs batch 1
    # (same offsets, same id) and calls the sink's commit again, with new files
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    query = run_stream(spark, source, uri, checkpoint)
    assert batch_ids(query) == [1]  # Spark did re-execute it, rows and all
    assert (checkpoint / "commits" / "1").exists()
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1]  # skipped by dedup
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids  # no duplicate rows

    table.remove_orphan_files(older_than=0)
    after = files_under(uri)
    assert after <= referenced_files(MetaStore(table.io))
    assert {p for p in after if p.endswith(".parquet")} == {f.path for f in table.files()}
    assert after == before  # the replay left nothing behind
    assert table.remove_orphan_files(older_than=0, dry_run=True).total_files == 0

    # and the query goes on from there
    ids += write_source_files(source, 2, 1)
    assert batch_ids(run_stream(spark, source, uri, checkpoint)) == [2]
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1, 2]
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids


def test_new_checkpoint_at_the_same_path_is_a_new_writer(spark: Any, tmp_path: Path) -> None:
    """Resetting a stream (deleting its checkpoint, starting again at the same path) restarts batch ids at 0:
    the default commit user comes from the query id in the checkpoint, so those batches are not taken for
    ones already committed."""
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    ids = write_source_files(source, 0, 2)
    first = run_stream(spark, source, uri, checkpoint, createTable="true")
    shutil.rmtree(checkpoint)
    shutil.rmtree(source)
    ids += write_source_files(source, 2, 2)
    second = run_stream(spark, source, uri, checkpoint)
    assert first.id != second.id and batch_ids(second) == [0, 1]
    table = lakefmt.open_table(uri)
    first_user, second_user = stream_user(first), stream_user(second)
    assert [(s.commit_user, s.commit_identifier) for s in table.snapshots()] == [
        (first_user, 0),
        (first_user, 1),
        (second_user, 0),
        (second_user, 1),
    ]
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids


def _aggregate(spark: Any, source: Path) -> Any:
    return (
        spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source)).groupBy("g").count()
    )


def test_complete_mode_overwrites_each_batch(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "agg")
    ids = write_source_files(source, 0, 2)
    query = (
        _aggregate(spark, source)
        .writeStream.format(FMT)
        .outputMode("complete")
        .option("checkpointLocation", str(checkpoint))
        .option("createTable", "true")
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()
    table = lakefmt.open_table(uri)
    snaps = table.snapshots()
    assert [(s.commit_identifier, s.commit_kind) for s in snaps] == [
        (0, lakefmt.CommitKind.OVERWRITE),
        (1, lakefmt.CommitKind.OVERWRITE),
    ]

    def counts(data: list[int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in data:
            out[f"g{i % 3}"] = out.get(f"g{i % 3}", 0) + 1
        return out

    assert {r["g"]: r["count"] for r in table.to_arrow().to_pylist()} == counts(ids)  # the whole result, once
    first = table.to_arrow(snapshot_id=snaps[0].id).to_pylist()
    assert {r["g"]: r["count"] for r in first} == counts(ids[:5])
    assert {r.g: r["count"] for r in spark.read.format(FMT).load(uri).collect()} == counts(ids)


def test_update_mode_is_refused(spark: Any, tmp_path: Path) -> None:
    source, uri = tmp_path / "in", tmp_path / "agg"
    write_source_files(source, 0, 1)
    with pytest.raises(Exception) as exc:
        query = (
            _aggregate(spark, source)
            .writeStream.format(FMT)
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .option("createTable", "true")
            .trigger(availableNow=True)
            .start(str(uri))
        )
        query.awaitTermination()
    assert "does not support Update mode" in str(exc.value)  # Spark's own check, before any lakefmt code runs
    assert not uri.exists()  # not even created


@pytest.mark.s3
def test_stream_to_s3(spark: Any, tmp_path: Path, s3_store: Any) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", s3_store.uri("stream")
    ids = write_source_files(source, 0, 2)
    storage = {f"storage.{k}": v for k, v in s3_store.storage_options.items()}
    query = run_stream(spark, source, uri, checkpoint, createTable="true", commitUser="s3-writer", **storage)
    assert batch_ids(query) == [0, 1]
    table = lakefmt.open_table(uri, storage_options=s3_store.storage_options)
    assert [(s.commit_user, s.commit_identifier) for s in table.snapshots()] == [("s3-writer", 0), ("s3-writer", 1)]
    assert sorted(table.to_arrow().column("id").to_pylist()) == ids
    reader = spark.read.format(FMT)
    for key, value in storage.items():
        reader = reader.option(key, value)
    assert sorted(r.id for r in reader.load(uri).collect()) == ids


# -- bad input -----------------------------------------------------------------------------------------------
STRICT = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("n", pa.int32())])

MISMATCHES = {
    "missing": ("name string, n int", ["missing column(s) id (not nullable"]),  # a nullable one is written as nulls
    "extra": ("id long, name string, n int, surplus double", ["extra column(s) surplus"]),
    "mistyped": ("id long, name string, n string", ["column 'n' has type string", "expects int32"]),
}


@pytest.fixture(scope="module")
def strict_table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lakefmt.Table]:
    table = lakefmt.create_table(str(tmp_path_factory.mktemp("strict") / "t"), STRICT)
    table.append(pa.table({"id": [1], "name": ["one"], "n": [1]}, schema=STRICT))
    yield table
    assert snapshot_ids(table) == [1]  # no bad write ever committed
    assert table.to_arrow().to_pylist() == [{"id": 1, "name": "one", "n": 1}]


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_batch_schema_mismatch_names_the_column(spark: Any, strict_table: lakefmt.Table, case: str) -> None:
    ddl, needles = MISMATCHES[case]
    row = {"id": 2, "name": "two", "n": 2 if case != "mistyped" else "2", "surplus": 0.5}
    names = [c.split()[0] for c in ddl.split(", ")]
    df = spark.createDataFrame([tuple(row[n] for n in names)], ddl)
    with pytest.raises(Exception) as exc:
        df.write.format(FMT).mode("append").save(strict_table.uri)
    assert "does not match the table schema" in str(exc.value)
    for needle in needles:
        assert needle in str(exc.value)
    assert snapshot_ids(strict_table) == [1]


def test_batch_nulls_in_a_non_nullable_column_fail_in_the_task(spark: Any, strict_table: lakefmt.Table) -> None:
    df = spark.createDataFrame([(None, "x", 1), (3, "y", 2)], "id long, name string, n int")
    with pytest.raises(Exception) as exc:
        df.write.format(FMT).mode("append").save(strict_table.uri)
    assert "column 'id' is not nullable but has 1 null(s)" in str(exc.value)
    assert snapshot_ids(strict_table) == [1]


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_stream_schema_mismatch_names_the_column(
    spark: Any, strict_table: lakefmt.Table, tmp_path: Path, case: str
) -> None:
    ddl, needles = MISMATCHES[case]
    source = tmp_path / "in"
    source.mkdir()
    row = {"id": 2, "name": "two", "n": 2 if case != "mistyped" else "2", "surplus": 0.5}
    names = [c.split()[0] for c in ddl.split(", ")]
    spark.createDataFrame([tuple(row[n] for n in names)], ddl).write.mode("append").parquet(str(source))
    with pytest.raises(Exception) as exc:
        query = (
            spark.readStream.schema(ddl)
            .parquet(str(source))
            .writeStream.format(FMT)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start(strict_table.uri)
        )
        query.awaitTermination()
    assert "does not match the table schema" in str(exc.value)
    for needle in needles:
        assert needle in str(exc.value)
    assert snapshot_ids(strict_table) == [1]


def test_missing_path_is_refused(spark: Any) -> None:
    with pytest.raises(Exception) as exc:
        spark.range(1).write.format(FMT).mode("append").option("createTable", "true").save()
    assert "no table location" in str(exc.value) and ".save(uri)" in str(exc.value)
    with pytest.raises(Exception) as exc:
        spark.read.format(FMT).load()
    assert "no table location" in str(exc.value) and ".load(uri)" in str(exc.value)


def test_spark_refuses_other_save_modes_and_partition_by(spark: Any, tmp_path: Path) -> None:
    """Spark's own refusals for Python data sources (no lakefmt code runs): only append and overwrite, and
    ``.partitionBy`` (partitioning comes from the table, or from the ``partitionBy`` option with createTable)."""
    uri = str(tmp_path / "t")
    writer = spark.range(1).write.format(FMT).option("createTable", "true")
    for mode in ("errorifexists", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            writer.mode(mode).save(uri)
    with pytest.raises(Exception, match="partitioning or clustering columns do not match"):
        writer.mode("append").partitionBy("id").save(uri)
    assert not Path(uri).exists()


def test_not_a_table_without_create_table(spark: Any, tmp_path: Path) -> None:
    uri = tmp_path / "nothing"
    with pytest.raises(Exception) as exc:
        spark.range(3).write.format(FMT).mode("append").save(str(uri))
    text = str(exc.value)
    assert "is not a lakefmt table" in text and "createTable" in text and str(uri) in text
    assert not uri.exists()  # nothing created
    with pytest.raises(Exception) as exc:
        spark.read.format(FMT).load(str(uri)).collect()
    assert "NotATableError" in str(exc.value)

    source = tmp_path / "in"
    write_source_files(source, 0, 1)
    with pytest.raises(Exception) as exc:
        run_stream(spark, source, str(uri), tmp_path / "ck")
    assert "is not a lakefmt table" in str(exc.value) and "createTable" in str(exc.value)
    assert not uri.exists()


def test_stream_without_checkpoint_option_needs_a_commit_user(spark: Any, tmp_path: Path) -> None:
    """With only the session-wide checkpoint root, Spark does not pass checkpointLocation to the sink: lakefmt
    has no stable commit user then, and says so rather than risking duplicates after a restart."""
    uri = tmp_path / "t"
    source = tmp_path / "in"
    write_source_files(source, 0, 1)
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "ckroot"))
    try:
        with pytest.raises(Exception) as exc:
            query = (
                spark.readStream.schema(SOURCE_SCHEMA)
                .parquet(str(source))
                .writeStream.format(FMT)
                .queryName("no_checkpoint_option")
                .option("createTable", "true")
                .trigger(availableNow=True)
                .start(str(uri))
            )
            query.awaitTermination()
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert "stable commit user" in str(exc.value) and "commitUser" in str(exc.value)
    assert not uri.exists()  # refused before anything was created
