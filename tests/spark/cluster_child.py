"""The driver of tests/spark/test_cluster.py: one Spark application on a ``local-cluster`` master (separate
executor JVMs, each with its own Python workers), run in a child process because the test process already holds
a SparkContext. It runs the scenarios in order on one cluster and writes what it saw to a JSON file; the test
checks the tables themselves.

Usage: python cluster_child.py CONFIG_JSON

The config names the S3 endpoint and credentials (passed to the jobs as ``storage.*`` options only: this
process's environment holds no AWS credentials), the tables, the input folder, the checkpoint, the probes'
folder (see cluster_sitecustomize.py) and where to write the results.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXECUTOR_MAIN = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOLD_TIMEOUT_S = 240
QUERY_TIMEOUT_S = 300


def executors(app_id: str) -> dict[int, str]:
    """This application's live executor JVMs: pid -> Spark's executor id."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if EXECUTOR_MAIN in cmd and app_id.encode() in cmd:
            found[int(entry)] = cmd[cmd.index(b"--executor-id") + 1].decode()
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cluster_cpu_seconds(tag: bytes) -> float:
    """CPU time so far of every live process of the application (they carry ``tag`` in their environment),
    with that of the children they have reaped (a daemon's finished workers, a dead executor)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def records(probe_dir: Path, name: str) -> list[dict[str, Any]]:
    path = probe_dir / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def checkpoint_log(checkpoint: Path, kind: str) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / kind).glob("[0-9]*"))


def snapshots(uri: str, storage: dict[str, str]) -> list[dict[str, Any]]:
    import lakefmt

    table = lakefmt.open_table(uri, storage_options=storage)
    return [{"id": s.id, "kind": str(s.commit_kind.name), "identifier": s.commit_identifier} for s in table.snapshots()]


def progress(query: Any) -> list[dict[str, Any]]:
    """Each micro-batch: its id, input rows and Spark's durations (ms)."""
    return [{"batch": p["batchId"], "rows": p["numInputRows"], **p["durationMs"]} for p in query.recentProgress]


