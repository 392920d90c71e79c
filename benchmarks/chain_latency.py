"""End-to-end latency of a bronze -> silver chain: a row appended to bronze, until it is visible in silver.

The chain is a streaming query with a processing-time trigger (500 ms) that keeps the rows of bronze with
``amount >= 100``, adds a derived column (``amount_cents``) and writes to silver:

* ``lakefmt``: bronze and silver are lakefmt tables: ``readStream.format("lakefmt")`` into
  ``writeStream.format("lakefmt")``; the benchmark appends with ``Table.append`` (one data file of 10,000 event
  rows) and the rows are visible when silver's next snapshot is published (polled every 5 ms);
* ``parquet``: the same query on Spark's own exactly-once file pipeline: bronze is a folder of Parquet files
  (each written to a temporary name, then renamed in), read with ``readStream.parquet``; silver is Spark's
  ``parquet`` sink, whose rows are visible when its ``_spark_metadata`` log holds the next batch.

One append at a time: the next one starts after the previous one is visible and a random pause (0 to one
trigger interval, so appends land at every phase of the trigger). Latency is from the moment the append has
returned (bronze committed) to the moment silver shows it. Both queries run in one SparkSession (``local[2]``) in
a fresh interpreter, in alternating phases (lakefmt, parquet, parquet, lakefmt), each starting a new query
whose first two appends are left out (warm-up: Python workers start, JIT).

Reported: p50 and p95 per side, and the median of Spark's per-batch durations, which say where the time goes.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import EVENTS_SCHEMA, LOG4J, Comparison, Result, drop_tree, events, progress, run_spark_child

NAME = "chain_latency"
SIDES = ("lakefmt", "parquet")
TRIGGER = "500 milliseconds"
TRIGGER_S = 0.5
ROWS_PER_APPEND = 10_000
WARMUP_APPENDS = 2
POLL_S = 0.005
KEEP = "amount >= 100"
DERIVED = ("amount_cents", "CAST(ROUND(amount * 100) AS BIGINT)")
DURATIONS = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def _sizes(quick: bool) -> dict[str, int]:
    # measured appends per side, over two phases
    return {"appends": 8 if quick else 40}


def run(quick: bool, workdir: Path) -> Result:
    sizes = _sizes(quick)
    result = Result(NAME, "quick" if quick else "full", {
        **sizes,
        "trigger": f"processingTime {TRIGGER}",
        "rows_per_append": ROWS_PER_APPEND,
        "columns": [f"{f.name} {f.type}" for f in EVENTS_SCHEMA],
        "query": f"WHERE {KEEP}, {DERIVED[0]} = {DERIVED[1]}",
        "phases": "lakefmt, parquet, parquet, lakefmt; a new query each, first "
                  f"{WARMUP_APPENDS} appends of each left out",
        "spark": "local[2], spark.sql.shuffle.partitions=2, one SparkSession",
        "poll_s": POLL_S,
    })
    root = workdir / NAME
    drop_tree(root)
    root.mkdir(parents=True)
    try:
        (root / "log4j2.properties").write_text(LOG4J)
        child = run_spark_child(NAME, "benchmarks.chain_latency", ["--child", str(root), json.dumps(sizes)])
    finally:
        drop_tree(root)

    lat = {s: child["latency_s"][s] for s in SIDES}
    p50 = {s: _percentile(lat[s], 50) for s in SIDES}
    p95 = {s: _percentile(lat[s], 95) for s in SIDES}
    batches = {s: {d: statistics.median(b[d] for b in child["batches"][s]) for d in DURATIONS} for s in SIDES}
    result.comparisons += [
        Comparison("append -> visible in silver, p50: lakefmt chain vs Spark files -> parquet sink", p50["lakefmt"],
                   p50["parquet"], "s", p50["lakefmt"] / p50["parquet"]),
        Comparison("append -> visible in silver, p95: lakefmt chain vs Spark files -> parquet sink", p95["lakefmt"],
                   p95["parquet"], "s", p95["lakefmt"] / p95["parquet"]),
        Comparison("micro-batch time (triggerExecution, median)", batches["lakefmt"]["triggerExecution"],
                   batches["parquet"]["triggerExecution"], "s",
                   batches["lakefmt"]["triggerExecution"] / batches["parquet"]["triggerExecution"]),
    ]
    result.metrics = {
        "latency_s_p50": p50,
        "latency_s_p95": p95,
        "latency_s_max": {s: max(lat[s]) for s in SIDES},
        "latency_s": lat,
        "append_s_median": {s: statistics.median(child["append_s"][s]) for s in SIDES},
        "batch_durations_s_median": batches,
        "batches": child["batches"],
        "session_start_s": child["session_start_s"],
        "versions": child["versions"],
    }
    result.notes += [
        f"Latency includes the wait for the next trigger (0 to {TRIGGER_S} s, {TRIGGER_S / 2} s on average, the same "
        "for both sides), the micro-batch (plan, read, filter, write, commit) and Spark's offset and commit logs "
        "before the next trigger can start.",
        "lakefmt: the append is one Table.append (write + commit); visible = silver's next snapshot published. "
        "parquet: the append is one pq.write_table + rename; visible = the parquet sink's _spark_metadata entry "
        "of the next batch (what spark.read.parquet(silver) goes by).",
    ]
    return result


def _percentile(xs: list[float], q: float) -> float:
    """The q-th percentile, nearest rank."""
    s = sorted(xs)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


# -- the child process ----------------------------------------------------------------------------------
class _Side:
    """One side's bronze (where appends go) and silver (where they show up)."""

    def __init__(self, side: str, root: Path) -> None:
        self.side = side
        self.bronze = root / f"{side}-bronze"
        self.silver = root / f"{side}-silver"
        self.staging = root / f"{side}-staging"
        self.appended = 0
        self.silver_table: Any = None
        if side == "lakefmt":
            import lakefmt

            self.table = lakefmt.create_table(str(self.bronze), EVENTS_SCHEMA)
        else:
            self.bronze.mkdir()
            self.staging.mkdir()

    def stream(self, spark: Any) -> Any:
        if self.side == "lakefmt":
            return spark.readStream.format("lakefmt").load(str(self.bronze))
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.readStream.schema(from_arrow_schema(EVENTS_SCHEMA)).parquet(str(self.bronze))

    def sink(self, writer: Any) -> Any:
        if self.side == "lakefmt":
            return writer.format("lakefmt").option("createTable", "true").start(str(self.silver))
        return writer.format("parquet").start(str(self.silver))

    def append(self) -> None:
        rows = events(ROWS_PER_APPEND, seed=self.appended + 1, first_id=self.appended * ROWS_PER_APPEND)
        self.appended += 1
        if self.side == "lakefmt":
            self.table.append(rows)
            return
        import pyarrow.parquet as pq

        staged = self.staging / f"part-{self.appended:05d}.parquet"
        pq.write_table(rows, staged, compression="zstd")
        os.replace(staged, self.bronze / staged.name)  # the file source never sees a partial file

    def mark(self) -> int:
        """Silver's progress so far: its latest snapshot id, or the parquet sink's latest logged batch + 1."""
        if self.side == "lakefmt":
            if self.silver_table is None:
                import lakefmt

                try:
                    self.silver_table = lakefmt.open_table(str(self.silver))
                except lakefmt.NotATableError:  # the query's first micro-batch creates it
                    return 0
            snap = self.silver_table.latest_snapshot()
            return snap.id if snap is not None else 0
        log = self.silver / "_spark_metadata"
        names = os.listdir(log) if log.exists() else []
        ids = [int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()]
        return max(ids) + 1 if ids else 0


