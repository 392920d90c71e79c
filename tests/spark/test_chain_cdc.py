"""Upserts and deletes carried from one key table to another, exactly once under real SIGKILLs: bronze -> silver.

Bronze is a key table that a process of its own (chain_cdc_writer.py) keeps changing with ``Table.upsert`` and
``Table.delete_keys``: the same few keys inserted, updated and deleted again and again. A streaming query
(chain_cdc_child.py, its own process group with its JVM) reads bronze's change feed (``readChangeFeed``, a
consumer id) and writes it through the lakefmt streaming sink into silver, a key table whose ``rowkind.field`` is
the feed's ``_change_type`` (Delta's spelling: inserts and update post-images upsert, deletes delete, pre-images
are ignored) and whose ``sequence.field`` is ``_commit_snapshot`` (of a key's changes in one micro-batch, the
latest snapshot's wins). The test SIGKILLs the query's driver (see kill_harness.py) and restarts it from its
checkpoint; the bronze writer is plain Python and keeps going. Then the writer stops and the query is resumed to
completion (``Trigger.AvailableNow``). Silver must hold exactly bronze's live rows (key -> row), one per key, after
every kill and at the end; silver's snapshots are contiguous, each reads with one row per key, and no micro-batch
was committed twice; the consumer record names bronze's latest snapshot; orphan-clean leaves exactly the files
silver references.

CI runs one kill: after silver's second publish, before Spark records the batch, so the restarted query replays
that batch and the sink must recognise and skip it. ``LAKEFMT_FULL_FAULTS=1`` runs every injection point of
crash_sitecustomize.py and six kills at random moments.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from chain_cdc_child import COLUMNS, CONSUMER_ID
from chain_cdc_writer import SCHEMA, step
from kill_harness import FULL, HERE, ChildDriver, Kill, check_contiguous, run_life, summary

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = int(os.environ.get("LAKEFMT_CHAIN_SEED", "20261126"))
INJECTED = ("in_write", "task_written", "before_publish", "in_publish", "after_publish")
PLANS = ([f"{p}:2" for p in INJECTED] + ["timed"] * 6) if FULL else ["after_publish:2"]
INTERVAL_S = 0.4
MAX_AHEAD = 8
FIRST_STEPS = 3  #: bronze's steps before the stream's first start: its initial snapshot, read as inserts
SILVER_SCHEMA = pa.schema(
    [*SCHEMA, pa.field("_change_type", pa.string()), pa.field("_commit_snapshot", pa.int64())]
)
SILVER_OPTIONS = {
    "bucket": "2",
    "rowkind.field": "_change_type",
    "rowkind.format": "delta",
    "sequence.field": "_commit_snapshot",
    "write.row-group-rows": "2",  # a task's files are open and half written while rows still arrive
    "changelog-producer": "lookup",  # the sink's commits store their change rows (and are held to them below)
}
assert tuple(SILVER_SCHEMA.names) == COLUMNS


def live(table: lakefmt.Table, when: str, snapshot_id: int | None = None) -> dict[int, str]:
    """key -> value of the table's live rows (at ``snapshot_id``); one row per key, as many as the snapshot says."""
    rows = table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id else table.to_arrow()
    ids, values = rows.column("id").to_pylist(), rows.column("v").to_pylist()
    out = dict(zip(ids, values, strict=True))
    assert len(out) == len(ids), f"{when}: two live rows for keys {sorted(i for i in out if ids.count(i) > 1)}"
    snap = table.snapshot(snapshot_id) if snapshot_id else table.latest_snapshot()
    assert (snap.total_record_count if snap else 0) == len(ids), f"{when}: the snapshot's row count disagrees"
    return out


@dataclass
class Chain:
    root: Path
    bronze_uri: str = field(init=False)
    driver: ChildDriver = field(init=False)
    writer: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.bronze_uri, silver_uri = str(self.root / "bronze"), str(self.root / "silver")
        checkpoint = self.root / "checkpoint"
        self.driver = ChildDriver(
            self.root, HERE / "chain_cdc_child.py", [self.bronze_uri, silver_uri, str(checkpoint)], silver_uri,
            checkpoint,
        )
        # bronze stores its change rows (changelog-producer=lookup): the query reads them, never the older files
        bronze = lakefmt.create_table(
            self.bronze_uri, SCHEMA, primary_key=["id"], options={"bucket": "2", "changelog-producer": "lookup"}
        )
        for k in range(FIRST_STEPS):
            rows, gone = step(k)
            bronze.upsert(rows)
            bronze.delete_keys(gone)
        lakefmt.create_table(silver_uri, SILVER_SCHEMA, primary_key=["id"], options=SILVER_OPTIONS)

    def bronze(self) -> lakefmt.Table:
        return lakefmt.open_table(self.bronze_uri)

    def start_writer(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEFMT_CRASH", "PYSPARK_GATEWAY_"))}
        with open(self.root / "writer.log", "wb") as out:
            self.writer = subprocess.Popen(
                [sys.executable, str(HERE / "chain_cdc_writer.py"), self.bronze_uri, str(self.root / "stop"),
                 str(INTERVAL_S), str(FIRST_STEPS), CONSUMER_ID, str(MAX_AHEAD)],
                cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )

    def stop_writer(self) -> int:
        assert self.writer is not None
        (self.root / "stop").touch()
        try:
            return self.writer.wait(timeout=60)
        finally:
            self.kill_writer()

    def kill_writer(self) -> None:
        if self.writer is not None and self.writer.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.writer.pid, signal.SIGKILL)
            self.writer.wait()

    def steps(self) -> int:
        return sum(1 for line in (self.root / "writer.log").read_text().splitlines() if line.startswith("wrote"))


