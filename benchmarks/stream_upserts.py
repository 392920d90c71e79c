"""Spark streaming upserts into a key table against the append sink on the same rows.

One stream, two sinks, same machine: the input is a folder of 10 Parquet files (one per micro-batch) of rows
``id int64, amount double, user string, note string``; 100k rows each (10k in quick mode). File 0 holds new
keys only; every later file holds 50% updates (keys drawn at random from those written before) and 50% new
keys, in a shuffled order, so an update's key usually lives in an older file of its bucket. The stream reads them
with ``readStream.parquet(...)``, ``maxFilesPerTrigger=1`` and ``trigger(availableNow=True)``: 10 micro-batches.
Each query writes a fresh table with a fresh checkpoint:

* ``upsert``: a key table (``primary_key=["id"]``, ``bucket=2``, the default deduplicate merge engine): the sink's
  tasks write the rows, the commit looks up each key and marks the replaced rows in deletion vectors;
* ``append``: a table without a key, the same schema: the sink appends every row.

Both run in one SparkSession (``local[2]``, ``spark.sql.shuffle.partitions=2``) in a fresh interpreter, after a
small warm-up query per side, ``reps`` times each, interleaved. Measured per query: wall time from ``start()``
to the end of ``awaitTermination()`` (rows/s end to end), the micro-batches' ``triggerExecution`` times, the CPU
time of the process tree (JVM + Python workers), and the result (the upsert table's live rows must be the number
of distinct keys; the append table's all rows).

Target: upsert rows/s end to end >= 0.7 x append's (best of reps on each side).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import LOG4J, Comparison, Result, drop_tree, progress, run_spark_child, tree_cpu_s

NAME = "stream_upserts"
TARGET_RATIO = 0.7
SIDES = ("upsert", "append")
BATCHES = 10
UPDATE_SHARE = 0.5
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("amount", pa.float64()), ("user", pa.string()), ("note", pa.string()),
])


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"rows_per_batch": 10_000, "batches": BATCHES, "reps": 1, "warmup_rows": 2_000}
    return {"rows_per_batch": 100_000, "batches": BATCHES, "reps": 2, "warmup_rows": 2_000}


def run(quick: bool, workdir: Path) -> Result:
    sizes = _sizes(quick)
    per, batches = sizes["rows_per_batch"], sizes["batches"]
    rows = per * batches
    result = Result(NAME, "quick" if quick else "full", {
        **sizes,
        "columns": [str(f) for f in SCHEMA],
        "update_share": UPDATE_SHARE,
        "input": "Parquet files, one per micro-batch, read by readStream.parquet with maxFilesPerTrigger=1",
        "key_table": "primary_key=[id], bucket=2, merge-engine deduplicate (default)",
        "spark": "local[2], spark.sql.shuffle.partitions=2, trigger availableNow, one SparkSession",
        "statistic": "best of reps for rows/s; medians for latencies (all runs reported)",
    })
    root = workdir / NAME
    drop_tree(root)
    root.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        inputs = _write_input(root / "input", per, batches, seed=1)
        _write_input(root / "warmup-input", sizes["warmup_rows"], 2, seed=2)
        progress_line = f"input: {rows:,} rows in {batches} files, {inputs['distinct_keys']:,} distinct keys"
        print(f"[{NAME}] {progress_line} ({time.perf_counter() - t0:.1f} s)", flush=True)
        (root / "log4j2.properties").write_text(LOG4J)
        child = run_spark_child(NAME, "benchmarks.stream_upserts", ["--child", str(root), json.dumps(sizes)])
    finally:
        drop_tree(root)

    runs: dict[str, list[dict[str, Any]]] = child["runs"]
    expected = {"upsert": inputs["distinct_keys"], "append": rows}
    for side, rs in runs.items():
        for r in rs:
            if r["live_rows"] != expected[side]:
                raise RuntimeError(f"{side} left {r['live_rows']} live rows, expected {expected[side]}")
    best_wall = {s: min(r["wall_s"] for r in runs[s]) for s in SIDES}
    rps = {s: rows / best_wall[s] for s in SIDES}
    warm = {s: statistics.median(statistics.median(b["trigger_s"] for b in r["batches"][1:]) for r in runs[s])
            for s in SIDES}
    cpu = {s: min(r["tree_cpu_s"] for r in runs[s]) if all(r["tree_cpu_s"] is not None for r in runs[s]) else None
           for s in SIDES}
    result.comparisons += [
        Comparison("stream rows/s end to end: upsert (key table) vs append", rps["upsert"], rps["append"], "rows/s",
                   rps["upsert"] / rps["append"], TARGET_RATIO, "ratio>="),
        Comparison("warm micro-batch latency: upsert vs append", warm["upsert"], warm["append"], "s",
                   warm["upsert"] / warm["append"]),
    ]
    if cpu["upsert"] is not None and cpu["append"] is not None:
        result.comparisons.append(Comparison("CPU time of the query (JVM + Python workers)", cpu["upsert"],
                                             cpu["append"], "s", cpu["upsert"] / cpu["append"]))
    result.metrics = {
        "rows_per_s_end_to_end": rps,
        "best_wall_s": best_wall,
        "warm_micro_batch_s_median": warm,
        "best_tree_cpu_s": cpu,
        "input": inputs,
        "warmup_queries": child["warmup"],
        "session_start_s": child["session_start_s"],
        "runs": runs,
        "versions": child["versions"],
    }
    result.notes += [
        "End to end = rows / wall time from writeStream.start() to the end of awaitTermination(): query start, "
        "every micro-batch (read, write, commit) and Spark's offset and commit logs.",
        "The key table's commit looks up every written key in the bucket's older files (one read of the key "
        "column per file touched) and writes a deletion vector per file with replaced rows; automatic "
        "compaction keeps its defaults.",
        "CPU time sums user+system time of the benchmark's process tree (JVM, pyspark's Python daemon and "
        "workers) over each query.",
    ]
    return result


def _write_input(folder: Path, per: int, files: int, seed: int) -> dict[str, Any]:
    """``files`` Parquet files of ``per`` rows: the first all new keys, the others half updates of earlier keys."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    next_key, size = 0, 0
    for k in range(files):
        updates = 0 if k == 0 else int(per * UPDATE_SHARE)
        new = np.arange(next_key, next_key + per - updates, dtype=np.int64)
        old = rng.choice(next_key, size=updates, replace=False) if updates else np.zeros(0, np.int64)
        next_key += per - updates
        ids = rng.permutation(np.concatenate([new, old.astype(np.int64)]))
        table = pa.table({
            "id": ids,
            "amount": rng.random(per) * 100,
            "user": pa.array([f"user-{i % 997}" for i in ids.tolist()]),
            "note": pa.array([f"batch {k} row {j}" for j in range(per)]),
        }, schema=SCHEMA)
        path = folder / f"part-{k:05d}.parquet"
        pq.write_table(table, path, compression="zstd")
        size += path.stat().st_size
    return {"files": files, "rows_per_file": per, "distinct_keys": next_key, "bytes": size}


