"""The connector on a real multi-process cluster: Spark's ``local-cluster[2,1,1024]`` master, which runs a
standalone master and two workers inside the driver's JVM and launches two separate executor JVMs, each with
its own Python workers. Tables live on S3 (the moto server of tests/conftest.py).

The test process already holds a SparkContext (the shared ``local[2]`` session), so the cluster's driver is a
child process (tests/spark/cluster_child.py) that starts the cluster once and runs every scenario on it:

1. a batch write of four tasks and a read back: rows equal, one snapshot, tasks on both executors;
2. a streaming write (a Parquet file source, two files and so two tasks per micro-batch) during which one
   executor JVM is SIGKILLed mid-batch: a test-only probe (cluster_sitecustomize.py) holds one task of
   micro-batch 1 right after it wrote its data files and manifest, and the driver kills that task's executor
   while the task runs. Spark retries the task on a live executor; every input row is in the table exactly
   once, only the successful attempts' files are referenced, and orphan-clean with age 0 removes exactly the
   dead attempt's files;
3. the streaming source: the table of 2 read as a stream from its first snapshot with a consumer id, filtered
   and transformed into a third table, its read tasks on the executors;
4. rewrites on the executors (issue 15): twelve small files (four tasks x three partitions) compacted by
   ``pyspark_lakefmt.compact`` (a Spark task per group, one COMPACT snapshot), then rows deleted by a SQL
   predicate with ``pyspark_lakefmt.delete`` (one partition dropped by metadata, one rewritten in a task);
5. streaming upserts into a key table (``bucket=2``, ``sequence.field``), two tasks per micro-batch whose keys are
   spread on purpose over both buckets and shared by the two tasks, during which the executor running a held task
   of micro-batch 1 is SIGKILLed: one live row per key, exactly the rows of the largest ``seq`` of each key, and
   each micro-batch committed once.

No process of the cluster sees AWS credentials in its environment: the jobs pass endpoint and keys as
``storage.*`` options, which travel with the data source to every Python worker. The probe also records which
environment each kind of worker sees (docs/spark.md, "Running on a cluster").

``LAKEFMT_FULL_FAULTS=1`` runs six micro-batches and kills an executor in three of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.meta.store import MetaStore

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.s3]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKER_PATH = HERE / "worker_path"
FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
MASTER = "local-cluster[2,1,1024]"
ROWS_PER_FILE = 40
FILES_PER_BATCH = 2  # maxFilesPerTrigger in the child: two small files make two read splits, so two tasks
BATCHES = 6 if FULL else 3
HOLD_BATCHES = [1, 3, 5] if FULL else [1]
BATCH_ROWS = 1000
REWRITE_ROWS = 600
REWRITE_DELETE = "(part = 1 AND id < 300) OR part = 2"
RUN_TIMEOUT_S = 900
UPSERT_KEYS = 60
UPSERT_BATCHES = 3
UPSERT_HOLD = 1


def _input_files(folder: Path) -> pa.Table:
    """``BATCHES * FILES_PER_BATCH`` Parquet files of consecutive ids, their modification times in order (the file
    source takes the oldest first), so micro-batch b holds ids ``[b * 80, (b + 1) * 80)``."""
    folder.mkdir()
    staging = folder.parent / "staging"
    staging.mkdir()
    now = time.time() - 3600
    tables = []
    for i in range(BATCHES * FILES_PER_BATCH):
        ids = list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": pa.array([v % 2 for v in ids], pa.int32()),
                "payload": [f"file-{i}-row-{v}" for v in ids],
            }
        )
        staged = staging / f"in-{i:03d}.parquet"
        pq.write_table(data, staged)
        os.utime(staged, (now + i * 10, now + i * 10))
        os.replace(staged, folder / staged.name)
        tables.append(data)
    return pa.concat_tables(tables)


def _upsert_files(folder: Path) -> dict[int, tuple[int, str, int]]:
    """``UPSERT_BATCHES * FILES_PER_BATCH`` Parquet files (in modification-time order, so micro-batch b reads files
    2b and 2b + 1) of ``ROWS_PER_FILE`` distinct keys each, spread over the whole key range: the two files of a
    batch share keys, so the two tasks of a micro-batch write rows of the same keys. ``seq`` grows with the file
    and the row; returns the expected final state, key -> (id, v, seq) of the key's largest ``seq``."""
    folder.mkdir()
    now = time.time() - 3600
    final: dict[int, tuple[int, str, int]] = {}
    for i in range(UPSERT_BATCHES * FILES_PER_BATCH):
        keys = [(j * 7 + i * 13) % UPSERT_KEYS for j in range(ROWS_PER_FILE)]  # 7 is prime to 60: distinct keys
        seqs = [i * ROWS_PER_FILE + j for j in range(ROWS_PER_FILE)]
        values = [f"file-{i}-row-{j}" for j in range(ROWS_PER_FILE)]
        path = folder / f"up-{i:03d}.parquet"
        data = pa.table({"id": pa.array(keys, pa.int64()), "v": values, "seq": pa.array(seqs, pa.int64())})
        pq.write_table(data, path)
        os.utime(path, (now + i * 10, now + i * 10))
        for key, v, seq in zip(keys, values, seqs, strict=True):
            final[key] = (key, v, seq)
    return final


