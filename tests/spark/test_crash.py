"""Exactly-once of the Spark streaming sink under real SIGKILLs.

A streaming query (tests/spark/crash_child.py: a Parquet file source, one file per micro-batch, ``availableNow``,
into a lakefmt table with a fixed checkpoint) runs in a child process that is its own process group, with its
JVM. The test kills the whole group with SIGKILL again and again, then restarts the child from the same
checkpoint, until the query completes. Kills land:

1. during task writes (``in_write``: data files half written; ``task_written``: files and manifest written, the
   message never reaches the driver);
2. inside the commit, before the snapshot is published (``before_publish``: manifests and lists written;
   ``in_publish``: the snapshot's temp file written, not yet linked);
3. after the snapshot is published, before Spark records the batch in its checkpoint (``after_publish``): the
   restarted query replays the batch with the same id and new files, and the sink's dedup must skip it;

and at random moments (seeded). Points 1-3 are injected from outside the product: crash_sitecustomize.py is put
first on the child's PYTHONPATH as ``sitecustomize``, which Spark's Python workers run at start-up too.

After each kill the table must read with no row twice; after the final run every source row is in it exactly
once, snapshot ids are contiguous, the sink's commit identifiers are exactly the batch ids in order, every
snapshot reads, and orphan-clean leaves exactly the files the live snapshots reference.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SEED = int(os.environ.get("LAKEFMT_CRASH_SEED", "20261122"))
ROWS_PER_FILE = 6
MIN_PENDING = 3  # unprocessed input files before each run, so an injected kill always has batches to hit
RUN_TIMEOUT_S = 240
TIMED = "timed"

# What each run does: an injected kill "<point>:<n>" (the n-th arrival at that point in that run, n drawn from
# 1-2) or a kill at a random moment, in a seeded order; then a final run that must complete.
KIND = {
    "in_write": "write",
    "task_written": "write",
    "before_publish": "before_publish",
    "in_publish": "before_publish",
    "after_publish": "after_publish",
    TIMED: TIMED,
}
INJECTED = (
    "in_write",
    "task_written",
    "before_publish",
    "in_publish",
    "after_publish",
    "after_publish",
    "after_publish",
)
N_TIMED = 3
MIN_KILLS = 10
MAX_RUNS = 16  # a plan the query outran (it finished first) is tried again, within this bound

TABLE_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("payload", pa.string())])


@dataclass
class Kill:
    run: int
    plan: str
    kind: str
    seconds: float
    marker: dict[str, object] = field(default_factory=dict)
    progress: str = ""  #: what the run got done before the kill: snapshots published, batches Spark recorded


@dataclass
class Harness:
    root: Path
    rng: random.Random
    input_dir: Path = field(init=False)
    table_uri: str = field(init=False)
    checkpoint: Path = field(init=False)
    inject_dir: Path = field(init=False)
    files: int = 0

    def __post_init__(self) -> None:
        self.input_dir = self.root / "input"
        self.table_uri = str(self.root / "table")
        self.checkpoint = self.root / "checkpoint"
        self.inject_dir = self.root / "inject"
        for d in (self.input_dir, self.inject_dir, self.root / "runs", self.root / "staging"):
            d.mkdir(parents=True)
        shutil.copy(HERE / "crash_sitecustomize.py", self.inject_dir / "sitecustomize.py")
        # The child and Spark's Python workers import lakefmt and the data source from this checkout, not from
        # whatever copy is installed (pyspark finds ``pyspark_*`` data sources on sys.path, PYTHONPATH included).
        (self.inject_dir / "lakefmt").symlink_to(REPO / "lakefmt", target_is_directory=True)
        (self.inject_dir / "pyspark_lakefmt").symlink_to(REPO / "spark" / "pyspark_lakefmt", target_is_directory=True)
        lakefmt.create_table(
            self.table_uri,
            TABLE_SCHEMA,
            partition_by=["part"],
            # tiny row groups: a task's files are open and half written while rows still arrive; small
            # manifests are merged into the base list every few commits, so merges are interrupted too
            options={"write.row-group-rows": "2", "manifest.merge-min-count": "3"},
        )

    # -- input ------------------------------------------------------------------------------------------
    def add_input_file(self) -> None:
        i = self.files
        ids = pa.array(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE), pa.int64())
        data = pa.table(
            {
                "id": ids,
                "part": pa.array([v % 2 for v in ids.to_pylist()], pa.int32()),
                "payload": [f"file-{i}-row-{v}" for v in ids.to_pylist()],
            }
        )
        staged = self.root / "staging" / f"in-{i:04d}.parquet"
        pq.write_table(data, staged)
        os.replace(staged, self.input_dir / staged.name)  # the file source never sees a partial file
        self.files += 1

    def all_ids(self) -> list[int]:
        return list(range(self.files * ROWS_PER_FILE))

    # -- the child --------------------------------------------------------------------------------------
    def marker_env(self) -> bytes:
        return f"LAKEFMT_CRASH_DIR={self.root}".encode()

    def start(self, run: int, plan: str | None) -> tuple[subprocess.Popen[bytes], Path, Path]:
        run_dir = self.root / "runs" / f"run-{run:02d}"
        run_dir.mkdir()
        # its own JVM: never attach to a gateway of this process (a session fixture may have one running)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEFMT_CRASH", "PYSPARK_GATEWAY_"))}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.inject_dir), env.get("PYTHONPATH")]))
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        env["LAKEFMT_CRASH_DIR"] = str(self.root)  # tags every process of the child (see stragglers)
        env["LAKEFMT_CRASH_STATE"] = str(run_dir)
        if plan is not None and plan != TIMED:
            env["LAKEFMT_CRASH_AT"] = plan
        started = run_dir / "started"
        log = run_dir / "child.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "crash_child.py"),
                    str(self.input_dir),
                    self.table_uri,
                    str(self.checkpoint),
                    str(started),
                ],
                cwd=self.root,  # nothing imported from the caller's folder; Spark's scratch files stay here
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # the child, its JVM and its workers: one process group
            )
        return proc, run_dir, started

    def stragglers(self) -> list[int]:
        """Live processes started by the child (they carry its marker in their environment), whichever
        process group they are in (pyspark's daemon makes its own)."""
        tag = self.marker_env()
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

    def kill_all(self, proc: subprocess.Popen[bytes] | None) -> None:
        """SIGKILL the child's group, then every straggler by pid; wait until none is left."""
        if proc is not None and proc.returncode is None:  # not reaped yet: its pid, so its group id, is ours
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        deadline = time.monotonic() + 30
        while True:
            left = self.stragglers()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise AssertionError(f"processes of the crash test survive SIGKILL: {left}")
            time.sleep(0.1)

    # -- the table --------------------------------------------------------------------------------------
    def table(self) -> lakefmt.Table:
        return lakefmt.open_table(self.table_uri)

    def committed_batches(self) -> set[int]:
        """Batch ids Spark has recorded as done in the checkpoint's commit log."""
        return {int(p.name) for p in (self.checkpoint / "commits").glob("[0-9]*")}


def _tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def _check_consistent(h: Harness, when: str) -> pa.Table:
    """The table reads, holds no row twice and only source rows; snapshot ids are contiguous."""
    t = h.table()
    snaps = t.snapshots()
    ids = [s.id for s in snaps]
    assert ids == list(range(1, len(ids) + 1)), f"{when}: snapshot ids not contiguous: {ids}"
    rows = t.to_arrow()
    got = rows.column("id").to_pylist()
    assert len(got) == len(set(got)), f"{when}: rows committed twice: {sorted(v for v in set(got) if got.count(v) > 1)}"
    assert set(got) <= set(h.all_ids()), f"{when}: rows that no source file holds"
    if snaps:
        assert snaps[-1].total_record_count == len(got), f"{when}: snapshot row count disagrees with the data"
    return rows


def _check_kill_point(h: Harness, kill: Kill) -> None:
    """An injected kill landed where it says: check the table and checkpoint state it claims."""
    m = kill.marker
    if "source" in m:  # the code under test is this checkout's
        assert str(m["source"]).startswith(str(h.inject_dir)), m["source"]
    store_ids = MetaStore(h.table().io).snapshot_ids()
    if kill.kind == "before_publish":
        assert m["snapshot"] not in store_ids, f"killed before publishing snapshot {m['snapshot']}, yet it exists"
        assert m["identifier"] not in h.committed_batches()
        if m["point"] == "in_publish":  # the temp file of the snapshot is left behind (an orphan)
            assert Path(str(m["temp"])).exists(), "in_publish: the snapshot's temp file should be left behind"
    elif kill.kind == "after_publish":
        assert m["snapshot"] in store_ids, f"killed after publishing snapshot {m['snapshot']}, yet it is missing"
        snap = h.table().snapshot(int(str(m["snapshot"])))
        assert snap.commit_identifier == m["identifier"]
        assert m["identifier"] not in h.committed_batches(), "Spark recorded the batch before the kill"
        hint = MetaStore(h.table().io).read_hint(layout.LATEST)
        assert hint != m["snapshot"], "killed before the LATEST hint moved: readers must probe past a stale hint"


def _run(h: Harness, run: int, plan: str | None) -> Kill | None:
    """One life of the child: ``plan`` kills it (returns the kill) or it runs to the end (returns None)."""
    pending = h.files - len(h.committed_batches())
    for _ in range(max(1, MIN_PENDING - pending)):  # new files arrive between runs too
        h.add_input_file()
    snaps0, batches0 = len(h.table().snapshots()), len(h.committed_batches())
    t0 = time.monotonic()
    proc, run_dir, started = h.start(run, plan)
    try:
        if plan == TIMED:  # a random moment of the query's life: early on, or once it has committed a batch
            anchor = started
            if h.rng.random() < 0.5:
                anchor = Path(h.table_uri) / layout.snapshot_path(snaps0 + 1)
            while not anchor.exists() and proc.poll() is None and time.monotonic() - t0 < RUN_TIMEOUT_S:
                time.sleep(0.02)
            deadline = time.monotonic() + h.rng.uniform(0.0, 4.0 if anchor == started else 1.5)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None:
                kill = Kill(run, plan, TIMED, time.monotonic() - t0)
                h.kill_all(proc)
                kill.progress = f"+{len(h.table().snapshots()) - snaps0}s/+{len(h.committed_batches()) - batches0}b"
                return kill
        try:
            rc = proc.wait(timeout=max(1.0, RUN_TIMEOUT_S - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run {run} ({plan}) hung:\n{_tail(run_dir / 'child.log')}") from None
    finally:
        h.kill_all(proc)  # whatever happened: the child's group, then any straggler (pyspark's daemons)
    marker_file = run_dir / "killed.json"
    if marker_file.exists():
        assert plan not in (None, TIMED), f"run {run} ({plan}): an injected kill fired unasked"
        marker = json.loads(marker_file.read_text())
        assert rc == -signal.SIGKILL, f"run {run}: injected kill, yet exit code {rc}"
        kill = Kill(run, plan, KIND[marker["point"]], time.monotonic() - t0, marker)
        kill.progress = f"+{len(h.table().snapshots()) - snaps0}s/+{len(h.committed_batches()) - batches0}b"
        _check_kill_point(h, kill)
        return kill
    if rc != 0:
        raise AssertionError(f"run {run} ({plan}) failed with exit code {rc}:\n{_tail(run_dir / 'child.log')}")
    return None


def test_streaming_sink_is_exactly_once_under_sigkill(tmp_path: Path) -> None:
    began = time.monotonic()
    rng = random.Random(SEED)
    plans = [f"{point}:{rng.choice((1, 2))}" for point in INJECTED] + [TIMED] * N_TIMED
    rng.shuffle(plans)
    h = Harness(tmp_path / "crash", rng)
    kills: list[Kill] = []
    missed: list[str] = []
    run = 0
    try:
        while plans and run < MAX_RUNS:
            plan = plans.pop(0)
            kill = _run(h, run, plan)
            if kill is not None:
                kills.append(kill)
            else:  # the query finished before the kill: try that plan again
                missed.append(plan)
                plans.append(plan)
            _check_consistent(h, f"after run {run} ({plan})")
            run += 1
        completed = _run(h, run, None) is None  # the final run: no kill, the query must complete
        _check_consistent(h, "after the final run")
    finally:
        h.kill_all(None)  # backstop: no process of the child outlives the test

    # -- every kind of kill point was hit, and enough kills landed ----------------------------------------
    by_kind = {k: sum(1 for x in kills if x.kind == k) for k in ("write", "before_publish", "after_publish", TIMED)}
    summary = (
        f"{len(kills)} kills {by_kind}, missed {missed}, {h.files} input files, "
        f"{time.monotonic() - began:.0f}s: " + ", ".join(f"{k.plan}@{k.seconds:.1f}s({k.progress})" for k in kills)
    )
    print(summary)
    assert completed, f"the final run did not complete: {summary}"
    assert len(kills) >= MIN_KILLS, summary
    assert all(by_kind[k] >= 1 for k in ("write", "before_publish", "after_publish")), summary
    assert not h.stragglers()

    # -- exactly once --------------------------------------------------------------------------------------
    t = h.table()
    rows = _check_consistent(h, "at the end")
    assert sorted(rows.column("id").to_pylist()) == h.all_ids(), "a source row is missing"
    batches = sorted(h.committed_batches())
    # Spark plans at most one input file per micro-batch, but a batch re-planned after a kill may take two
    assert batches == list(range(len(batches))) and 0 < len(batches) <= h.files, f"Spark committed {batches}"

    snaps = t.snapshots()
    users = {s.commit_user for s in snaps}
    assert len(users) == 1 and next(iter(users)).startswith("spark-stream-"), users
    user = next(iter(users))
    identifiers = [s.commit_identifier for s in snaps]
    assert all(a < b for a, b in itertools.pairwise(identifiers)), identifiers
    assert identifiers == batches, "each micro-batch must be committed exactly once, in order"
    assert t.commit_user_identifier(user) == batches[-1]

    seen: set[int] = set()
    for s in snaps:  # every snapshot reads, and holds what the one before held plus its own batch
        data = t.scan(snapshot_id=s.id).to_arrow()
        ids = set(data.column("id").to_pylist())
        assert data.num_rows == len(ids) == s.total_record_count
        assert seen < ids
        seen = ids

    # -- orphan-clean returns the store to exactly the referenced files -----------------------------------
    report = t.remove_orphan_files(older_than=0)
    assert report.total_files, "the kills should have left garbage for orphan-clean"
    on_disk = {f.path for f in t.io.walk()}
    refs = referenced_files(MetaStore(t.io))
    hints = {layout.LATEST, layout.EARLIEST}
    assert on_disk == {p for p in refs if p not in hints or t.io.exists(p)}, (
        f"left behind: {sorted(on_disk - refs)}; missing: {sorted(refs - on_disk - hints)}"
    )
    assert sorted(t.to_arrow().column("id").to_pylist()) == h.all_ids()
