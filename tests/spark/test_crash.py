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

and at random moments (seeded). The run after the first after-publish kill restarts the query with a new column
(``country``) and ``mergeSchema``: the schema changes mid-stream, and the batch that kill left unrecorded is
replayed with the column and must be skipped (its rows stay as committed, without it). Points 1-3 are injected
from outside the product: crash_sitecustomize.py is put first on the child's PYTHONPATH as ``sitecustomize``,
which Spark's Python workers run at start-up too.

After each kill the table must read with no row twice; after the final run every source row is in it exactly
once, snapshot ids are contiguous, the sink's commit identifiers are exactly the batch ids in order, every
snapshot reads, and orphan-clean leaves exactly the files the live snapshots reference. The machinery (the child's
lives, kills and checks) is shared with test_chain.py in kill_harness.py.

CI kills 6 times: each point once and once at random (test_chain.py kills the same sink 7 times beside it, the
after-publish window twice and one random kill among them); ``LAKEFMT_FULL_FAULTS=1`` kills 10 times, the
after-publish window three times and three at random.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kill_harness import (
    FULL,
    HERE,
    REQUIRED_KINDS,
    ChildDriver,
    Kill,
    check_contiguous,
    check_no_duplicates,
    check_orphan_clean,
    check_sink_history,
    kinds_hit,
    plans,
    run_life,
    summary,
)

import lakefmt

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = int(os.environ.get("LAKEFMT_CRASH_SEED", "20261122"))
ROWS_PER_FILE = 6
MIN_PENDING = 3  # unprocessed input files before each run, so an injected kill always has batches to hit

# What each run does: an injected kill "<point>:<n>" (the n-th arrival at that point in that run, n drawn from
# 1-2) or a kill at a random moment, in a seeded order; then a final run that must complete.
# CI kills each point once plus one random kill: 6 kills, with test_chain.py's 7 kills of the same sink beside
# it (the after-publish window twice among them, and one random kill); LAKEFMT_FULL_FAULTS=1 runs the
# after-publish window three times and three random kills: 10 kills. Each kill is a driver life: a JVM, a
# session and a query start (20 to 27 s on 2 idle cores).
INJECTED = (
    "in_write",
    "task_written",
    "before_publish",
    "in_publish",
    "after_publish",
    *(("after_publish", "after_publish") if FULL else ()),
)
N_TIMED = 3 if FULL else 1
MIN_KILLS = len(INJECTED) + N_TIMED
MAX_RUNS = 16  # a plan the query outran (it finished first) is tried again, within this bound

TABLE_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("payload", pa.string())])


@dataclass
class Harness:
    root: Path
    input_dir: Path = field(init=False)
    staging: Path = field(init=False)
    driver: ChildDriver = field(init=False)
    files: int = 0
    country: bool = False  #: runs from now on bring the column ``country`` with mergeSchema
    replayed: dict[str, object] | None = None  #: the after-publish kill's marker whose batch the change replays

    def __post_init__(self) -> None:
        self.input_dir = self.root / "input"
        self.staging = self.root / "staging"
        for d in (self.input_dir, self.staging):
            d.mkdir(parents=True)
        table_uri, checkpoint = str(self.root / "table"), self.root / "checkpoint"
        self.driver = ChildDriver(
            self.root, HERE / "crash_child.py", [str(self.input_dir), table_uri, str(checkpoint)], table_uri, checkpoint
        )
        lakefmt.create_table(
            table_uri,
            TABLE_SCHEMA,
            partition_by=["part"],
            # tiny row groups: a task's files are open and half written while rows still arrive; small
            # manifests are merged into the base list every few commits, so merges are interrupted too
            # (no automatic compaction: every snapshot is a micro-batch's commit, as the kill points count them)
            options={"write.row-group-rows": "2", "manifest.merge-min-count": "3", "compaction.auto": "false"},
        )

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
        staged = self.staging / f"in-{i:04d}.parquet"
        pq.write_table(data, staged)
        os.replace(staged, self.input_dir / staged.name)  # the file source never sees a partial file
        self.files += 1

    def all_ids(self) -> list[int]:
        return list(range(self.files * ROWS_PER_FILE))