# -- the child process ----------------------------------------------------------------------------------
def _create(side: str, out: Path) -> None:
    if side == "upsert":
        lakefmt.create_table(str(out), SCHEMA, primary_key=["id"], options={"bucket": "2"})
    else:
        lakefmt.create_table(str(out), SCHEMA)


def _query(spark: Any, side: str, source: Path, out: Path, checkpoint: Path) -> dict[str, Any]:
    from pyspark.sql.pandas.types import from_arrow_schema

    _create(side, out)
    stream = spark.readStream.schema(from_arrow_schema(SCHEMA)).option("maxFilesPerTrigger", 1).parquet(str(source))
    writer = stream.writeStream.format("lakefmt").option("checkpointLocation", str(checkpoint))
    cpu0 = tree_cpu_s()
    t0 = time.perf_counter()
    query = writer.trigger(availableNow=True).start(str(out))
    query.awaitTermination()
    wall = time.perf_counter() - t0
    cpu1 = tree_cpu_s()
    if query.exception() is not None:
        raise RuntimeError(f"{side} query failed: {query.exception()}")
    batches = [
        {"batch": p["batchId"], "rows": p["numInputRows"], "trigger_s": p["durationMs"]["triggerExecution"] / 1000}
        for p in (json.loads(x.json) for x in query.recentProgress)
        if "addBatch" in p["durationMs"]
    ]
    return {
        "wall_s": wall,
        "tree_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
        "batches": batches,
        "live_rows": lakefmt.open_table(str(out)).scan().count(),
    }


def child(root: Path, sizes: dict[str, int]) -> dict[str, Any]:
    import pyspark
    from pyspark_lakefmt.session import local_session

    t0 = time.perf_counter()
    spark = local_session("lakefmt-bench-stream-upserts", {}, log_config=root / "log4j2.properties")
    session_s = time.perf_counter() - t0
    try:
        warmup: dict[str, float] = {}
        for side in SIDES:
            r = _query(spark, side, root / "warmup-input", root / f"warmup-{side}", root / f"warmup-ck-{side}")
            warmup[side] = r["wall_s"]
            progress(f"warm-up {side}: {r['wall_s']:.1f} s")
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
        rows = sizes["rows_per_batch"] * sizes["batches"]
        for rep in range(sizes["reps"]):
            for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                out, ck = root / f"out-{side}", root / f"ck-{side}"
                r = _query(spark, side, root / "input", out, ck)
                drop_tree(out)
                drop_tree(ck)
                runs[side].append(r)
                progress(f"rep {rep + 1} {side}: {rows / r['wall_s']:,.0f} rows/s ({r['wall_s']:.1f} s, "
                         f"{len(r['batches'])} micro-batches, {r['live_rows']:,} live rows)")
    finally:
        spark.stop()
    return {
        "session_start_s": session_s,
        "warmup": warmup,
        "runs": runs,
        "versions": {"pyspark": pyspark.__version__, "pyarrow": pa.__version__},
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]), json.loads(sys.argv[3]))))
    else:
        sys.exit("usage: python -m benchmarks --only stream_upserts (this entry point is for its child process)")
