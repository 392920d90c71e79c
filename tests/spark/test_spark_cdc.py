"""Change-data input through Spark: a Debezium-shaped change log written into a key table with ``rowkind.field`` by
the batch writer and by the streaming sink, the rows of each key spread over tasks on purpose (a shuffled order,
``repartition(2)``). Each task writes every row, deletes included; the commit settles each key by
``sequence.field`` (the log position) and marks the winning deletes, so the table equals the source's state (a
dict replay of the events). The stream is exactly once: a micro-batch Spark runs again after a lost commit record
is recognised and skipped."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cdc_log import KEY, SCHEMA, Key, Row, change_log, flatten, replay

import lakefmt

FMT = "lakefmt"
DDL = "id long, region string, qty long, op string, lsn long"
OPTIONS = {"bucket": "2", "rowkind.field": "op", "rowkind.format": "debezium", "sequence.field": "lsn"}


def _live(table: lakefmt.Table) -> dict[Key, Row]:
    out: dict[Key, Row] = {}
    for r in table.to_arrow().to_pylist():
        key = (r["id"], r["region"])
        assert key not in out, f"two live rows for {key}"
        out[key] = r
    latest = table.latest_snapshot()
    assert (latest.total_record_count if latest else 0) == len(out)
    return out


def _shuffled(rows: pa.Table, seed: int) -> list[tuple[Any, ...]]:
    order = random.Random(seed).sample(range(rows.num_rows), rows.num_rows)
    return [tuple(r.values()) for r in rows.take(pa.array(order)).to_pylist()]


def test_batch_writes_of_a_change_log_reach_the_source_state(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "cdc")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=list(KEY), options=OPTIONS)
    state: dict[Key, Row] = {}
    for i, batch in enumerate(change_log(seed=5, batches=3, per_batch=60)):
        rows = flatten(batch)
        df = spark.createDataFrame(_shuffled(rows, i), DDL).repartition(2)
        before = table.latest_snapshot().id if table.latest_snapshot() else 0
        df.write.format(FMT).mode("append").save(uri)
        new_state = replay(state, batch)
        assert _live(table) == new_state, f"batch {i}"
        # the batch's change feed: each key it deleted as a delete, each it updated as a pre- and post-image
        kinds: dict[Key, list[str]] = {}
        for r in table.changes(from_snapshot=before).to_pylist():
            kinds.setdefault((r["id"], r["region"]), []).append(r["_change_type"])
        for key in {(r["id"], r["region"]) for r in rows.to_pylist()}:
            was, now = key in state, key in new_state
            want = {
                (True, False): ["delete"],
                (True, True): ["update_preimage", "update_postimage"],
                (False, True): ["insert"],
                (False, False): None,
            }[(was, now)]
            assert kinds.get(key) == want, (key, kinds.get(key))
        state = new_state
    read = spark.read.format(FMT).load(uri).collect()
    assert sorted((r.id, r.region, r.qty) for r in read) == sorted((k[0], k[1], v["qty"]) for k, v in state.items())


def test_a_stream_of_changes_is_applied_exactly_once(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "cdc")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=list(KEY), options=OPTIONS)
    source.mkdir()
    log = change_log(seed=8, batches=3, per_batch=50)
    for i, batch in enumerate(log):
        rows = flatten(batch)
        path = source / f"part-{i:04d}.parquet"
        pq.write_table(rows.take(pa.array(random.Random(i).sample(range(rows.num_rows), rows.num_rows))), path)
        os.utime(path, (1_800_000_000 + i, 1_800_000_000 + i))  # Spark takes the oldest file first: log order

    def run() -> Any:
        query = (
            spark.readStream.schema(DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .repartition(2)  # the rows of one key land in either task
            .writeStream.format(FMT)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(uri)
        )
        query.awaitTermination()
        return query

    run()
    state: dict[Key, Row] = {}
    for batch in log:
        state = replay(state, batch)
    assert _live(table) == state
    snaps = table.snapshots()
    writes = [s for s in snaps if s.commit_kind is not lakefmt.CommitKind.COMPACT]  # key tables compact as written
    assert [s.commit_identifier for s in writes] == [0, 1, 2]

    # the last batch's commit record is lost: Spark runs batch 2 again with the same id, new files; the commit is
    # recognised as done and adds nothing (its files are discarded)
    for name in ("2", ".2.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    files_before = sorted(p.name for p in Path(uri).rglob("*.parquet"))
    query = run()
    assert [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0] == [2]  # Spark did run it again
    assert [s.id for s in table.snapshots()] == [s.id for s in snaps]
    assert _live(table) == state
    assert sorted(p.name for p in Path(uri).rglob("*.parquet")) == files_before


def test_an_unknown_row_kind_fails_the_job_and_changes_nothing(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "cdc")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=list(KEY), options=OPTIONS)
    table.append(pa.Table.from_pylist([{"id": 1, "region": "us", "qty": 1, "op": "c", "lsn": 1}], schema=SCHEMA))
    rows = [(2, "us", 2, "c", 2), (1, "us", 3, "+D", 3), (3, "eu", 4, "u", 4)]
    with pytest.raises(Exception, match=r"unknown row kind\(s\) '\+D'"):
        spark.createDataFrame(rows, DDL).repartition(2).write.format(FMT).mode("append").save(uri)
    assert len(table.snapshots()) == 1
    assert [(r["id"], r["qty"]) for r in table.to_arrow().to_pylist()] == [(1, 1)]
