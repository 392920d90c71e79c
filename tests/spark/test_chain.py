"""Exactly-once from one lakefmt table to another under real SIGKILLs: bronze -> silver.

A streaming query (tests/spark/chain_child.py) reads the lakefmt table bronze with the streaming source
(``readStream.format("lakefmt")``, a few files per micro-batch, a consumer id), keeps the rows matching a filter,
adds a derived column and writes into the lakefmt table silver. It runs in a child process that is its own
process group, with its JVM, on a short processing-time trigger, while a third process (chain_appender.py) keeps
appending to bronze with plain ``Table.append``. The test SIGKILLs the child's whole group again and again and
restarts it from the same checkpoint. The kills land (see kill_harness.py and crash_sitecustomize.py):

1. during a micro-batch's tasks, which read bronze and write silver (``in_write``: silver's data files half
   written; ``task_written``: files and manifest written, the message never reaches the driver);
2. inside the sink's commit, before the snapshot is published (``before_publish``, ``in_publish``);
3. after the publish, before Spark records the batch (``after_publish``): the restarted query replays the batch
   with the same offsets of bronze and the same batch id, and the sink's dedup must skip it;

and at random moments (seeded). Then the appender stops and the query is resumed to completion
(``Trigger.AvailableNow``). Silver must hold bronze's rows transformed, each exactly once; silver's snapshot ids
are contiguous and its commit identifiers are the batch ids in order; every snapshot of both tables reads; the
source's consumer record names the snapshot after bronze's latest; orphan-clean with age 0 leaves exactly the
files silver's snapshots reference.

The appender is paced by the stream's consumer record: it waits while the stream has MAX_AHEAD bronze snapshots
or more still to read, so the backlog never grows with the machine's load. CI runs 7 kills (each injected point
once, the after-publish window twice, and one random kill); ``LAKEFMT_FULL_FAULTS=1`` runs 30. Each driver life
costs a JVM and Spark session start and the query's start (about 20 s on 2 busy cores): 10 kills took 254 to
413 s with other suites running (load average 3-5), the 30 took 1,001 s.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from chain_appender import ROWS_PER_APPEND, SCHEMA, rows
from chain_child import CONSUMER_ID
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

SEED = int(os.environ.get("LAKEFMT_CHAIN_SEED", "20261207"))
INJECTED = ("in_write", "task_written", "before_publish", "in_publish", "after_publish", "after_publish")
N_TIMED = 12 if FULL else 1
ROUNDS = 3 if FULL else 1  # each injected point this many times
MIN_KILLS = len(INJECTED) * ROUNDS + N_TIMED
APPEND_INTERVAL_S = 0.5
MAX_AHEAD = 8  # the appender waits while the stream has this many bronze snapshots still to read
FIRST_APPENDS = 3  # bronze's content before the stream's first start: its initial snapshot

SILVER_SCHEMA = SCHEMA.append(pa.field("score", pa.int64()))


def transform(bronze: pa.Table) -> pa.Table:
    """What chain_child.py's query does to bronze's rows (``id % 4 <> 1``; ``score = id * 10 + part``)."""
    kept = bronze.filter(pc.not_equal(pc.bit_wise_and(bronze.column("id"), 3), 1))
    score = pc.add(pc.multiply(kept.column("id"), 10), kept.column("part").cast(pa.int64()))
    return kept.append_column("score", score)


def row_set(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(t.column(n).to_pylist() for n in SILVER_SCHEMA.names), strict=True))


@dataclass
class Chain:
    root: Path
    bronze_uri: str = field(init=False)
    driver: ChildDriver = field(init=False)
    appender: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.bronze_uri, silver_uri = str(self.root / "bronze"), str(self.root / "silver")
        checkpoint = self.root / "checkpoint"
        self.driver = ChildDriver(
            self.root, HERE / "chain_child.py", [self.bronze_uri, silver_uri, str(checkpoint)], silver_uri, checkpoint
        )
        # no automatic compaction in either table: every snapshot is an append or a micro-batch's commit, as the
        # kill points and the history checks count them
        bronze = lakefmt.create_table(
            self.bronze_uri, SCHEMA, partition_by=["part"], options={"compaction.auto": "false"}
        )
        for k in range(FIRST_APPENDS):
            bronze.append(rows(k))
        lakefmt.create_table(
            silver_uri,
            SILVER_SCHEMA,
            partition_by=["part"],
            # tiny row groups: a task's files are open and half written while rows still arrive; small
            # manifests are merged into the base list every few commits, so merges are interrupted too
            options={"write.row-group-rows": "2", "manifest.merge-min-count": "3", "compaction.auto": "false"},
        )

    def bronze(self) -> lakefmt.Table:
        return lakefmt.open_table(self.bronze_uri)

    def silver(self) -> lakefmt.Table:
        return self.driver.table()

    # -- the third process ------------------------------------------------------------------------------
    def start_appender(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEFMT_CRASH", "PYSPARK_GATEWAY_"))}
        with open(self.root / "appender.log", "wb") as out:
            self.appender = subprocess.Popen(
                [sys.executable, str(HERE / "chain_appender.py"), self.bronze_uri, str(self.root / "stop"),
                 str(APPEND_INTERVAL_S), str(FIRST_APPENDS), CONSUMER_ID, str(MAX_AHEAD)],
                cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )

    def stop_appender(self) -> int:
        """Ask the appender to stop after its current append; its exit code."""
        assert self.appender is not None
        (self.root / "stop").touch()
        try:
            return self.appender.wait(timeout=60)
        finally:
            self.kill_appender()

    def kill_appender(self) -> None:
        if self.appender is not None and self.appender.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.appender.pid, signal.SIGKILL)
            self.appender.wait()

    def appended(self) -> int:
        """Appends the appender has committed so far."""
        return sum(1 for line in (self.root / "appender.log").read_text().splitlines() if line.startswith("appended"))


def _check_consistent(c: Chain, when: str) -> tuple[pa.Table, pa.Table]:
    """Both tables read; silver's snapshot ids are contiguous, it holds no row twice and only bronze's rows
    transformed (bronze only grows, so whatever silver read of it is still there)."""
    bronze = c.bronze().to_arrow()
    check_no_duplicates(bronze, f"{when}, bronze")
    silver_table = c.silver()
    snaps = check_contiguous(silver_table, when)
    silver = silver_table.to_arrow()
    check_no_duplicates(silver, when)
    extra = set(row_set(silver)) - set(row_set(transform(bronze)))
    assert not extra, f"{when}: silver rows that are not bronze's rows transformed: {sorted(extra)[:5]}"
    if snaps:
        assert snaps[-1].total_record_count == silver.num_rows, f"{when}: snapshot row count disagrees with the data"
    return bronze, silver


def test_bronze_to_silver_is_exactly_once_under_sigkill(tmp_path: Path) -> None:
    began = time.monotonic()
    rng = random.Random(SEED)
    todo = [p for _ in range(ROUNDS) for p in plans(rng, INJECTED, 0)] + plans(rng, (), N_TIMED)
    rng.shuffle(todo)
    c = Chain(tmp_path / "chain")
    kills: list[Kill] = []
    try:
        c.start_appender()
        for run, plan in enumerate(todo):
            kill = run_life(c.driver, run, plan, rng, ["running"])
            assert kill is not None, f"run {run} ({plan}) ended unasked: a processing-time query runs until killed"
            kills.append(kill)
            _check_consistent(c, f"after run {run} ({plan})")
        appended_while_killing = c.appended()
        assert c.stop_appender() == 0, (tmp_path / "chain" / "appender.log").read_text()[-2000:]
        completed = run_life(c.driver, len(todo), None, rng, ["available-now"]) is None
        bronze, silver = _check_consistent(c, "after the final run")
    finally:
        c.kill_appender()
        c.driver.kill_all(None)  # backstop: no process of the child outlives the test

    # -- enough kills of every kind landed while bronze kept growing --------------------------------------
    text = summary(kills, [], began, f"{c.appended()} appends to bronze")
    print(text)
    assert completed, f"the final run did not complete: {text}"
    assert len(kills) >= MIN_KILLS, text
    assert all(kinds_hit(kills)[k] >= 1 for k in REQUIRED_KINDS), text
    assert appended_while_killing >= len(kills), f"the appender did not keep up: {text}"
    assert not c.driver.stragglers()

    # -- silver is bronze's rows transformed, each exactly once ---------------------------------------------
    assert bronze.num_rows == (FIRST_APPENDS + c.appended()) * ROWS_PER_APPEND
    assert row_set(silver) == row_set(transform(bronze)), "silver is not bronze's rows transformed"
    batches = sorted(c.driver.committed_batches())
    check_sink_history(c.silver(), batches)

    # -- every snapshot of bronze reads; the consumer is where the stream stopped --------------------------
    b = c.bronze()
    for s in check_contiguous(b, "bronze"):
        data = b.scan(snapshot_id=s.id).to_arrow()
        assert data.num_rows == s.total_record_count == s.id * ROWS_PER_APPEND, s.id
    latest = b.latest_snapshot()
    assert latest is not None
    print(f"bronze: {bronze.num_rows} rows in {latest.id} snapshots; silver: {silver.num_rows} rows in {len(batches)} "
          "micro-batches")
    consumers = {x.consumer_id: x.next_snapshot for x in b.consumers()}
    assert consumers == {CONSUMER_ID: latest.id + 1}, consumers

    # -- orphan-clean returns silver to exactly the referenced files ---------------------------------------
    check_orphan_clean(c.silver())
    assert row_set(c.silver().to_arrow()) == row_set(transform(bronze))