def scenario_batch(spark: Any, cfg: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """1. A batch write of four tasks and a read back."""
    df = spark.range(0, cfg["batch_rows"], 1, 4).selectExpr(
        "id", "cast(id % 3 as int) as part", "concat('row-', cast(id as string)) as payload"
    )
    t0 = time.monotonic()
    (
        df.write.format("lakefmt")
        .mode("append")
        .options(**opts)
        .option("createTable", "true")
        .option("partitionBy", "part")
        .save(cfg["batch_table"])
    )
    t1 = time.monotonic()
    back = spark.read.format("lakefmt").options(**opts).load(cfg["batch_table"])
    rows = sorted((r.id, r.part, r.payload) for r in back.collect())
    return {"read": rows, "write_s": round(t1 - t0, 1), "read_s": round(time.monotonic() - t1, 1)}


def _kill_held(
    spark: Any, cfg: dict[str, Any], query: Any, batch: int, *, label: str = "", table_key: str = "sink_table",
    checkpoint_key: str = "checkpoint",
) -> dict[str, Any]:
    """Wait until a task of ``batch`` is held (``hold-<label><batch>.json``), note the state, SIGKILL its executor
    JVM, release the hold."""
    probe_dir, checkpoint = Path(cfg["probe_dir"]), Path(cfg[checkpoint_key])
    app_id = spark.sparkContext.applicationId
    hold_file = probe_dir / f"hold-{label}{batch}.json"
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while not hold_file.exists():
        if not query.isActive or time.monotonic() > deadline:
            raise AssertionError(f"no task of batch {batch} was held (active: {query.isActive}, {query.exception()})")
        time.sleep(0.05)
    held = json.loads(hold_file.read_text())
    victim = int(held.get("executor_pid", 0))
    if held["table"] != cfg[table_key] or victim not in executors(app_id):
        raise AssertionError(f"the held task is not a live executor's task writing the sink: {held}")
    # The state at the kill: the held task has written its files and manifest; its micro-batch is planned
    # (offsets) but not committed, neither in the table nor in Spark's commit log.
    at_kill = {
        "held": held,
        "held_worker_alive": alive(int(held["pid"])),
        "executors": {str(k): v for k, v in executors(app_id).items()},
        "offsets": checkpoint_log(checkpoint, "offsets"),
        "commits": checkpoint_log(checkpoint, "commits"),
        "snapshots": snapshots(cfg[table_key], cfg["storage"]),
        "attempts": records(probe_dir, "attempts.jsonl"),
    }
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    while alive(victim) and time.monotonic() - killed_at < 30:
        time.sleep(0.02)
    at_kill["victim_gone_after_s"] = round(time.monotonic() - killed_at, 2)
    at_kill["killed_at"] = time.time()
    # The held worker loses its executor; this file would release it too, which no longer matters.
    (probe_dir / f"release-{label}{batch}").touch()
    return at_kill


def scenario_kill(spark: Any, cfg: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """2. A streaming write (two input files per micro-batch, so two tasks) during which, for each batch of
    ``hold_batches``, the executor running a held task of that batch is SIGKILLed."""
    app_id = spark.sparkContext.applicationId
    before = executors(app_id)
    stream = (
        spark.readStream.schema("id BIGINT, part INT, payload STRING")
        .option("maxFilesPerTrigger", 2)
        .parquet(cfg["input_dir"])
    )
    query = (
        stream.writeStream.format("lakefmt")
        .options(**opts)
        .option("checkpointLocation", cfg["checkpoint"])
        .option("createTable", "true")
        .option("partitionBy", "part")
        .option("tableOptions", "compaction.auto=false")  # one snapshot per micro-batch, as the test counts
        .trigger(availableNow=True)
        .start(cfg["sink_table"])
    )
    kills = [_kill_held(spark, cfg, query, batch) for batch in cfg["hold_batches"]]
    finished = query.awaitTermination(QUERY_TIMEOUT_S)
    error = query.exception()
    # Did the master start new executors in place of the dead ones? (Wait a little for the last one.)
    wait = time.monotonic() + 30
    while True:
        after = executors(app_id)
        if len(after) >= len(before) or time.monotonic() > wait:
            break
        time.sleep(0.2)
    return {
        "kills": kills,
        "finished": bool(finished),
        "error": None if error is None else str(error)[:2000],
        "progress": progress(query),
        "executors_before": {str(k): v for k, v in before.items()},
        "executors_after": {str(k): v for k, v in after.items()},
    }


def scenario_source(spark: Any, cfg: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """3. The streaming source: the sink table of scenario 2, read as a stream from its first snapshot (one
    snapshot per micro-batch) with a consumer id, filtered and transformed into a third table."""
    stream = (
        spark.readStream.format("lakefmt")
        .options(**opts)
        .option("startingSnapshot", "1")
        .option("maxFilesPerTrigger", cfg["source_files_per_trigger"])
        .option("consumerId", cfg["consumer_id"])
        .load(cfg["sink_table"])
    )
    query = (
        stream.where("id % 3 != 0")
        .selectExpr("id", "part", "upper(payload) AS payload")
        .writeStream.format("lakefmt")
        .options(**opts)
        .option("checkpointLocation", cfg["source_checkpoint"])
        .option("createTable", "true")
        .option("partitionBy", "part")
        .option("tableOptions", "compaction.auto=false")  # one snapshot per micro-batch, as the test counts
        .trigger(availableNow=True)
        .start(cfg["source_table"])
    )
    finished = query.awaitTermination(QUERY_TIMEOUT_S)
    error = query.exception()
    return {
        "finished": bool(finished),
        "error": None if error is None else str(error)[:2000],
        "progress": progress(query),
    }


def scenario_rewrites(spark: Any, cfg: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """4. Rewrites on the executors: a table of four write tasks x three partitions (twelve small files) compacted
    by pyspark_lakefmt.compact (a Spark task per partition's group), then rows deleted by a SQL predicate with
    pyspark_lakefmt.delete (one partition dropped by its metadata, one rewritten in a Spark task)."""
    import pyspark_lakefmt

    uri = cfg["rewrite_table"]
    df = spark.range(0, cfg["rewrite_rows"], 1, 4).selectExpr(
        "id", "cast(id % 3 as int) as part", "concat('row-', cast(id as string)) as payload"
    )
    df.write.format("lakefmt").mode("append").options(**opts).option("createTable", "true").option(
        "partitionBy", "part"
    ).save(uri)
    t0 = time.monotonic()
    report = pyspark_lakefmt.compact(spark, uri, min_files=2, storage_options=cfg["storage"])
    t1 = time.monotonic()
    snap = pyspark_lakefmt.delete(spark, uri, cfg["rewrite_delete"], storage_options=cfg["storage"])
    return {
        "compact": report.to_dict(),
        "delete_snapshot": None if snap is None else snap.id,
        "compact_s": round(t1 - t0, 1),
        "delete_s": round(time.monotonic() - t1, 1),
    }


def scenario_upsert_kill(spark: Any, cfg: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """5. Streaming upserts into a key table (``bucket=2``, ``sequence.field=seq``), two input files and so two
    tasks per micro-batch, each task's keys spread over the whole key range and both buckets (the two tasks of a
    batch share keys), during which the executor running a held task of micro-batch ``upsert_hold`` is
    SIGKILLed."""
    import lakefmt

    uri = cfg["upsert_table"]
    import pyarrow as pa

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("seq", pa.int64())])
    lakefmt.create_table(
        uri, schema, primary_key=["id"], options={"bucket": "2", "sequence.field": "seq"},
        storage_options=cfg["storage"],
    )
    app_id = spark.sparkContext.applicationId
    before = executors(app_id)
    stream = (
        spark.readStream.schema("id BIGINT, v STRING, seq BIGINT")
        .option("maxFilesPerTrigger", 2)
        .parquet(cfg["upsert_input"])
    )
    query = (
        stream.writeStream.format("lakefmt")
        .options(**opts)
        .option("checkpointLocation", cfg["upsert_checkpoint"])
        .trigger(availableNow=True)
        .start(uri)
    )
    kill = _kill_held(
        spark, cfg, query, cfg["upsert_hold"], label="u", table_key="upsert_table", checkpoint_key="upsert_checkpoint"
    )
    finished = query.awaitTermination(QUERY_TIMEOUT_S)
    error = query.exception()
    return {
        "kill": kill,
        "finished": bool(finished),
        "error": None if error is None else str(error)[:2000],
        "progress": progress(query),
        "executors_before": {str(k): v for k, v in before.items()},
    }


def main() -> int:
    began = time.monotonic()
    cfg = json.loads(Path(sys.argv[1]).read_text())
    results: dict[str, Any] = {"timings": {}}
    out = Path(cfg["results"])

    def save() -> None:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        os.replace(tmp, out)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    jvm_flags = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    spark = (
        SparkSession.builder.master(cfg["master"])
        .appName("lakefmt-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "768m")
        .config("spark.executor.memory", "512m")
        .config("spark.driver.extraJavaOptions", jvm_flags)
        .config("spark.executor.extraJavaOptions", jvm_flags)
        .config("spark.executorEnv.LAKEFMT_CLUSTER_EXECUTOR_ENV", "set-with-spark.executorEnv")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    app_id = spark.sparkContext.applicationId
    results["app_id"] = app_id
    results["timings"]["session_s"] = round(time.monotonic() - began, 1)
    results["executors_at_start"] = {str(k): v for k, v in executors(app_id).items()}
    print(f"cluster_child: session up after {results['timings']['session_s']}s", flush=True)

    opts = {f"storage.{k}": v for k, v in cfg["storage"].items()}
    scenarios: list[tuple[str, Callable[[Any, dict[str, Any], dict[str, str]], dict[str, Any]]]] = [
        ("batch", scenario_batch),
        ("kill", scenario_kill),
        ("source", scenario_source),
        ("rewrites", scenario_rewrites),
        ("upsert_kill", scenario_upsert_kill),
    ]
    rc = 0
    for name, run in scenarios:
        t0 = time.monotonic()
        try:
            results[name] = run(spark, cfg, opts)
        except Exception:
            results[name] = {"exception": traceback.format_exc()[-4000:]}
            rc = 1
        results["timings"][f"{name}_s"] = round(time.monotonic() - t0, 1)
        print(f"cluster_child: {name} done in {results['timings'][f'{name}_s']}s", flush=True)
        save()
    results["cpu_s"] = round(cluster_cpu_seconds(f"LAKEFMT_CLUSTER_DIR={cfg['probe_dir']}".encode()), 1)
    t0 = time.monotonic()
    spark.stop()
    results["timings"]["stop_s"] = round(time.monotonic() - t0, 1)
    results["timings"]["total_s"] = round(time.monotonic() - began, 1)
    save()
    return rc


if __name__ == "__main__":
    sys.exit(main())
