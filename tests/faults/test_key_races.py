"""Key tables under concurrent writers, in real processes and threads: upserts (``Table.upsert`` and a job's
committer) and deletes by key of overlapping keys, racing for the same snapshot id, with compactions beside them.

* **Gated rounds.** Two racers, each round one operation each on the same few keys (an upsert, a job commit, or a
  delete by key; or against a compaction of every bucket), held at a gate before their first publish until both are
  there: each round is a real race for one snapshot id. The loser re-plans its deletion vectors on the winner's
  snapshot (a touched bucket changed) and lands next (a compaction may give up). No write may fail.
* **Free for all.** Three writers upsert and delete overlapping keys as fast as they can, a fourth compacts the
  table in a loop.

Either way, every landed operation, applied to a dict in snapshot order, must give each snapshot's rows exactly:
at most one live row per key, and each key's value the one the last landed upsert of it wrote (no upsert lost,
none resurrected by a compaction, no delete undone); COMPACT snapshots (the compactor's, and the automatic ones a
key table's writes run after their commits) change no row. Record counts match the live rows, and orphan-clean
leaves only referenced files. ``LAKEFMT_FULL_FAULTS=1`` runs more rounds."""

from __future__ import annotations

import os
import queue
import random
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore

from .faultio import FaultIO
from .report import record
from .test_overwrite_race import Gate

pytestmark = pytest.mark.slow

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
TIMEOUT = 120
SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
KEYS = [(k, dt) for k in range(6) for dt in ("a", "b")]
OPTIONS = {"bucket": "2", "commit.max-retries": "200"}

Key = tuple[int, str]
#: an operation: ("upsert" | "append" | "job", [(k, dt, v)]) or ("delete_keys", [(k, dt, 0)])
Op = tuple[str, list[tuple[int, str, int]]]


def make_ops(who: int, count: int, seed: int, deletes: bool = True) -> list[Op]:
    """Racer ``who``'s operations: overlapping keys (repeats within one too), each value unique to who and op."""
    rnd = random.Random(seed * 31 + who)
    ops: list[Op] = []
    for i in range(count):
        kind = rnd.choice(["upsert", "append", "job", "delete_keys"] if deletes else ["upsert", "append", "job"])
        keys = [rnd.choice(KEYS) for _ in range(rnd.randint(1, 5))]
        rows = [(k, dt, (who + 1) * 1_000_000 + i * 100 + j) for j, (k, dt) in enumerate(keys)]
        ops.append((kind, rows))
    return ops


def as_table(rows: list[tuple[int, str, int]]) -> pa.Table:
    return pa.table({"k": [r[0] for r in rows], "dt": [r[1] for r in rows], "v": [r[2] for r in rows]}, schema=SCHEMA)


def apply(state: dict[Key, int], op: Op) -> dict[Key, int]:
    kind, rows = op  # a compaction has no rows: it changes nothing
    state = dict(state)
    for k, dt, v in rows:
        if kind == "delete_keys":
            state.pop((k, dt), None)
        else:
            state[(k, dt)] = v  # the last row of a key in the call wins
    return state


