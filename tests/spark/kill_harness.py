"""What the Spark SIGKILL tests share (test_crash.py: a file source into a lakefmt sink; test_chain.py: a lakefmt
table streamed into another): a streaming driver run as a child process that is its own process group, with its
JVM and Python workers, killed with SIGKILL and restarted from the same checkpoint; the kill plans; and the checks
of the sink table after each kill and at the end.

A *plan* says how one life of the child ends: ``"<point>:<n>"`` kills it the n-th time (counted across every
Python process of the child) it reaches an injection point of crash_sitecustomize.py; :data:`TIMED` kills it at a
random moment; None lets it run to its end. :func:`run_life` runs one life and returns the :class:`Kill` (or None).
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKER_PATH = HERE / "worker_path"  #: pyspark_site.py: Spark's Python processes import the installed pyspark
FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
RUN_TIMEOUT_S = 240
TIMED = "timed"

#: what each injection point of crash_sitecustomize.py (and a timed kill) is, for the checks and the summary
KIND = {
    "in_write": "write",
    "task_written": "write",
    "before_publish": "before_publish",
    "in_publish": "before_publish",
    "after_publish": "after_publish",
    TIMED: TIMED,
}
#: the kinds every SIGKILL test must have hit at least once
REQUIRED_KINDS = ("write", "before_publish", "after_publish")


def plans(rng: random.Random, injected: Sequence[str], timed: int) -> list[str]:
    """A seeded, shuffled kill plan: each injected point once (its n-th arrival, n drawn from 1-2), and ``timed``
    kills at random moments."""
    out = [f"{point}:{rng.choice((1, 2))}" for point in injected] + [TIMED] * timed
    rng.shuffle(out)
    return out


@dataclass
class Kill:
    run: int
    plan: str
    kind: str
    seconds: float
    marker: dict[str, object] = field(default_factory=dict)
    progress: str = ""  #: what the run got done before the kill: snapshots published, batches Spark recorded


@dataclass
class ChildDriver:
    """A streaming driver script (``script ARGS... STARTED_MARKER EXTRA...``) writing into the lakefmt table
    ``table_uri`` with the checkpoint ``checkpoint``; its scratch lives under ``root``."""

    root: Path
    script: Path
    args: list[str]
    table_uri: str
    checkpoint: Path
    inject_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.inject_dir = self.root / "inject"
        for d in (self.inject_dir, self.root / "runs"):
            d.mkdir(parents=True)
        shutil.copy(HERE / "crash_sitecustomize.py", self.inject_dir / "sitecustomize.py")
        # The child and Spark's Python workers import lakefmt and the data source from this checkout, not from
        # whatever copy is installed (pyspark finds ``pyspark_*`` data sources on sys.path, PYTHONPATH included).
        (self.inject_dir / "lakefmt").symlink_to(REPO / "lakefmt", target_is_directory=True)
        (self.inject_dir / "pyspark_lakefmt").symlink_to(REPO / "spark" / "pyspark_lakefmt", target_is_directory=True)

    def marker_env(self) -> bytes:
        return f"LAKEFMT_CRASH_DIR={self.root}".encode()

    def start(self, run: int, plan: str | None, extra: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], Path]:
        """Start one life of the child; returns it and its run folder (``started``, ``child.log``, the marker)."""
        run_dir = self.root / "runs" / f"run-{run:02d}"
        run_dir.mkdir()
        # its own JVM: never attach to a gateway of this process (a session fixture may have one running)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEFMT_CRASH", "PYSPARK_GATEWAY_"))}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(self.inject_dir), str(WORKER_PATH), env.get("PYTHONPATH")])
        )
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        env["LAKEFMT_CRASH_DIR"] = str(self.root)  # tags every process of the child (see stragglers)
        env["LAKEFMT_CRASH_STATE"] = str(run_dir)
        if plan is not None and plan != TIMED:
            env["LAKEFMT_CRASH_AT"] = plan
        with open(run_dir / "child.log", "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(self.script), *self.args, str(run_dir / "started"), *extra],
                cwd=self.root,  # nothing imported from the caller's folder; Spark's scratch files stay here
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # the child, its JVM and its workers: one process group
            )
        return proc, run_dir

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
                raise AssertionError(f"processes of the SIGKILL test survive SIGKILL: {left}")
            time.sleep(0.1)

    def table(self) -> lakefmt.Table:
        return lakefmt.open_table(self.table_uri)

    def committed_batches(self) -> set[int]:
        """Batch ids Spark has recorded as done in the checkpoint's commit log."""
        return {int(p.name) for p in (self.checkpoint / "commits").glob("[0-9]*")}

    def progress_since(self, snaps0: int, batches0: int) -> str:
        return f"+{len(self.table().snapshots()) - snaps0}s/+{len(self.committed_batches()) - batches0}b"


def tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def run_life(
    d: ChildDriver, run: int, plan: str | None, rng: random.Random, extra: Sequence[str] = ()
) -> Kill | None:
    """One life of the child: ``plan`` kills it (returns the kill, checked with :func:`check_kill_point`) or it
    runs to its end, exit code 0 (returns None). A timed kill lands at a random moment, early on or once the
    life has published a snapshot."""
    snaps0, batches0 = len(d.table().snapshots()), len(d.committed_batches())
    t0 = time.monotonic()
    proc, run_dir = d.start(run, plan, extra)
    try:
        if plan == TIMED:
            anchor = run_dir / "started"
            if rng.random() < 0.5:
                anchor = Path(d.table_uri) / layout.snapshot_path(snaps0 + 1)
            while not anchor.exists() and proc.poll() is None and time.monotonic() - t0 < RUN_TIMEOUT_S:
                time.sleep(0.02)
            deadline = time.monotonic() + rng.uniform(0.0, 4.0 if anchor.name == "started" else 1.5)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None:
                kill = Kill(run, plan, TIMED, time.monotonic() - t0)
                d.kill_all(proc)
                kill.progress = d.progress_since(snaps0, batches0)
                return kill
        try:
            rc = proc.wait(timeout=max(1.0, RUN_TIMEOUT_S - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run {run} ({plan}) hung:\n{tail(run_dir / 'child.log')}") from None
    finally:
        d.kill_all(proc)  # whatever happened: the child's group, then any straggler (pyspark's daemons)
    marker_file = run_dir / "killed.json"
    if marker_file.exists():
        assert plan not in (None, TIMED), f"run {run} ({plan}): an injected kill fired unasked"
        marker = json.loads(marker_file.read_text())
        assert rc == -signal.SIGKILL, f"run {run}: injected kill, yet exit code {rc}"
        kill = Kill(run, plan or "", KIND[marker["point"]], time.monotonic() - t0, marker)
        kill.progress = d.progress_since(snaps0, batches0)
        check_kill_point(d, kill)
        return kill
    if rc != 0:
        raise AssertionError(f"run {run} ({plan}) failed with exit code {rc}:\n{tail(run_dir / 'child.log')}")
    return None


def check_kill_point(d: ChildDriver, kill: Kill) -> None:
    """An injected kill landed where it says: check the table and checkpoint state it claims."""
    m = kill.marker
    if "source" in m:  # the code under test is this checkout's
        assert str(m["source"]).startswith(str(d.inject_dir)), m["source"]
    store_ids = MetaStore(d.table().io).snapshot_ids()
    # the snapshot of a schema change (mergeSchema) or of an automatic compaction (a key table's, committed by the
    # sink's commit after the batch's) is no batch's: its identifier says nothing of Spark's batches
    batch = not str(m.get("user") or "").startswith(("oneoff-", "compact-"))
    if kill.kind == "before_publish":
        assert m["snapshot"] not in store_ids, f"killed before publishing snapshot {m['snapshot']}, yet it exists"
        assert not batch or m["identifier"] not in d.committed_batches()
        if m["point"] == "in_publish":  # the temp file of the snapshot is left behind (an orphan)
            assert Path(str(m["temp"])).exists(), "in_publish: the snapshot's temp file should be left behind"
    elif kill.kind == "after_publish":
        assert m["snapshot"] in store_ids, f"killed after publishing snapshot {m['snapshot']}, yet it is missing"
        snap = d.table().snapshot(int(str(m["snapshot"])))
        assert snap.commit_identifier == m["identifier"]
        assert not batch or m["identifier"] not in d.committed_batches(), "Spark recorded the batch before the kill"
        hint = MetaStore(d.table().io).read_hint(layout.LATEST)
        assert hint != m["snapshot"], "killed before the LATEST hint moved: readers must probe past a stale hint"


def summary(kills: Sequence[Kill], missed: Sequence[str], began: float, what: str) -> str:
    by_kind = kinds_hit(kills)
    return (
        f"{len(kills)} kills {by_kind}, missed {list(missed)}, {what}, {time.monotonic() - began:.0f}s: "
        + ", ".join(f"{k.plan}@{k.seconds:.1f}s({k.progress})" for k in kills)
    )


def kinds_hit(kills: Sequence[Kill]) -> dict[str, int]:
    return {k: sum(1 for x in kills if x.kind == k) for k in (*REQUIRED_KINDS, TIMED)}


def check_contiguous(table: lakefmt.Table, when: str) -> list[lakefmt.Snapshot]:
    """The table's snapshot ids are 1..n; returns the snapshots."""
    snaps = table.snapshots()
    ids = [s.id for s in snaps]
    assert ids == list(range(1, len(ids) + 1)), f"{when}: snapshot ids not contiguous: {ids}"
    return snaps


def check_no_duplicates(rows: pa.Table, when: str, key: str = "id") -> list[int]:
    got = rows.column(key).to_pylist()
    assert len(got) == len(set(got)), f"{when}: rows committed twice: {sorted(v for v in set(got) if got.count(v) > 1)}"
    return got


def check_sink_history(table: lakefmt.Table, batches: list[int], *, key: str = "id", strict: bool = True) -> None:
    """A streaming sink's table after the query completed: one commit user (the sink's default), whose commit
    identifiers are exactly Spark's batch ids in order, one snapshot each; every snapshot reads, and holds what
    the one before it held plus its own batch (no row twice; ``strict``: every batch added rows)."""
    assert batches == list(range(len(batches))), f"Spark committed {batches}"
    # a schema change (mergeSchema) publishes a snapshot of its own, which adds no row and is no batch's; so does
    # an automatic compaction after a batch's commit (on by default), which changes no row
    snaps = [
        s
        for s in check_contiguous(table, "at the end")
        if not is_schema_change(s) and s.commit_kind is not lakefmt.CommitKind.COMPACT
    ]
    users = {s.commit_user for s in snaps}
    assert len(users) == 1 and next(iter(users)).startswith("spark-stream-"), users
    user = next(iter(users))
    identifiers = [s.commit_identifier for s in snaps]
    assert all(a < b for a, b in itertools.pairwise(identifiers)), identifiers
    assert identifiers == batches, "each micro-batch must be committed exactly once, in order"
    assert table.commit_user_identifier(user) == batches[-1]
    seen: set[int] = set()
    for s in snaps:
        data = table.scan(snapshot_id=s.id).to_arrow()
        ids = set(data.column(key).to_pylist())
        assert data.num_rows == len(ids) == s.total_record_count, f"snapshot {s.id}"
        assert seen < ids if strict else seen <= ids, f"snapshot {s.id} lost rows or added none"
        seen = ids


def is_schema_change(snap: lakefmt.Snapshot) -> bool:
    """Whether ``snap`` is the snapshot that records a schema change (no files, a one-off commit user)."""
    return (snap.properties or {}).get("lakefmt.operation") == "schema-change"


def check_orphan_clean(table: lakefmt.Table) -> None:
    """orphan-clean with age 0 leaves exactly the files the live snapshots reference (the kills left some)."""
    report = table.remove_orphan_files(older_than=0)
    assert report.total_files, "the kills should have left garbage for orphan-clean"
    on_disk = {f.path for f in table.io.walk()}
    refs = referenced_files(MetaStore(table.io))
    hints = {layout.LATEST, layout.EARLIEST}
    left = unreferenced(on_disk, refs)  # a data file's key index is referenced with it
    missing = refs - on_disk - hints
    assert not left and not missing, f"left behind: {sorted(left)}; missing: {sorted(missing)}"