def _check_consistent(h: Harness, when: str) -> pa.Table:
    """The table reads, holds no row twice and only source rows; snapshot ids are contiguous."""
    t = h.driver.table()
    snaps = check_contiguous(t, when)
    rows = t.to_arrow()
    got = check_no_duplicates(rows, when)
    assert set(got) <= set(h.all_ids()), f"{when}: rows that no source file holds"
    if snaps:
        assert snaps[-1].total_record_count == len(got), f"{when}: snapshot row count disagrees with the data"
    return rows


def _check_schema_change(h: Harness, t: lakefmt.Table, text: str) -> None:
    """One schema change, mid-stream; each snapshot's rows are all without ``country`` (committed before it) or
    all with it; the batch the change's run replayed kept its rows as committed before the change, once."""
    assert h.replayed is not None, f"no after-publish kill, so no schema change mid-stream: {text}"
    assert [s.id for s in t.schemas()] == [0, 1]
    assert t.schema().names == ["id", "part", "payload", "country"]
    before, after = [], []
    for s in t.snapshots():
        added = t.scan(from_snapshot=s.id - 1, to_snapshot=s.id).to_arrow().to_pylist()
        if not added:
            continue
        if all(r.get("country") is None for r in added):  # (a snapshot of schema 0 reads without it)
            assert s.schema_id == 0, f"snapshot {s.id} of schema {s.schema_id}: rows without the new column"
            before.append(s.id)
        else:
            assert all(r["country"] == f"c{r['id'] % 2}" for r in added), f"snapshot {s.id}: wrong values"
            assert s.schema_id == 1, f"snapshot {s.id}"
            after.append(s.id)
    assert before and after and max(before) < min(after), (before, after)
    assert h.replayed["snapshot"] in before, h.replayed  # the replay with the column was skipped


def _run(h: Harness, run: int, plan: str | None, rng: random.Random) -> Kill | None:
    """One life of the child, with new input files first (they arrive between runs too)."""
    pending = h.files - len(h.driver.committed_batches())
    for _ in range(max(1, MIN_PENDING - pending)):
        h.add_input_file()
    return run_life(h.driver, run, plan, rng, ["--country"] if h.country else [])


def test_streaming_sink_is_exactly_once_under_sigkill(tmp_path: Path) -> None:
    began = time.monotonic()
    rng = random.Random(SEED)
    todo = plans(rng, INJECTED, N_TIMED)
    h = Harness(tmp_path / "crash")
    kills: list[Kill] = []
    missed: list[str] = []
    run = 0
    try:
        while todo and run < MAX_RUNS:
            plan = todo.pop(0)
            kill = _run(h, run, plan, rng)
            if kill is not None:
                kills.append(kill)
                if kill.kind == "after_publish" and not h.country:  # the schema changes in the next run
                    h.country, h.replayed = True, kill.marker
            else:  # the query finished before the kill: try that plan again
                missed.append(plan)
                todo.append(plan)
            _check_consistent(h, f"after run {run} ({plan})")
            run += 1
        completed = _run(h, run, None, rng) is None  # the final run: no kill, the query must complete
        _check_consistent(h, "after the final run")
    finally:
        h.driver.kill_all(None)  # backstop: no process of the child outlives the test

    # -- every kind of kill point was hit, and enough kills landed ----------------------------------------
    text = summary(kills, missed, began, f"{h.files} input files")
    print(text)
    assert completed, f"the final run did not complete: {text}"
    assert len(kills) >= MIN_KILLS, text
    assert all(kinds_hit(kills)[k] >= 1 for k in REQUIRED_KINDS), text
    assert not h.driver.stragglers()

    # -- exactly once --------------------------------------------------------------------------------------
    t = h.driver.table()
    rows = _check_consistent(h, "at the end")
    assert sorted(rows.column("id").to_pylist()) == h.all_ids(), "a source row is missing"
    batches = sorted(h.driver.committed_batches())
    # Spark plans at most one input file per micro-batch, but a batch re-planned after a kill may take two
    assert 0 < len(batches) <= h.files, f"Spark committed {batches}"
    check_sink_history(t, batches)
    _check_schema_change(h, t, text)

    # -- orphan-clean returns the store to exactly the referenced files -----------------------------------
    check_orphan_clean(t)
    assert sorted(t.to_arrow().column("id").to_pylist()) == h.all_ids()