def run_op(table: lakefmt.Table, committer: Any, op: Op, identifier: int) -> lakefmt.Snapshot | None:
    kind, rows = op
    if kind == "upsert":
        return table.upsert(as_table(rows))
    if kind == "append":
        return table.append(as_table(rows))
    if kind == "delete_keys":
        return table.delete_keys(as_table(rows).select(["k", "dt"]))
    if kind == "compact":  # every bucket's files merged, deleted rows dropped (or nothing, after a lost race)
        return table.compact(min_files=1).snapshot
    half = max(1, len(rows) // 2)  # two writer tasks: of a key in both, the second message's row wins
    messages = []
    for part in (rows[:half], rows[half:]):
        if part:
            with table.new_writer() as writer:
                writer.write(as_table(part))
                messages.append(writer.prepare_commit())
    snap = committer.commit(messages, identifier=identifier)
    assert committer.commit([], identifier=identifier) is None  # a replay of a landed identifier: skipped
    assert committer.last_result.outcome is lakefmt.CommitOutcome.ALREADY_COMMITTED
    return snap


def racer(
    uri: str, options: dict[str, Any], who: int, ops: list[Op], gated: bool, start: Any, gate: Any, results: Any
) -> None:
    """Run ``ops`` in order (gated: each at a round of its own, held at the gate before its first publish); report
    the snapshot id each landed as (None: it changed nothing)."""
    landed: list[int | None] = []
    try:
        plain = lakefmt.open_table(uri, storage_options=options)
        io = FaultIO(plain.io)
        table = lakefmt.Table(io, MetaStore(io))
        committer = table.new_committer(f"racer-{who}")
        if not gated:
            start.wait(timeout=TIMEOUT)
        for i, op in enumerate(ops):
            hook = Gate(gate) if gated else None
            if gated:
                start.wait(timeout=TIMEOUT)
                io.hook = hook
            snap = run_op(table, committer, op, i + 1)
            io.hook = None
            if hook is not None and not hook.passed:  # published nothing (no live row to delete): free the rival
                gate.wait(timeout=TIMEOUT)
            landed.append(snap.id if snap is not None else None)
        results.put((who, "ok", landed))
    except BaseException:
        for barrier in (start, gate):
            barrier.abort()
        results.put((who, "error", traceback.format_exc()))


def looping_compactor(uri: str, options: dict[str, Any], who: int, done: Any, start: Any, results: Any) -> None:
    """Compact the table in a loop until ``done`` is set; report the COMPACT snapshots it made."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        made: list[int] = []
        start.wait(timeout=TIMEOUT)
        while not done.is_set():
            report = table.compact(min_files=2)
            if report.snapshot is not None:
                made.append(report.snapshot.id)
            else:
                time.sleep(0.005)
        results.put((who, "ok", made))
    except BaseException:
        start.abort()
        results.put((who, "error", traceback.format_exc()))


def collect(workers: list[Any], results: Any, on_report: Callable[[int, str], None] | None = None) -> dict[int, Any]:
    reports: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for n in range(len(workers)):
            try:
                who, status, payload = results.get(timeout=TIMEOUT * 5)
            except queue.Empty:
                errors.append("a worker hung or died silently")
                break
            if status == "ok":
                reports[who] = payload
            else:
                errors.append(f"worker {who} failed:\n{payload}")
            if on_report is not None:
                on_report(n, status)
    finally:
        for w in workers:
            w.join(timeout=TIMEOUT)
            if hasattr(w, "kill") and w.is_alive():
                w.kill()
    assert not errors, "\n".join(errors)
    return reports


def check_history(
    uri: str,
    options: dict[str, Any],
    ops: dict[int, list[Op]],
    landed: dict[int, list[int | None]],
    compacted: list[int],
    seed: Op | None = None,
) -> dict[str, int]:
    """Apply the landed operations in snapshot order (``seed``: snapshot 1, written before the race); every snapshot
    reads as the model says."""
    table = lakefmt.open_table(uri, storage_options=options)
    by_id: dict[int, Op] = {1: seed} if seed is not None else {}
    nothing = 0
    for who, ids in landed.items():
        for op, sid in zip(ops[who], ids, strict=True):
            if sid is None:
                assert op[0] in ("delete_keys", "compact"), f"{op[0]} of racer {who} committed nothing"
                nothing += 1
                continue
            assert sid not in by_id, f"snapshot {sid} claimed twice"
            by_id[sid] = op
    assert not set(by_id) & set(compacted)
    snapshots = table.snapshots()
    ids = [s.id for s in snapshots]
    assert ids == list(range(1, len(ids) + 1)) and set(by_id) | set(compacted) <= set(ids)
    state: dict[Key, int] = {}
    automatic = 0
    for snap in snapshots:
        if snap.id in by_id:
            state = apply(state, by_id[snap.id])
            compaction = by_id[snap.id][0] == "compact"
            assert (snap.commit_kind is lakefmt.CommitKind.COMPACT) == compaction, f"snapshot {snap.id}"
        else:  # the compactor's, or a writer's automatic compaction after its commit
            assert snap.commit_kind is lakefmt.CommitKind.COMPACT, f"snapshot {snap.id}"
            automatic += snap.id not in compacted
        got: dict[Key, int] = {}
        for row in table.to_arrow(snapshot_id=snap.id).to_pylist():
            key = (row["k"], row["dt"])
            assert key not in got, f"snapshot {snap.id}: two live rows for key {key}"
            got[key] = row["v"]
        assert got == state, f"snapshot {snap.id} ({snap.commit_kind.value}): not the landed operations in order"
        assert snap.total_record_count == len(state), f"snapshot {snap.id}'s record count"
    table.remove_orphan_files(older_than=0)
    files = {f.path for f in table.io.walk()}
    assert unreferenced(files, referenced_files(MetaStore(table.io))) == set()
    return {
        "snapshots": len(snapshots),
        "compactions": len(compacted) + sum(op[0] == "compact" for op in by_id.values()),
        "automatic compactions": automatic,
        "deletes of no live row": nothing,
    }


@pytest.fixture(
    params=[
        ("local", "processes", 6),
        ("local", "threads", 6),
        pytest.param(("s3", "threads", 2), marks=pytest.mark.s3),
    ],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def setup(request: pytest.FixtureRequest) -> tuple[Any, str, int]:
    kind, how, rounds = request.param
    return request.getfixturevalue(f"{kind}_store"), how, (rounds * 5 if FULL else rounds)


def test_gated_rounds_of_overlapping_upserts_and_deletes(setup: tuple[Any, str, int], fault_ctx: Any) -> None:
    gated_rounds(setup, fault_ctx, "writer")


@pytest.mark.parametrize("how", ["processes", "threads"])
def test_gated_rounds_of_upserts_against_a_compaction(local_store: Any, how: str, fault_ctx: Any) -> None:
    """Each round a writer's upsert, job commit or delete by key, and a compaction of every bucket, racing for one
    snapshot id: a compaction that lands first makes the writer re-plan on the merged files; one that lands second
    re-plans on the writer's vectors or gives up, never bringing a replaced or deleted row back."""
    gated_rounds((local_store, how, 12 if FULL else 4), fault_ctx, "compactor")


def gated_rounds(setup: tuple[Any, str, int], fault_ctx: Any, rival: str) -> None:
    store, how, rounds = setup
    table = lakefmt.create_table(
        store.uri(),
        SCHEMA,
        partition_by=["dt"],
        primary_key=["k", "dt"],
        options=OPTIONS,
        storage_options=store.storage_options,
    )
    seed: Op = ("upsert", [(k, dt, 0) for k, dt in KEYS])  # every key live: deletes find rows
    assert table.upsert(as_table(seed[1])).id == 1  # type: ignore[union-attr]
    ops = {who: make_ops(who, rounds, seed=rounds) for who in (0, 1)}
    if rival == "compactor":
        ops[1] = [("compact", [])] * rounds
    if how == "threads":
        results: Any = queue.Queue()
        start: Any = threading.Barrier(2)
        gate: Any = threading.Barrier(2)
        make: Any = threading.Thread
    else:
        results, start, gate, make = fault_ctx.Queue(), fault_ctx.Barrier(2), fault_ctx.Barrier(2), fault_ctx.Process
    workers = [
        make(target=racer, args=(table.uri, store.storage_options, who, ops[who], True, start, gate, results))
        for who in (0, 1)
    ]
    for w in workers:
        w.start()
    landed = collect(workers, results)
    summary = check_history(table.uri, store.storage_options, ops, landed, [], seed)
    record("key_races", f"{store.kind}-{how}/gated-{rival}", summary)


def test_free_for_all_with_a_compactor(local_store: Any) -> None:
    """Three writers and a compactor, threads, no gate: the compactor races every kind of write."""
    store = local_store
    table = lakefmt.create_table(
        store.uri(),
        SCHEMA,
        partition_by=["dt"],
        primary_key=["k", "dt"],
        options=OPTIONS,
    )
    count = 40 if FULL else 10
    ops = {who: make_ops(who, count, seed=count) for who in range(3)}
    results: Any = queue.Queue()
    start = threading.Barrier(4)
    done = threading.Event()
    workers = [
        threading.Thread(target=racer, args=(table.uri, {}, who, ops[who], False, start, threading.Barrier(1), results))
        for who in range(3)
    ]
    workers.append(threading.Thread(target=looping_compactor, args=(table.uri, {}, 3, done, start, results)))
    for w in workers:
        w.start()

    def writers_done(n: int, status: str) -> None:
        if n == 2 or status != "ok":  # the writers are done (or one failed): the compactor's last round
            done.set()

    reports = collect(workers, results, writers_done)
    compacted = reports.pop(3)
    summary = check_history(table.uri, {}, ops, reports, compacted)
    record("key_races", "local-threads/free-for-all", summary)
    print(summary)
