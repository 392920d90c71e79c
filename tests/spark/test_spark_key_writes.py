"""Spark writes into a key table: the batch writer and the streaming sink upsert, whatever task a key lands in.

Spark cannot be told to route rows by bucket from a Python data source, so the rows of one key arrive in several
tasks of one write; the commit settles them (the largest ``sequence.field``), and each micro-batch's commit is
exactly once (a replayed batch is skipped by its commit user and identifier).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64())])


def _live(table: lakefmt.Table) -> dict[int, tuple[str, int]]:
    rows = table.to_arrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "two live rows for one key"
    return {r["id"]: (r["v"], r["seq"]) for r in rows}


def test_batch_write_upserts_keys_spread_over_tasks(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "keyed")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options={"bucket": "3", "sequence.field": "seq"})
    table.upsert(pa.table({"id": [1, 2, 3], "v": ["old"] * 3, "seq": [100, 0, 0]}, schema=SCHEMA))
    # every key 20 times, spread over 4 tasks; the largest seq of each key is in a task of its own
    rows = [(k, f"v{k}-{s}", s) for s in range(20) for k in range(10)]
    df = spark.createDataFrame(rows, "id long, v string, seq long").repartition(4)
    df.write.format(FMT).mode("append").save(uri)

    live = _live(table)
    assert sorted(live) == list(range(10))
    for k in range(10):
        want = ("old", 100) if k == 1 else (f"v{k}-19", 19)  # key 1's live row has the larger seq: it stays
        assert live[k] == want, k
    assert table.latest_snapshot().total_record_count == 10 == table.scan().count()
    read = spark.read.format(FMT).load(uri).collect()
    assert sorted((r.id, r.v) for r in read) == sorted((k, v[0]) for k, v in live.items())


def test_stream_upserts_exactly_once(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "keyed")
    lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options={"bucket": "2", "sequence.field": "seq"})
    source.mkdir()
    for batch in range(3):  # each batch updates keys 0..9 and adds two new ones
        ids = [*range(10), 100 + 2 * batch, 101 + 2 * batch]
        data = pa.table({"id": ids, "v": [f"b{batch}"] * len(ids), "seq": [batch] * len(ids)}, schema=SCHEMA)
        pq.write_table(data, source / f"part-{batch:04d}.parquet")

    def run() -> Any:
        query = (
            spark.readStream.schema("id long, v string, seq long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.format(FMT)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(uri)
        )
        query.awaitTermination()
        return query

    run()
    table = lakefmt.open_table(uri)
    live = _live(table)
    assert sorted(live) == [*range(10), 100, 101, 102, 103, 104, 105]
    assert all(live[k] == ("b2", 2) for k in range(10))
    snaps = table.snapshots()
    assert [s.commit_identifier for s in snaps] == [0, 1, 2]
    assert all(s.properties.get("lakefmt.operation") == "upsert" for s in snaps)

    # a replay of the last batch from the same checkpoint commits nothing more
    committer = table.new_committer(snaps[-1].commit_user)
    assert committer.already_committed(2)
    run()
    assert [s.id for s in table.snapshots()] == [s.id for s in snaps]
    assert _live(table) == live
