"""Spark reads of a key table written from Python: the batch reader and the streaming source return the live rows
only. Their read tasks carry each file's deletion vector (``FileTask.deletion_vector``) to the executors, which
apply it by row position (``Table.read_files``); files have several small row groups, so a mask applied below a
row-group split would drop the wrong rows."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark_lakefmt.options import TableRef, parse_options
from pyspark_lakefmt.reader import Reader
from pyspark_lakefmt.stream_reader import PENDING, StreamReader

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
Row = tuple[int, str, int]


def _rows(ids: range | list[int], v: int = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": ["a" if i % 2 else "b" for i in ids], "v": [v + i for i in ids]}, schema=SCHEMA)


def _key_table(tmp_path: Path, name: str = "t") -> tuple[lakefmt.Table, dict[int, Row]]:
    """A key table after an upsert, a second upsert replacing some keys, a delete by key and a delete by filter;
    and its live rows by id."""
    t = lakefmt.create_table(
        str(tmp_path / name),
        SCHEMA,
        partition_by=["dt"],
        primary_key=["id", "dt"],
        options={"bucket": "2", "write.row-group-rows": "4"},
    )
    live: dict[int, Row] = {}

    def upsert(data: pa.Table) -> None:
        t.upsert(data)
        live.update({r["id"]: (r["id"], r["dt"], r["v"]) for r in data.to_pylist()})

    upsert(_rows(range(60)))
    upsert(_rows(range(0, 70, 4), v=1000))  # replaces keys of the first files, adds 60..68
    t.delete_keys(pa.table({"id": list(range(10, 30)), "dt": ["a" if i % 2 else "b" for i in range(10, 30)]}))
    for i in range(10, 30):
        live.pop(i, None)
    t.delete(pc.field("v") >= 1050)
    for i in [i for i, r in live.items() if r[2] >= 1050]:
        live.pop(i)
    assert t.scan().vectors() and t.latest_snapshot().total_record_count == len(live)
    return t, live


def _sorted(rows: Any) -> list[Row]:
    return sorted((r["id"], r["dt"], r["v"]) for r in rows)


def test_batch_reads_return_live_rows(spark: Any, tmp_path: Path) -> None:
    t, live = _key_table(tmp_path)
    assert _sorted(spark.read.format(FMT).load(t.uri).collect()) == sorted(live.values())
    # Spark's filter, pushed down to prune files (and applied by Spark to the rows)
    pushed = spark.read.format(FMT).option("pushFilters", "true").load(t.uri).where("dt = 'a' AND v >= 1000")
    assert _sorted(pushed.collect()) == sorted(r for r in live.values() if r[1] == "a" and r[2] >= 1000)
    # time travel to the snapshot before the deletes (vectors of the second upsert only)
    assert t.snapshot(2).total_record_count == 63
    before = spark.read.format(FMT).option("snapshotId", "2").load(t.uri).collect()
    assert len(before) == 63 and {r["id"]: r["v"] for r in before}[12] == 1012
    # a tag's read tasks, as they travel to an executor (pickled), carry the vectors
    t.create_tag("latest")
    reader = Reader(TableRef(t.uri), parse_options({"tag": "latest"}, "read"))
    parts = pickle.loads(pickle.dumps(reader.partitions()))
    assert any(f.deletion_vector is not None for p in parts for f in p.files)
    rows = [row for p in parts for b in reader.read(p) for row in b.to_pylist()]
    assert _sorted(rows) == sorted(live.values())


def test_stream_reads_live_rows(spark: Any, tmp_path: Path) -> None:
    t, live = _key_table(tmp_path, "bronze")
    # the initial unit: the snapshot's live rows; then an upsert (an APPEND: its new rows, the new versions of
    # replaced keys) read incrementally, masked as of its snapshot
    r = StreamReader(TableRef(t.uri), {})
    end = r.latestOffset(dict(PENDING), ReadAllAvailable())
    parts = pickle.loads(pickle.dumps(r.partitions(dict(PENDING), end)))
    assert _sorted([row for p in parts for b in r.read(p) for row in b.to_pylist()]) == sorted(live.values())
    r.commit(end)
    # an upsert of new keys only adds rows: read incrementally
    t.upsert(_rows([100, 101], v=5000))
    end2 = r.latestOffset(end, ReadAllAvailable())
    got = _sorted([row for p in r.partitions(end, end2) for b in r.read(p) for row in b.to_pylist()])
    assert got == [(100, "b", 5100), (101, "a", 5101)]
    r.commit(end2)
    # an upsert that replaces live rows is a change: the plain stream stops at it, naming both ways on
    t.upsert(_rows([1, 2, 102], v=5000))
    replacing = t.latest_snapshot().id
    with pytest.raises(
        lakefmt.LakefmtError, match=rf"snapshot {replacing} \(UPSERT.*skipChangeCommits.*readChangeFeed"
    ):
        r.latestOffset(end2, ReadAllAvailable())

    # a real query from a new checkpoint: the latest snapshot's live rows, read on the executors, into a plain table
    live.update({i: (i, "a" if i % 2 else "b", 5000 + i) for i in (1, 2, 100, 101, 102)})
    silver = str(tmp_path / "silver")
    query = (
        spark.readStream.format(FMT)
        .load(t.uri)
        .writeStream.format(FMT)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .option("createTable", "true")
        .trigger(availableNow=True)
        .start(silver)
    )
    query.awaitTermination()
    assert _sorted(lakefmt.open_table(silver).to_arrow().to_pylist()) == sorted(live.values())


def test_stream_from_the_first_snapshot_skips_deletes(tmp_path: Path) -> None:
    """From snapshot 1 with skipChangeCommits: the first upsert's rows as of its own snapshot (the later deletes do
    not mask them), and every commit that replaced or deleted rows skipped whole: the second upsert, which replaced
    keys, and both deletes."""
    t, _ = _key_table(tmp_path)
    r = StreamReader(TableRef(t.uri), {"startingsnapshot": "1", "skipchangecommits": "true"})
    end = r.latestOffset(dict(PENDING), ReadAllAvailable())
    got = _sorted([row for p in r.partitions(dict(PENDING), end) for b in r.read(p) for row in b.to_pylist()])
    first = [(i, "a" if i % 2 else "b", i) for i in range(60)]
    assert got == sorted(first)