def _tagged_processes(tag: bytes) -> list[int]:
    """Live processes whose environment carries ``tag`` (the child and everything it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if tag in env:
            found.append(int(entry))
    return found


def _kill_all(proc: subprocess.Popen[bytes], tag: bytes) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 30
    while left := _tagged_processes(tag):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise AssertionError(f"processes of the cluster survive SIGKILL: {left}")
        time.sleep(0.1)


def _records(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _tail(path: Path, n: int = 80) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "part", "payload")), strict=True))


def test_local_cluster_on_s3(tmp_path: Path, moto_server: dict[str, Any]) -> None:
    began = time.monotonic()
    work = tmp_path / "cluster"
    probe_dir, inject = work / "probes", work / "inject"
    for d in (probe_dir, inject):
        d.mkdir(parents=True)
    # The child and every Python worker of the cluster import lakefmt and the data source from this checkout
    # (pyspark finds ``pyspark_*`` data sources on sys.path, PYTHONPATH included), and run the probes.
    shutil.copy(HERE / "cluster_sitecustomize.py", inject / "sitecustomize.py")
    (inject / "lakefmt").symlink_to(REPO / "lakefmt", target_is_directory=True)
    (inject / "pyspark_lakefmt").symlink_to(REPO / "spark" / "pyspark_lakefmt", target_is_directory=True)
    expected_stream = _input_files(work / "input")
    expected_upserts = _upsert_files(work / "upsert-input")

    base = f"s3://{moto_server['bucket']}/cluster-{uuid.uuid4().hex[:12]}"
    storage = dict(moto_server["storage_options"])
    cfg = {
        "master": MASTER,
        "storage": storage,
        "batch_table": f"{base}/batch",
        "batch_rows": BATCH_ROWS,
        "sink_table": f"{base}/sink",
        "source_table": f"{base}/silver",
        "source_checkpoint": str(work / "checkpoint-source"),
        "source_files_per_trigger": 2 * FILES_PER_BATCH,  # a snapshot of the sink: two tasks' two partitions
        "consumer_id": "cluster-silver",
        "input_dir": str(work / "input"),
        "checkpoint": str(work / "checkpoint"),
        "probe_dir": str(probe_dir),
        "hold_batches": HOLD_BATCHES,
        "results": str(work / "results.json"),
        "rewrite_table": f"{base}/rewrite",
        "rewrite_rows": REWRITE_ROWS,
        "rewrite_delete": REWRITE_DELETE,
        "upsert_table": f"{base}/upserts",
        "upsert_input": str(work / "upsert-input"),
        "upsert_checkpoint": str(work / "checkpoint-upserts"),
        "upsert_hold": UPSERT_HOLD,
    }
    (work / "config.json").write_text(json.dumps(cfg))

    tag = f"LAKEFMT_CLUSTER_DIR={probe_dir}".encode()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_GATEWAY_", "LAKEFMT_CLUSTER"))
    }
    env.update(
        {
            # then pyspark_site.py: Spark's Python processes import the installed pyspark, bytecode cached
            "PYTHONPATH": os.pathsep.join(filter(None, [str(inject), str(WORKER_PATH), env.get("PYTHONPATH")])),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "LAKEFMT_CLUSTER_DIR": str(probe_dir),
            "LAKEFMT_CLUSTER_HOLD_TABLE": cfg["sink_table"],
            "LAKEFMT_CLUSTER_HOLD_BATCHES": ",".join(map(str, HOLD_BATCHES)),
            "LAKEFMT_CLUSTER_ROWS_PER_BATCH": str(ROWS_PER_FILE * FILES_PER_BATCH),
            "LAKEFMT_CLUSTER_UPSERT_TABLE": cfg["upsert_table"],
            "LAKEFMT_CLUSTER_UPSERT_HOLD": str(UPSERT_HOLD),
            "LAKEFMT_CLUSTER_UPSERT_ROWS_PER_BATCH": str(ROWS_PER_FILE * FILES_PER_BATCH),
            "LAKEFMT_CLUSTER_DRIVER_ENV": "set-in-the-driver's-environment",
            # no credentials but the storage.* options: none from the environment, files or an instance role
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_SHARED_CREDENTIALS_FILE": str(work / "no-aws-credentials"),
            "AWS_CONFIG_FILE": str(work / "no-aws-config"),
        }
    )
    log = work / "child.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "cluster_child.py"), str(work / "config.json")],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the cluster run hung:\n{_tail(log)}") from None
    finally:
        _kill_all(proc, tag)
    results = json.loads((work / "results.json").read_text()) if (work / "results.json").exists() else {}
    for name in ("batch", "kill", "source", "rewrites", "upsert_kill"):
        assert "exception" not in results.get(name, {}), f"{name}:\n{results[name]['exception']}\n{_tail(log)}"
    assert rc == 0, f"the cluster's driver failed with exit code {rc}:\n{_tail(log)}"

    processes = _records(probe_dir, "processes.jsonl")
    attempts = _records(probe_dir, "attempts.jsonl")
    reads = _records(probe_dir, "reads.jsonl")
    start_executors = set(results["executors_at_start"].values())
    assert len(start_executors) == 2, results["executors_at_start"]

    # -- what each kind of Python worker sees ---------------------------------------------------------------
    on_driver = [p for p in processes if p["executor"] == "driver"]
    driver_side = {p["role"] for p in on_driver}
    executor_side = [p for p in processes if p["executor"] != "driver"]
    assert {
        "pyspark.sql.worker.commit_data_source_write",
        "pyspark.sql.worker.python_streaming_sink_runner",
        "pyspark.sql.streaming.python_streaming_source_runner",
    } <= driver_side, driver_side
    assert executor_side and {p["role"] for p in executor_side} == {"pyspark.worker"}, executor_side
    assert all(p["executor_env"] is None for p in on_driver), on_driver
    assert all(p["executor_env"] for p in executor_side), executor_side
    assert not any(p["aws_env"] for p in processes), "credentials must reach the workers only as options"

    # -- 1. batch write and read back -------------------------------------------------------------------------
    expected_batch = [(i, i % 3, f"row-{i}") for i in range(BATCH_ROWS)]
    assert [tuple(r) for r in results["batch"]["read"]] == expected_batch
    batch_table = lakefmt.open_table(cfg["batch_table"], storage_options=storage)
    snaps = batch_table.snapshots()
    assert [s.commit_kind for s in snaps] == [lakefmt.CommitKind.APPEND], snaps
    assert _rows(batch_table.to_arrow()) == expected_batch
    batch_attempts = [a for a in attempts if a["table"] == cfg["batch_table"]]
    assert len(batch_attempts) == 4 and {a["executor"] for a in batch_attempts} == start_executors, batch_attempts
    assert reads and all(r["executor"] != "driver" for r in reads), reads
    assert sum(r["rows"] for r in reads if r["reader"] != "StreamReader") >= BATCH_ROWS

    # -- 2. the streaming write through an executor's death -----------------------------------------------
    kill = results["kill"]
    assert kill["finished"] and kill["error"] is None, kill
    sink = lakefmt.open_table(cfg["sink_table"], storage_options=storage)
    assert _rows(sink.to_arrow()) == _rows(expected_stream), "every input row exactly once"
    snaps = sink.snapshots()
    assert [s.commit_identifier for s in snaps] == list(range(BATCHES)), snaps
    assert {s.commit_kind for s in snaps} == {lakefmt.CommitKind.APPEND}
    sink_attempts = [a for a in attempts if a["table"] == cfg["sink_table"]]
    held_ids = set()
    for batch, at_kill in zip(HOLD_BATCHES, kill["kills"], strict=True):
        held = at_kill["held"]
        held_ids.add(held["task_attempt_id"])
        # the kill landed mid-batch: the held task had written its files; its batch was planned, not committed
        assert held["table"] == cfg["sink_table"] and held["batch"] == batch, held
        assert held["files"] and held["manifests"], held
        assert held["executor"] in at_kill["executors"].values() and at_kill["held_worker_alive"], at_kill
        assert at_kill["offsets"][-1] == batch and at_kill["commits"] == list(range(batch)), at_kill
        assert [s["identifier"] for s in at_kill["snapshots"]] == list(range(batch)), at_kill
        # Spark ran the task again, as a new attempt on another executor, after the kill
        retries = [
            a
            for a in sink_attempts
            if a["stage"] == held["stage"] and a["partition"] == held["partition"] and a["attempt"] > held["attempt"]
        ]
        assert retries and all(a["executor"] != held["executor"] for a in retries), (held, retries)
        assert all(a["time"] > at_kill["killed_at"] for a in retries)
    # two tasks per micro-batch; one more attempt per kill
    assert len(sink_attempts) == FILES_PER_BATCH * BATCHES + len(HOLD_BATCHES), sink_attempts
    dead = [a for a in sink_attempts if a["task_attempt_id"] in held_ids]
    good = [a for a in sink_attempts if a["task_attempt_id"] not in held_ids]
    dead_files = {f for a in dead for f in a["files"]} | {f"manifest/{m}" for a in dead for m in a["manifests"]}
    live = {f.path for f in sink.files()}
    assert live == {f for a in good for f in a["files"]}, "exactly the successful attempts' data files"
    assert not live & dead_files
    on_store = {f.path for f in sink.io.walk()}
    assert dead_files <= on_store, "the dead attempts' files were written before the kill"

    # -- orphan-clean removes exactly the dead attempts' files ----------------------------------------------
    report = sink.remove_orphan_files(older_than=0)
    removed = {path for paths in report.deleted.values() for path, _ in paths}
    assert removed == dead_files, (sorted(removed - dead_files), sorted(dead_files - removed))
    on_store = {f.path for f in sink.io.walk()}
    refs = referenced_files(MetaStore(sink.io))
    assert on_store == {p for p in refs if sink.io.exists(p)}, sorted(on_store ^ refs)
    assert _rows(sink.to_arrow()) == _rows(expected_stream)

    # -- 3. the streaming source ------------------------------------------------------------------------------
    source = results["source"]
    assert source["finished"] and source["error"] is None, source
    assert [p["rows"] for p in source["progress"]] == [ROWS_PER_FILE * FILES_PER_BATCH] * BATCHES, source
    silver = lakefmt.open_table(cfg["source_table"], storage_options=storage)
    expected_silver = [(i, p, s.upper()) for i, p, s in _rows(expected_stream) if i % 3 != 0]
    assert _rows(silver.to_arrow()) == expected_silver
    assert [s.commit_identifier for s in silver.snapshots()] == list(range(BATCHES))
    stream_reads = [r for r in reads if r["reader"] == "StreamReader"]
    assert sum(r["rows"] for r in stream_reads) == expected_stream.num_rows, stream_reads
    assert all(r["executor"] != "driver" for r in stream_reads), stream_reads
    consumers = {c.consumer_id: c.next_snapshot for c in sink.consumers()}
    assert consumers == {cfg["consumer_id"]: BATCHES + 1}, consumers

    # -- 4. compaction and delete, rewritten on the executors, committed once each on the driver -------------
    rewrites = results["rewrites"]
    rewritten = lakefmt.open_table(cfg["rewrite_table"], storage_options=storage)
    kinds = [s.commit_kind for s in rewritten.snapshots()]
    assert kinds == [lakefmt.CommitKind.APPEND, lakefmt.CommitKind.COMPACT, lakefmt.CommitKind.OVERWRITE], kinds
    assert (rewrites["compact"]["files_before"], rewrites["compact"]["files_after"]) == (12, 3), rewrites
    assert rewrites["delete_snapshot"] == 3, rewrites
    expected_rewrite = [(i, i % 3, f"row-{i}") for i in range(REWRITE_ROWS) if i % 3 == 0 or (i % 3 == 1 and i >= 300)]
    assert _rows(rewritten.to_arrow()) == expected_rewrite
    assert [f.partition["part"] for f in rewritten.files()] in ([0, 1], [1, 0]), rewritten.files()
    rewrite_attempts = [a for a in attempts if a["table"] == cfg["rewrite_table"]]
    # four write tasks, three compaction groups, one file rewritten by the delete: every one a Spark task on an
    # executor (the driver plans and commits only)
    assert len(rewrite_attempts) == 4 + 3 + 1, rewrite_attempts
    assert all(a["executor"] != "driver" and "stage" in a for a in rewrite_attempts), rewrite_attempts

    # -- 5. upserts into a key table through an executor's death ------------------------------------------
    upserts = results["upsert_kill"]
    assert upserts["finished"] and upserts["error"] is None, upserts
    keyed = lakefmt.open_table(cfg["upsert_table"], storage_options=storage)
    got = keyed.to_arrow()
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "one live row per key"
    assert sorted(zip(ids, got.column("v").to_pylist(), got.column("seq").to_pylist(), strict=True)) == sorted(
        expected_upserts.values()
    ), "exactly the row of each key's largest seq"
    held = upserts["kill"]["held"]
    assert held["table"] == cfg["upsert_table"] and held["batch"] == UPSERT_HOLD and held["files"], held
    assert upserts["kill"]["commits"] == list(range(UPSERT_HOLD)), upserts["kill"]
    written = [s for s in keyed.snapshots() if s.commit_kind is not lakefmt.CommitKind.COMPACT]
    assert [s.commit_identifier for s in written] == list(range(UPSERT_BATCHES)), written
    # the micro-batches' write tasks (automatic compaction also writes, in the driver's commit worker)
    upsert_attempts = [a for a in attempts if a["table"] == cfg["upsert_table"] and "stage" in a]
    assert len(upsert_attempts) == FILES_PER_BATCH * UPSERT_BATCHES + 1, upsert_attempts  # one more: the retry
    retried = [
        a for a in upsert_attempts
        if a["stage"] == held["stage"] and a["partition"] == held["partition"] and a["attempt"] > held["attempt"]
    ]
    assert retried and all(a["executor"] != held["executor"] for a in retried), (held, retried)
    # each task's keys span the key range (both buckets): ids of one task from near 0 to near the last key
    assert all(a["ids"][1] - a["ids"][0] >= UPSERT_KEYS // 2 for a in upsert_attempts), upsert_attempts
    assert all(a["executor"] != "driver" for a in upsert_attempts), upsert_attempts

    timings = results["timings"]
    print(
        f"local-cluster: {timings} in {time.monotonic() - began:.0f}s, {results.get('cpu_s')} CPU-s; "
        f"executors at start {results['executors_at_start']}, after the kills {kill['executors_after']}; "
        f"{len(sink_attempts)} write attempts for {BATCHES} micro-batches, {len(dead_files)} orphans removed "
        f"({sum(1 for f in dead_files if not f.startswith('manifest/'))} data files); "
        f"killed executors {[k['held']['executor'] for k in kill['kills']]}; stream reads on executors "
        f"{[r['executor'] for r in stream_reads]}; sink progress {kill['progress']}; source progress "
        f"{source['progress']}"
    )