def _phase(spark: Any, side: _Side, root: Path, appends: int, rng: random.Random,
           out: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    checkpoint = root / f"{side.side}-ck"
    rows = side.stream(spark).where(KEEP).withColumn(DERIVED[0], F.expr(DERIVED[1]))
    writer = rows.writeStream.option("checkpointLocation", str(checkpoint)).trigger(processingTime=TRIGGER)
    query = side.sink(writer)
    try:
        for i in range(WARMUP_APPENDS + appends):
            before = side.mark()
            t0 = time.perf_counter()
            side.append()
            t1 = time.perf_counter()
            deadline = t1 + 120
            while side.mark() <= before:
                if time.perf_counter() > deadline or query.exception() is not None:
                    raise RuntimeError(f"{side.side}: append {i} not visible in silver: {query.exception()}")
                time.sleep(POLL_S)
            t2 = time.perf_counter()
            if i >= WARMUP_APPENDS:
                out["latency_s"][side.side].append(t2 - t1)
                out["append_s"][side.side].append(t1 - t0)
            time.sleep(rng.uniform(0, TRIGGER_S))
    finally:
        query.stop()
    data_batches = [p for p in (json.loads(q.json) for q in query.recentProgress)
                    if "addBatch" in p["durationMs"] and p["numInputRows"]]
    for p in data_batches[WARMUP_APPENDS:]:
        out["batches"][side.side].append({d: p["durationMs"].get(d, 0) / 1000 for d in DURATIONS})
    progress(f"{side.side}: {appends} appends, latency median "
             f"{statistics.median(out['latency_s'][side.side][-appends:]):.2f} s "
             f"({len(data_batches)} micro-batches with rows)")


def child(root: Path, sizes: dict[str, int]) -> dict[str, Any]:
    import pyarrow as pa
    import pyspark
    from pyspark_lakefmt.session import local_session

    t0 = time.perf_counter()
    spark = local_session("lakefmt-bench-chain-latency", log_config=root / "log4j2.properties")
    session_s = time.perf_counter() - t0
    rng = random.Random(7)
    out: dict[str, Any] = {k: {s: [] for s in SIDES} for k in ("latency_s", "append_s", "batches")}
    try:
        sides = {s: _Side(s, root) for s in SIDES}
        half = sizes["appends"] // 2
        for name in ("lakefmt", "parquet", "parquet", "lakefmt"):
            _phase(spark, sides[name], root, half, rng, out)
    finally:
        spark.stop()
    return {
        "session_start_s": session_s,
        **out,
        "versions": {"pyspark": pyspark.__version__, "pyarrow": pa.__version__},
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]), json.loads(sys.argv[3]))))
    else:
        sys.exit("usage: python -m benchmarks --only chain_latency (this entry point is for its child process)")
