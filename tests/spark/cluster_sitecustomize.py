"""Test-only probes for tests/spark/test_cluster.py. Never imported by lakefmt.

The test copies this file as ``sitecustomize.py`` into a folder that it puts first on the ``PYTHONPATH`` of the
cluster's driver process. Spark passes that environment on to its Python workers, the executors' ones included
(on ``local-cluster`` the executor JVMs are children of the driver's), so every Python process of the
application runs this at start-up. With ``LAKEFMT_CLUSTER_DIR`` set it records, as JSON lines in that folder:

``processes.jsonl``  each process that imports ``pyspark_lakefmt``: its pyspark role, the executor it belongs to
                     (or the driver), and whether it sees a variable set in the driver's environment and one set
                     with ``spark.executorEnv``
``attempts.jsonl``   each write task attempt, after ``TableWriter.prepare_commit``: its executor, Spark's task
                     context, the range of ``id`` it wrote, its data files and manifest
``reads.jsonl``      each read task of the connector's readers: its executor, task context and row count

and, with ``LAKEFMT_CLUSTER_HOLD_TABLE=<uri>``, ``LAKEFMT_CLUSTER_HOLD_BATCHES=1,3`` and
``LAKEFMT_CLUSTER_ROWS_PER_BATCH=n``, holds the first write task attempt into that table of each of those
micro-batches (the one whose smallest ``id`` divided by n is that batch) right
after it wrote its files and manifest: it writes ``hold-<batch>.json`` (its pid, its executor JVM's pid, its
files) and waits for ``release-<batch>`` to appear (or its executor to die), so that the test can SIGKILL the
executor while that task runs. With ``LAKEFMT_CLUSTER_UPSERT_TABLE=<uri>``, ``LAKEFMT_CLUSTER_UPSERT_HOLD=b`` and
``LAKEFMT_CLUSTER_UPSERT_ROWS_PER_BATCH=n`` it holds the same way the first write task attempt into that key table
whose smallest ``seq`` divided by n is b (its keys are spread over every task, so ``id`` says nothing of the
batch): ``hold-u<b>.json``, released by ``release-u<b>``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time
from typing import Any

with contextlib.suppress(ImportError):  # from worker_path, next on the PYTHONPATH (whose sitecustomize this hides)
    import pyspark_site  # noqa: F401

_DIR = os.environ.get("LAKEFMT_CLUSTER_DIR", "")
_HOLD_TABLE = os.environ.get("LAKEFMT_CLUSTER_HOLD_TABLE", "")
_HOLD_BATCHES = {int(b) for b in os.environ.get("LAKEFMT_CLUSTER_HOLD_BATCHES", "").split(",") if b}
_ROWS_PER_BATCH = int(os.environ.get("LAKEFMT_CLUSTER_ROWS_PER_BATCH", "0") or 0)
_UPSERT_TABLE = os.environ.get("LAKEFMT_CLUSTER_UPSERT_TABLE", "")
_UPSERT_HOLD = int(os.environ.get("LAKEFMT_CLUSTER_UPSERT_HOLD", "-1") or -1)
_UPSERT_ROWS_PER_BATCH = int(os.environ.get("LAKEFMT_CLUSTER_UPSERT_ROWS_PER_BATCH", "0") or 0)
_HOLD_TIMEOUT_S = 300
_EXECUTOR_MAIN = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def executor_of(pid: int) -> dict[str, Any]:
    """The executor JVM above ``pid`` (its pid and Spark's executor id), or ``{"executor": "driver"}``."""
    for _ in range(8):
        pid = _parent(pid)
        if pid <= 1:
            break
        cmd = _cmdline(pid)
        if _EXECUTOR_MAIN in cmd:
            return {"executor": cmd[cmd.index(b"--executor-id") + 1].decode(), "executor_pid": pid}
    return {"executor": "driver"}


def _task() -> dict[str, Any]:
    try:
        from pyspark import TaskContext

        tc = TaskContext.get()
    except Exception:  # any failure: no task context to report
        return {}
    if tc is None:
        return {}
    return {
        "stage": tc.stageId(),
        "partition": tc.partitionId(),
        "attempt": tc.attemptNumber(),
        "task_attempt_id": tc.taskAttemptId(),
    }


def _append(name: str, record: dict[str, Any]) -> None:
    with open(os.path.join(_DIR, name), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record) + "\n")
        f.flush()


def _role() -> str:
    """The pyspark module the process runs: ``pyspark.daemon <module>`` forks workers; a few run as scripts."""
    arg = sys.argv[-1] if len(sys.argv) > 1 else sys.argv[0]
    if arg.endswith(".py") and "/pyspark/" in arg:  # from pyspark.zip or the installed package (pyspark_site.py)
        arg = "pyspark." + arg.rsplit("/pyspark/", 1)[1][: -len(".py")].replace("/", ".")
    return arg


