"""Real processes racing commits on one table, on local disk and on S3 (moto through s3fs).

Each child process opens the table itself (spawned, not forked: nothing is inherited but the arguments), so
the only coordination between committers is the table's own protocol: exclusive creation of the next
snapshot file and exactly-once dedup by (commit user, identifier).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
import traceback
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from faults.report import record
from helpers import create_table_in

import lakefmt
from lakefmt.errors import CommitRetriesExhaustedError

PROCESSES = 8
FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
#: appends per process (half through Table.append, half through new_writer/new_committer, each of those
#: replayed at once): 8 x 100 on local disk always (about 20 s on the busy 2-core CI machine); moto serves about
#: 100 requests/s there, so S3 races 8 x 6 in CI (30 s) and the full 8 x 100 with LAKEFMT_FULL_FAULTS=1 (5-6 min)
BATCHES = {"local": 100, "s3": 100 if FULL else 6}
ROWS = 5  # per batch
ZOMBIE_ROUNDS = 12
THREAD_BATCHES = 30  #: appends per thread in the one-process race (memory store)
START_TIMEOUT = 120  # seconds for every child to import and open the table
RUN_TIMEOUT = 1800 if FULL else 300  # seconds for a whole race (the tests take a fraction of this)
GIVE_UP_RETRIES = 5  #: times a racer runs a batch again after its commit gave up (lost every race it tried)

SCHEMA = pa.schema([("id", pa.int64()), ("proc", pa.int32())])

pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def shared_store(request: pytest.FixtureRequest) -> Any:
    """A store several processes can share: local disk or S3 (memory lives inside one process)."""
    return request.getfixturevalue(f"{request.param}_store")


# -- what the child processes run (module level, so 'spawn' can import it) --------------------------------


def batch_ids(proc: int, batch: int) -> list[int]:
    return [proc * 1_000_000 + batch * 1_000 + j for j in range(ROWS)]


def batch_table(ids: list[int], proc: int) -> pa.Table:
    return pa.table({"id": ids, "proc": [proc] * len(ids)}, schema=SCHEMA)


def racer_user(proc: int) -> str:
    return f"racer-{proc}"


def write_message(table: lakefmt.Table, data: pa.Table) -> lakefmt.CommitMessage:
    """What a writer task does: write data files and a per-task manifest, return the commit message."""
    with table.new_writer() as writer:
        writer.write(data)
        return writer.prepare_commit()


def append_racer(
    uri: str,
    options: dict[str, Any],
    proc: int,
    barrier: Any,
    results: Any,
    batches: int,
    shared: lakefmt.Table | None = None,
    give_up_retries: int = GIVE_UP_RETRIES,
) -> None:
    """Append ``batches`` batches, alternating Table.append and a committer with this process's commit user.

    After each committer commit, replay it at once (a retried driver: same user and identifier, new files,
    same rows) while the others keep racing; the replay must be a no-op. A commit that gives up after losing
    ``commit.max-retries`` races in a row says it did not land: the racer takes it at its word and runs the
    batch again (same identifier; a Table.append appends again), so the final exact-rows check also proves
    that word true. Reports the snapshot ids it created and how often a commit gave up. Opens the table itself,
    or uses ``shared`` (threads of one process sharing one Table).
    """
    try:
        table = shared if shared is not None else lakefmt.open_table(uri, storage_options=options)
        committer = table.new_committer(racer_user(proc))
        created: list[int] = []
        gave_up = 0
        barrier.wait(timeout=START_TIMEOUT)
        for batch in range(batches):
            data = batch_table(batch_ids(proc, batch), proc)
            identifier = batch // 2 + 1
            for attempt in range(give_up_retries + 1):
                messages = [] if batch % 2 == 0 else [write_message(table, data)]
                try:
                    # (Table.append removes its own files when it did not land)
                    snap = table.append(data) if batch % 2 == 0 else committer.commit(messages, identifier=identifier)
                    break
                except CommitRetriesExhaustedError:
                    gave_up += 1
                    table.discard(messages)  # it did not land: its files are garbage
                    if attempt == give_up_retries:
                        raise
            if batch % 2 == 1:
                replay = committer.commit([write_message(table, data)], identifier=identifier)
                if replay is not None:
                    raise AssertionError(f"replay of identifier {identifier} committed snapshot {replay.id}")
            if snap is None:
                raise AssertionError(f"batch {batch} of process {proc} did not commit")
            created.append(snap.id)
        results.put((proc, "ok", (created, gave_up)))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def zombie_racer(uri: str, options: dict[str, Any], proc: int, barrier: Any, results: Any, rounds: int) -> None:
    """One of two incarnations of the same streaming query (a zombie and its restart): every round both write
    the same rows into their own files and commit them as the same (commit user, identifier)."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        committer = table.new_committer("stream-query")
        outcomes: list[int | None] = []
        for rnd in range(1, rounds + 1):
            message = write_message(table, batch_table(batch_ids(0, rnd), proc))
            barrier.wait(timeout=START_TIMEOUT)
            snap = committer.commit([message], identifier=rnd)
            outcomes.append(None if snap is None else snap.id)
        results.put((proc, "ok", outcomes))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def bystander(uri: str, options: dict[str, Any], proc: int, barrier: Any, results: Any, rounds: int) -> None:
    """An unrelated writer appending in every round, so the zombies also lose races to a third party."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        outcomes: list[int | None] = []
        for rnd in range(1, rounds + 1):
            data = batch_table(batch_ids(proc, rnd), proc)
            barrier.wait(timeout=START_TIMEOUT)
            snap = table.append(data)
            outcomes.append(None if snap is None else snap.id)
        results.put((proc, "ok", outcomes))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


# -- the parent side --------------------------------------------------------------------------------------


def run_processes(targets: list[Any], uri: str, options: dict[str, Any], count: int) -> dict[int, Any]:
    """Start one spawned process per target (proc = its index; ``count`` batches or rounds each), all behind
    one barrier; return each one's report, failing with the child's traceback if any failed, hung or died."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(targets))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(uri, options, i, barrier, results, count), name=f"racer-{i}")
        for i, target in enumerate(targets)
    ]
    for p in procs:
        p.start()
    reports: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for _ in procs:
            try:
                proc, status, payload = results.get(timeout=RUN_TIMEOUT)
            except queue.Empty:
                errors.append(f"a process hung or died silently; exit codes {[p.exitcode for p in procs]}")
                break
            if status == "ok":
                reports[proc] = payload
            else:
                errors.append(f"process {proc} failed:\n{payload}")
                barrier.abort()  # the others must not wait for it
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    assert errors == [], "\n".join(errors)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return reports


