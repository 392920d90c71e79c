"""Spark streaming source throughput: lakefmt's source against Spark's own file stream source, same Parquet files.

A lakefmt table is written with one append per data file (event rows: int64 id, timestamp ts, string user, double
amount, string dt; 10M rows in 20 appends, 1M rows in 8 in quick mode; zstd, the table's defaults). Its data
files are then hard-linked into a plain folder, so both sources read exactly the same bytes:

* ``lakefmt``: ``readStream.format("lakefmt").option("startingSnapshot", 1)``: every APPEND snapshot's files,
  found with the core's incremental scan, read with pyarrow in Spark's Python workers;
* ``files``: ``readStream.parquet(folder)``: Spark's file stream source and its vectorized Parquet reader.

Both with ``maxFilesPerTrigger=2`` (so the same micro-batches: two files each, one read task per core of
``local[2]``) and ``trigger(availableNow=True)``, into Spark's ``noop`` sink, so that only the source and the
rows' way into the JVM are measured. All queries run in one SparkSession in a fresh interpreter; a small warm-up
query per side runs first; then each side runs ``reps`` times, interleaved in a rotating order. Measured per
query: wall time from ``start()`` to the end of ``awaitTermination()`` (rows/s end to end), Spark's per-batch
durations (``latestOffset``, ``queryPlanning``, ``addBatch``, ``triggerExecution``) and the CPU time of the whole
process tree.

Target: lakefmt's end-to-end rows/s >= 0.7 x the file source's (best of reps on each side).
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import lakefmt
from benchmarks.common import (
    EVENTS_SCHEMA,
    LOG4J,
    Comparison,
    Result,
    drop_tree,
    events,
    progress,
    run_spark_child,
    tree_cpu_s,
)

NAME = "stream_source"
TARGET_RATIO = 0.7
FILES_PER_TRIGGER = 2
SIDES = ("lakefmt", "files")
DURATIONS = ("latestOffset", "queryPlanning", "addBatch", "triggerExecution")


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"rows": 1_000_000, "files": 8, "reps": 2, "warmup_rows": 20_000, "warmup_files": 4}
    return {"rows": 10_000_000, "files": 20, "reps": 5, "warmup_rows": 20_000, "warmup_files": 4}


def run(quick: bool, workdir: Path) -> Result:
    sizes = _sizes(quick)
    rows, files = sizes["rows"], sizes["files"]
    result = Result(NAME, "quick" if quick else "full", {
        **sizes,
        "columns": [f"{f.name} {f.type}" for f in EVENTS_SCHEMA],
        "input": "a lakefmt table, one append (one data file, zstd) per file; the file source reads hard links "
                 "to the same data files",
        "max_files_per_trigger": FILES_PER_TRIGGER,
        "micro_batches": files // FILES_PER_TRIGGER,
        "sink": "noop",
        "spark": "local[2], spark.sql.shuffle.partitions=2, trigger availableNow, one SparkSession",
        "statistic": "best of reps for rows/s; medians for per-batch durations (all runs reported)",
    })
    root = workdir / NAME
    drop_tree(root)
    root.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        inputs = _write_input(root / "table", root / "files", rows, files)
        _write_input(root / "warmup-table", root / "warmup-files", sizes["warmup_rows"], sizes["warmup_files"],
                     first_id=10**12)
        progress_line = (f"[{NAME}] input: {inputs['rows']:,} rows in {files} data files, "
                         f"{inputs['bytes'] / 1e6:.1f} MB ({time.perf_counter() - t0:.1f} s)")
        print(progress_line, flush=True)
        (root / "log4j2.properties").write_text(LOG4J)
        child = run_spark_child(NAME, "benchmarks.stream_source", ["--child", str(root), json.dumps(sizes)])
    finally:
        drop_tree(root)

    runs: dict[str, list[dict[str, Any]]] = child["runs"]
    for side, rs in runs.items():
        for r in rs:
            if r["rows"] != rows or len(r["batches"]) != files // FILES_PER_TRIGGER:
                raise RuntimeError(f"{side} read {r['rows']} rows in {len(r['batches'])} micro-batches, expected "
                                   f"{rows} in {files // FILES_PER_TRIGGER}")
    best_wall = {s: min(r["wall_s"] for r in runs[s]) for s in SIDES}
    rps = {s: rows / best_wall[s] for s in SIDES}
    # the micro-batches alone (what a long-running stream sees): rows over the summed triggerExecution, best rep
    batch_rps = {s: max(rows / sum(b["triggerExecution"] for b in r["batches"]) for r in runs[s]) for s in SIDES}
    starts = {s: statistics.median(r["start_s"] for r in runs[s]) for s in SIDES}
    median_s = {s: {d: statistics.median(statistics.median(b[d] for b in r["batches"]) for r in runs[s])
                    for d in DURATIONS} for s in SIDES}
    cpu = {s: min(r["tree_cpu_s"] for r in runs[s]) if all(r["tree_cpu_s"] is not None for r in runs[s]) else None
           for s in SIDES}
    result.comparisons += [
        Comparison("stream source rows/s end to end: lakefmt vs Spark's file source", rps["lakefmt"],
                   rps["files"], "rows/s", rps["lakefmt"] / rps["files"], TARGET_RATIO, "ratio>="),
        Comparison("rows/s over the micro-batches (without the query's start)", batch_rps["lakefmt"],
                   batch_rps["files"], "rows/s", batch_rps["lakefmt"] / batch_rps["files"]),
        Comparison("query start: start() to the first micro-batch (median)", starts["lakefmt"], starts["files"], "s",
                   starts["lakefmt"] / starts["files"]),
        Comparison("micro-batch time (triggerExecution, median)", median_s["lakefmt"]["triggerExecution"],
                   median_s["files"]["triggerExecution"], "s",
                   median_s["lakefmt"]["triggerExecution"] / median_s["files"]["triggerExecution"]),
        Comparison("planning a micro-batch (latestOffset, median)", median_s["lakefmt"]["latestOffset"],
                   median_s["files"]["latestOffset"], "s",
                   median_s["lakefmt"]["latestOffset"] / median_s["files"]["latestOffset"]),
    ]
    if cpu["lakefmt"] is not None and cpu["files"] is not None:
        result.comparisons.append(
            Comparison("CPU time of the query (JVM + Python workers)", cpu["lakefmt"], cpu["files"], "s",
                       cpu["lakefmt"] / cpu["files"]))
    result.metrics = {
        "rows_per_s_end_to_end": rps,
        "rows_per_s_micro_batches": batch_rps,
        "query_start_s_median": starts,
        "best_wall_s": best_wall,
        "batch_durations_s_median": median_s,
        "best_tree_cpu_s": cpu,
        "warmup_queries": child["warmup"],
        "session_start_s": child["session_start_s"],
        "input": inputs,
        "runs": runs,
        "versions": child["versions"],
    }
    result.notes += [
        "End to end = rows / wall time from writeStream.start() to the end of awaitTermination(): query start, "
        "every micro-batch (plan, read, noop write) and Spark's offset and commit logs.",
        "Both sources read the same Parquet bytes (hard links). lakefmt plans each micro-batch from its snapshots "
        "(latestOffset: the incremental scan of each new snapshot; one driver-side Python worker keeps the table "
        "open) and reads the files with pyarrow in Python workers, which hand Arrow batches to the JVM; Spark's "
        "file source lists the folder and decodes Parquet in the JVM.",
        "CPU time sums user+system time of the benchmark's process tree (the JVM, pyspark's Python daemon and "
        "workers, reaped children included) over each query.",
    ]
    return result


def _write_input(table_dir: Path, files_dir: Path, rows: int, files: int, first_id: int = 0) -> dict[str, Any]:
    """A lakefmt table of ``files`` appends of ``rows / files`` rows (one data file each), and ``files_dir``
    holding a hard link to each data file."""
    t0 = time.perf_counter()
    table = lakefmt.create_table(str(table_dir), EVENTS_SCHEMA)
    per = rows // files
    for k in range(files):
        table.append(events(per, seed=k + 1, first_id=first_id + k * per, days=10))
    files_dir.mkdir()
    size = 0
    data_files = table.scan().files()
    if len(data_files) != files:
        raise RuntimeError(f"expected one data file per append, got {len(data_files)} for {files} appends")
    for f in data_files:
        src = Path(table.io.full_path(f.path))
        os.link(src, files_dir / src.name)  # the same bytes, and the same modification time (the order)
        size += f.file_size
    return {"rows": per * files, "files": files, "bytes": size, "write_s": round(time.perf_counter() - t0, 3)}


# -- the child process ----------------------------------------------------------------------------------
def _query(spark: Any, side: str, table_dir: Path, files_dir: Path, checkpoint: Path) -> dict[str, Any]:
    if side == "lakefmt":
        stream = (spark.readStream.format("lakefmt").option("startingSnapshot", "1")
                  .option("maxFilesPerTrigger", FILES_PER_TRIGGER).load(str(table_dir)))
    else:
        schema = spark.read.parquet(str(files_dir)).schema
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", FILES_PER_TRIGGER).parquet(
            str(files_dir))
    writer = (stream.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
              .trigger(availableNow=True))
    cpu0 = tree_cpu_s()
    t0 = time.perf_counter()
    started = time.time()
    query = writer.start()
    query.awaitTermination()
    wall = time.perf_counter() - t0
    cpu1 = tree_cpu_s()
    if query.exception() is not None:
        raise RuntimeError(f"{side} query failed: {query.exception()}")
    events = [json.loads(q.json) for q in query.recentProgress]
    batches = [
        {"batch": p["batchId"], "rows": p["numInputRows"],
         **{d: p["durationMs"].get(d, 0) / 1000 for d in DURATIONS}}
        for p in events
        if "addBatch" in p["durationMs"]
    ]
    drop_tree(checkpoint)
    return {
        "wall_s": wall,
        # from start() to the first trigger: the query's start (for lakefmt: Spark's Python worker for the source)
        "start_s": _epoch_s(events[0]["timestamp"]) - started,
        "tree_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
        "rows": sum(b["rows"] for b in batches),
        "batches": batches,
    }


def _epoch_s(timestamp: str) -> float:
    """Spark's progress timestamp (ISO-8601, UTC, ``Z``) in seconds since the epoch."""
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def child(root: Path, sizes: dict[str, int]) -> dict[str, Any]:
    import pyarrow as pa
    import pyspark
    from pyspark_lakefmt.session import local_session

    t0 = time.perf_counter()
    spark = local_session("lakefmt-bench-stream-source", log_config=root / "log4j2.properties")
    session_s = time.perf_counter() - t0
    try:
        warmup: dict[str, dict[str, Any]] = {}
        for side in SIDES:
            r = _query(spark, side, root / "warmup-table", root / "warmup-files", root / f"warmup-ck-{side}")
            warmup[side] = {"order": len(warmup), "wall_s": r["wall_s"], "batches": r["batches"]}
            progress(f"warm-up {side}: {r['wall_s']:.2f} s")
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
        for rep in range(sizes["reps"]):
            k = rep % len(SIDES)
            for side in SIDES[k:] + SIDES[:k]:
                r = _query(spark, side, root / "table", root / "files", root / f"ck-{side}")
                runs[side].append(r)
                progress(f"rep {rep + 1} {side}: {r['rows'] / r['wall_s']:,.0f} rows/s "
                         f"({r['wall_s']:.1f} s, {len(r['batches'])} micro-batches)")
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
        sys.exit("usage: python -m benchmarks --only stream_source (this entry point is for its child process)")