def check_silver(silver: lakefmt.Table, when: str) -> list[lakefmt.Snapshot]:
    """Silver's snapshot ids are contiguous; every snapshot reads with one row per key."""
    snaps = check_contiguous(silver, when)
    for s in snaps:
        live(silver, f"{when}, snapshot {s.id}", s.id)
    return snaps


def test_upserts_and_deletes_flow_bronze_to_silver_exactly_once_under_sigkill(tmp_path: Path) -> None:
    began = time.monotonic()
    rng = random.Random(SEED)
    todo = list(PLANS)
    rng.shuffle(todo)
    c = Chain(tmp_path / "chain")
    kills: list[Kill] = []
    try:
        c.start_writer()
        for run, plan in enumerate(todo):
            kill = run_life(c.driver, run, plan, rng, ["running"])
            assert kill is not None, f"run {run} ({plan}) ended unasked: a processing-time query runs until killed"
            kills.append(kill)
            check_silver(c.driver.table(), f"after run {run} ({plan})")
        steps_while_killing = c.steps()
        assert c.stop_writer() == 0, (c.root / "writer.log").read_text()[-2000:]
        completed = run_life(c.driver, len(todo), None, rng, ["available-now"]) is None
    finally:
        c.kill_writer()
        c.driver.kill_all(None)  # backstop: no process of the child outlives the test

    text = summary(kills, [], began, f"{c.steps()} steps of bronze")
    print(text)
    assert completed, f"the final run did not complete: {text}"
    assert len(kills) == len(PLANS), text
    assert steps_while_killing >= 1, f"bronze did not change while the query was killed: {text}"
    assert not c.driver.stragglers()

    # -- silver is bronze's live state, key -> row, exactly ----------------------------------------------------
    bronze, silver = c.bronze(), c.driver.table()
    want = live(bronze, "bronze at the end")
    got = live(silver, "silver at the end")
    assert got == want, f"silver differs from bronze: {sorted(set(got.items()) ^ set(want.items()))[:10]}"
    kinds = set(silver.to_arrow().column("_change_type").to_pylist())
    assert kinds <= {"insert", "update_postimage"}, kinds  # a delete or a pre-image is never a live row
    history = bronze.changes(0).column("_change_type").to_pylist()
    assert {"insert", "update_preimage", "update_postimage", "delete"} <= set(history), "bronze's feed lacks a kind"
    # both stored their change rows (changelog-producer=lookup): the query read bronze's, the sink wrote silver's
    assert any(s.changelog_manifest_list for s in bronze.snapshots())
    assert any(s.changelog_manifest_list for s in silver.snapshots())

    # -- no micro-batch twice; every snapshot of silver reads ------------------------------------------------
    snaps = check_silver(silver, "at the end")
    batches = sorted(c.driver.committed_batches())
    assert batches == list(range(len(batches))), batches
    # the key table's automatic compaction commits too, under a commit user of its own
    stream = [s for s in snaps if s.commit_kind is not lakefmt.CommitKind.COMPACT]
    assert len({s.commit_user for s in stream}) == 1, {s.commit_user for s in stream}
    identifiers = [s.commit_identifier for s in stream]
    assert all(a < b for a, b in itertools.pairwise(identifiers)), f"a micro-batch committed twice: {identifiers}"
    assert set(identifiers) <= set(batches), identifiers
    latest = bronze.latest_snapshot()
    assert latest is not None
    assert {x.consumer_id: x.next_snapshot for x in bronze.consumers()} == {CONSUMER_ID: latest.id}
    print(f"bronze: {len(want)} live keys after {latest.id} snapshots; silver: {len(snaps)} snapshots "
          f"({len(snaps) - len(stream)} compactions), {len(batches)} micro-batches")

    # -- orphan-clean returns silver to exactly the files its snapshots reference ----------------------------
    silver.remove_orphan_files(older_than=0)
    on_disk = {f.path for f in silver.io.walk()}
    refs = referenced_files(MetaStore(silver.io))
    hints = {layout.LATEST, layout.EARLIEST}
    assert not unreferenced(on_disk, refs), sorted(unreferenced(on_disk, refs))
    assert not {p for p in refs if p not in on_disk and p not in hints}, sorted(refs - on_disk - hints)
    assert live(silver, "after orphan-clean") == want