def new_table(store: Any) -> lakefmt.Table:
    return create_table_in(store, SCHEMA, options={"compaction.auto": "false"})  # every snapshot a racer's commit


def assert_history_is_sound(table: lakefmt.Table, expected_ids: list[int]) -> list[lakefmt.Snapshot]:
    """Snapshot ids 1..n without gaps, record counts that add up, every expected row exactly once."""
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, len(snapshots) + 1))
    running = 0
    for s in snapshots:
        running += s.delta_record_count
        assert s.total_record_count == running, f"snapshot {s.id}"
    rows = table.scan().to_arrow()
    ids = rows.column("id").to_pylist()
    duplicated = sorted(i for i, n in Counter(ids).items() if n > 1)
    assert duplicated == [], f"rows committed twice: {duplicated[:20]}"
    assert sorted(ids) == sorted(expected_ids)
    latest = table.latest_snapshot()
    assert latest is not None
    assert latest.id == snapshots[-1].id
    assert latest.total_record_count == rows.num_rows
    return snapshots


def test_processes_racing_appends_commit_every_batch_exactly_once(shared_store: Any) -> None:
    table = new_table(shared_store)

    batches = BATCHES[shared_store.kind]
    started = time.monotonic()
    reports = run_processes([append_racer] * PROCESSES, table.uri, shared_store.storage_options, batches)
    seconds = time.monotonic() - started

    total = PROCESSES * batches
    created = sorted(sid for ids, _ in reports.values() for sid in ids)
    assert created == list(range(1, total + 1)), "each snapshot id must be created by exactly one committer"
    gave_up = sum(n for _, n in reports.values())
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, total + 1))
    assert all(s.delta_record_count == ROWS for s in snapshots)
    assert snapshots[-1].total_record_count == total * ROWS

    by_user = Counter(s.commit_user for s in snapshots)
    last_identifier = batches // 2
    for proc in range(PROCESSES):
        assert by_user[racer_user(proc)] == batches // 2
        assert table.commit_user_identifier(racer_user(proc)) == last_identifier
    assert sum(n for user, n in by_user.items() if user.startswith("oneoff-")) == total - PROCESSES * (batches // 2)

    # A replay of already-committed identifiers (a restarted driver, same rows in new files) adds nothing ...
    reopened = lakefmt.open_table(table.uri, storage_options=shared_store.storage_options)
    committer = reopened.new_committer(racer_user(3))
    for identifier in (1, last_identifier):
        data = batch_table(batch_ids(3, 2 * identifier - 1), 3)
        assert committer.commit([write_message(reopened, data)], identifier=identifier) is None
    assert [s.id for s in reopened.snapshots()] == list(range(1, total + 1))

    # ... while the next identifier of the same user still commits.
    extra = batch_table([99_000_000 + j for j in range(ROWS)], 3)
    snap = committer.commit([write_message(reopened, extra)], identifier=last_identifier + 1)
    assert snap is not None
    assert snap.id == total + 1

    # Every row of every process (and of the extra commit) is there exactly once: no replay added any.
    expected = [i for proc in range(PROCESSES) for batch in range(batches) for i in batch_ids(proc, batch)]
    assert_history_is_sound(reopened, [*expected, *extra.column("id").to_pylist()])
    summary = {
        "processes": PROCESSES,
        "appends per process": batches,
        "commits": total,
        "replays (no-ops)": PROCESSES * (batches // 2),
        "commits that gave up after losing every race and were run again": gave_up,
        "snapshots": f"1..{total + 1}",
        "seconds (race)": round(seconds, 1),
    }
    print(summary)
    record("racing_appends", f"{shared_store.kind} {PROCESSES} x {batches}", summary)


def test_zombie_and_restart_with_same_user_and_identifier_commit_once(shared_store: Any) -> None:
    table = new_table(shared_store)

    targets = [zombie_racer, zombie_racer, bystander]
    reports = run_processes(targets, table.uri, shared_store.storage_options, ZOMBIE_ROUNDS)

    zombies = [reports[0], reports[1]]
    for rnd in range(ZOMBIE_ROUNDS):
        winners = [z[rnd] for z in zombies if z[rnd] is not None]
        assert len(winners) == 1, f"round {rnd + 1}: zombie outcomes {[z[rnd] for z in zombies]}"
    assert all(sid is not None for sid in reports[2])

    expected = [i for rnd in range(1, ZOMBIE_ROUNDS + 1) for i in [*batch_ids(0, rnd), *batch_ids(2, rnd)]]
    snapshots = assert_history_is_sound(table, expected)
    assert len(snapshots) == 2 * ZOMBIE_ROUNDS

    # every round's rows come from the one incarnation whose commit won it
    rows = table.scan().to_arrow().to_pylist()
    writer_of = {r["id"]: r["proc"] for r in rows}
    for rnd in range(1, ZOMBIE_ROUNDS + 1):
        winner = 0 if zombies[0][rnd - 1] is not None else 1
        assert {writer_of[i] for i in batch_ids(0, rnd)} == {winner}, f"round {rnd}"
    stream = [s for s in snapshots if s.commit_user == "stream-query"]
    assert [s.commit_identifier for s in stream] == list(range(1, ZOMBIE_ROUNDS + 1))
    assert table.commit_user_identifier("stream-query") == ZOMBIE_ROUNDS


@pytest.mark.parametrize(
    ("table_per", "max_retries"),
    [("thread", None), ("process", None), ("thread", 2)],
    ids=["table-per-thread", "one-shared-table", "max-retries-2"],
)
def test_threads_of_one_process_racing_appends_commit_every_batch_exactly_once(
    table_per: str, max_retries: int | None
) -> None:
    """The same race between 8 threads of one process on the memory store, each thread with its own Table or
    all sharing one (its metadata caches, its writers and committers used from every thread at once): what
    threads share (codec and compression state, metadata caches, fsspec's filesystem instance, pyarrow's
    thread pool) must not leak between concurrent writers and committers. With ``commit.max-retries=2``
    commits often give up ("did not land") and are run again: taking that at its word must lose and
    duplicate nothing."""
    uri = f"memory://races-{uuid.uuid4().hex}"
    options = {"compaction.auto": "false"}  # every snapshot is a racer's commit
    if max_retries is not None:
        options["commit.max-retries"] = str(max_retries)
    lakefmt.create_table(uri, SCHEMA, options=options)
    shared = lakefmt.open_table(uri) if table_per == "process" else None
    give_up_retries = GIVE_UP_RETRIES if max_retries is None else 50
    barrier = threading.Barrier(PROCESSES)
    results: queue.Queue[Any] = queue.Queue()
    threads = [
        threading.Thread(
            target=append_racer, args=(uri, {}, i, barrier, results, THREAD_BATCHES, shared, give_up_retries)
        )
        for i in range(PROCESSES)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=RUN_TIMEOUT)
    reports = [results.get_nowait() for _ in threads]
    errors = [payload for _, status, payload in reports if status != "ok"]
    assert errors == [], "\n".join(errors)
    gave_up = sum(n for _, _, (_, n) in reports)
    key = f"memory threads {PROCESSES} x {THREAD_BATCHES}, table per {table_per}, commit.max-retries {max_retries}"
    record("racing_appends", key, {"commits that gave up and were run again": gave_up})

    total = PROCESSES * THREAD_BATCHES
    created = sorted(sid for _, _, (ids, _) in reports for sid in ids)
    assert created == list(range(1, total + 1)), "each snapshot id must be created by exactly one committer"
    table = lakefmt.open_table(uri)
    for proc in range(PROCESSES):
        assert table.commit_user_identifier(racer_user(proc)) == THREAD_BATCHES // 2
    expected = [i for proc in range(PROCESSES) for batch in range(THREAD_BATCHES) for i in batch_ids(proc, batch)]
    assert_history_is_sound(table, expected)