def _patch_writer(module: Any) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    cls = module.TableWriter
    write, prepare = cls.write, cls.prepare_commit

    @functools.wraps(write)
    def probe_write(self: Any, data: Any) -> None:
        write(self, data)
        if isinstance(data, (pa.RecordBatch, pa.Table)) and "id" in data.schema.names and data.num_rows:
            mm = pc.min_max(data.column("id")).as_py()
            lo, hi = getattr(self, "_probe_ids", (mm["min"], mm["max"]))
            self._probe_ids = (min(lo, mm["min"]), max(hi, mm["max"]))
            self._probe_rows = getattr(self, "_probe_rows", 0) + data.num_rows
            if "seq" in data.schema.names:
                seq = pc.min(data.column("seq")).as_py()
                self._probe_seq = min(getattr(self, "_probe_seq", seq), seq)

    @functools.wraps(prepare)
    def probe_prepare(self: Any) -> Any:
        message = prepare(self)
        ids = getattr(self, "_probe_ids", None)
        record = {
            "pid": os.getpid(),
            **executor_of(os.getpid()),
            **_task(),
            "table": self._io.uri,
            "ids": ids,
            "rows": getattr(self, "_probe_rows", 0),
            "files": [f.path for f in self.written_files],
            "manifests": [m.file_name for m in message.manifests],
            "time": time.time(),
        }
        _append("attempts.jsonl", record)
        held_table = record["table"] == _HOLD_TABLE
        batch = ids[0] // _ROWS_PER_BATCH if held_table and ids is not None and _ROWS_PER_BATCH else None
        if batch in _HOLD_BATCHES and _claim_hold(batch, record):
            _hold(batch)
        seq = getattr(self, "_probe_seq", None)
        if record["table"] == _UPSERT_TABLE and seq is not None and _UPSERT_ROWS_PER_BATCH:
            upsert_batch = seq // _UPSERT_ROWS_PER_BATCH
            if upsert_batch == _UPSERT_HOLD and _claim_hold(f"u{upsert_batch}", record, upsert_batch):
                _hold(f"u{upsert_batch}")
        return message

    cls.write, cls.prepare_commit = probe_write, probe_prepare


def _claim_hold(label: int | str, record: dict[str, Any], batch: int | None = None) -> bool:
    """The first attempt of the batch to get here is held (an exclusive create); later ones are not."""
    batch = label if batch is None else batch
    try:
        fd = os.open(os.path.join(_DIR, f"hold-{label}.claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    tmp = os.path.join(_DIR, f"hold-{label}.tmp")
    with open(tmp, "w") as f:
        json.dump({**record, "batch": batch}, f)
    os.replace(tmp, os.path.join(_DIR, f"hold-{label}.json"))
    return True


def _hold(batch: int | str) -> None:
    """Wait for the release, or for this worker to lose its executor (its parent changes when the daemon dies)."""
    parent = os.getppid()
    deadline = time.monotonic() + _HOLD_TIMEOUT_S
    release = os.path.join(_DIR, f"release-{batch}")
    while not os.path.exists(release) and os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)


def _patch_readers(module: Any) -> None:
    """Every reader class of the module that defines ``read`` logs each read task (batch and streaming)."""
    for obj in list(vars(module).values()):
        if not isinstance(obj, type) or obj.__module__ != module.__name__ or "read" not in vars(obj):
            continue
        read = obj.read

        def probe_read(self: Any, partition: Any, _read: Any = read, _cls: str = obj.__name__) -> Any:
            rows = 0
            for batch in _read(self, partition):
                rows += batch.num_rows
                yield batch
            _append("reads.jsonl", {"pid": os.getpid(), **executor_of(os.getpid()), **_task(), "reader": _cls,
                                    "rows": rows})

        obj.read = functools.wraps(read)(probe_read)


def _log_process(module: Any) -> None:
    _append(
        "processes.jsonl",
        {
            "pid": os.getpid(),
            "role": _role(),
            **executor_of(os.getpid()),
            "driver_env": os.environ.get("LAKEFMT_CLUSTER_DRIVER_ENV"),
            "executor_env": os.environ.get("LAKEFMT_CLUSTER_EXECUTOR_ENV"),
            "aws_env": sorted(k for k in os.environ if k.startswith("AWS_") and "KEY" in k),
        },
    )


_PATCHES = {
    "lakefmt.write.writer": _patch_writer,
    "pyspark_lakefmt": _log_process,
    "pyspark_lakefmt.reader": _patch_readers,
    "pyspark_lakefmt.stream_reader": _patch_readers,
}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs a probe right after one of the modules above has been executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            with contextlib.suppress(OSError):
                patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if _DIR:
    sys.meta_path.insert(0, _PatchOnImport())
