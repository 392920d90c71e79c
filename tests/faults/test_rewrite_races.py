"""Rewrites racing writers, in real processes (and threads on S3): a row-level delete or a partition overwrite
against a compaction of the same partition, and 8 appending processes with a compactor looping beside them.

* **Delete (or overwrite) vs compaction.** Every round adds small files to partition ``a``, then one racer
  deletes some of their rows (one file goes by its min/max alone, one is rewritten; or it overwrites the
  partition) while the other compacts ``a``. A gate (a barrier in the FileIO, before the first publish of a
  snapshot file) holds both until both are there, so each round is a real race for the same snapshot id.
  Allowed outcomes: the delete (overwrite) lands, either first (the compaction then re-plans on the new files,
  or finds too few left) or after the compaction (it re-plans: only a compaction moved its rows), and never
  fails (a ``CommitConflictError`` fails the test); the compaction lands or finds nothing left after its one
  re-plan, and never raises. Each snapshot then reads exactly what applying the landed commits in snapshot
  order to a model gives, and orphan-clean leaves only referenced files.
* **Appends with a compactor.** 8 processes append (one-off ``Table.append`` and a committer whose every
  commit is replayed at once, as a restarted driver does) while a ninth compacts the table in a loop: no
  writer ever fails (a commit that lost every race it tried says so and is run again, as in the append races;
  the count is reported, and so are the compactor's rounds that lost every race: it tries again), every replay
  is a no-op although compactions rewrote the files in between, every row is read once (the latest snapshot
  and the incremental read of the whole history, which skips the COMPACT snapshots), and after the
  compactor's last round every partition holds fewer than its ``min_files`` files. Local disk: 8 x 25 appends
  in CI, 8 x 100 with ``LAKEFMT_FULL_FAULTS=1``; S3 (moto): 8 x 2 in CI, 8 x 100 with the flag.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import CommitConflictError, CommitRetriesExhaustedError
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore

from .faultio import FaultIO
from .report import record
from .test_overwrite_race import Gate

pytestmark = pytest.mark.slow

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
TIMEOUT = 120
Row = tuple[int, str | None]


def as_table(rows: list[Row]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "dt": [r[1] for r in rows]}, schema=SCHEMA)


def rows_of(table: pa.Table) -> Counter[Row]:
    return Counter(zip(table.column("id").to_pylist(), table.column("dt").to_pylist(), strict=True))


# -- a rewrite against a compaction of the same partition -------------------------------------------------------
#: rows of partition a added in round r, one file each: the delete takes two rows of the first file (rewritten)
#: and every row of the second (dropped by its min/max); the third stays as it was
def round_files(rnd: int) -> list[list[Row]]:
    return [[(rnd * 100 + f * 10 + j, "a") for j in range(4)] for f in range(3)]


def delete_filter(rnd: int) -> pc.Expression:
    return (pc.field("id") >= rnd * 100 + 2) & (pc.field("id") <= rnd * 100 + 13)


def deleted(rnd: int, row: Row) -> bool:
    return rnd * 100 + 2 <= row[0] <= rnd * 100 + 13


def overwrite_rows(rnd: int) -> list[Row]:
    return [(rnd * 100 + 50, "a"), (rnd * 100 + 51, "a")]


MIN_FILES = 3  #: the compaction's min_files: partition a always qualifies (each round adds three files)


def rewrite_racer(
    uri: str, options: dict[str, Any], who: int, rival: str, rounds: int, start: Any, gate: Any, results: Any
) -> None:
    """Racer 0 adds the round's files to partition a, then deletes (``rival`` "delete") or overwrites a;
    racer 1 compacts a. Reports per round (outcome, snapshot id or detail)."""
    outcomes: list[tuple[str, Any]] = []
    try:
        plain = lakefmt.open_table(uri, storage_options=options)
        io = FaultIO(plain.io)
        table = lakefmt.Table(io, MetaStore(io))
        for rnd in range(1, rounds + 1):
            if who == 0:
                for rows in round_files(rnd):
                    table.append(as_table(rows))
            start.wait(timeout=TIMEOUT)
            io.hook = Gate(gate)
            if who == 1:
                report = table.compact({"dt": "a"}, min_files=MIN_FILES)
                if report.snapshot is not None:
                    outcomes.append(("compacted", report.snapshot.id))
                elif report.given_up:
                    outcomes.append(("given up", report.given_up[0].reason))
                else:
                    outcomes.append(("nothing left", [p["dt"] for p in report.replanned]))
            else:
                try:
                    if rival == "delete":
                        snap = table.delete(delete_filter(rnd))
                    else:
                        snap = table.overwrite(as_table(overwrite_rows(rnd)), partition={"dt": "a"})
                    outcomes.append((rival, snap.id if snap else None))
                except CommitConflictError as exc:
                    outcomes.append(("conflict", str(exc)))
            io.hook = None
            start.wait(timeout=TIMEOUT)  # the round is over for both before the next one's files come
        results.put((who, "ok", outcomes))
    except BaseException:
        for barrier in (start, gate):
            barrier.abort()
        results.put((who, "error", traceback.format_exc()))


def run_workers(target: Callable[..., None], args: list[tuple[Any, ...]], how: str, ctx: Any) -> dict[int, Any]:
    """Run ``target(*args[i])`` for each i as threads or processes of ``ctx`` (each args tuple ends with the
    results queue, created here, so the tuples are given without it); return each one's report by its index."""
    if how == "threads":
        results: Any = queue.Queue()
        make: Any = threading.Thread
    else:
        results, make = ctx.Queue(), ctx.Process
    workers = [make(target=target, args=(*a, results)) for a in args]
    for w in workers:
        w.start()
    reports: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for _ in workers:
            try:
                who, status, payload = results.get(timeout=TIMEOUT * 10 if FULL else TIMEOUT * 3)
            except queue.Empty:
                errors.append("a worker hung or died silently")
                break
            if status == "ok":
                reports[who] = payload
            else:
                errors.append(f"worker {who} failed:\n{payload}")
    finally:
        for w in workers:
            w.join(timeout=TIMEOUT)
            if how != "threads" and w.is_alive():
                w.kill()
    assert not errors, "\n".join(errors)
    return reports


def barriers(how: str, ctx: Any, parties: int) -> tuple[Any, Any]:
    if how == "threads":
        return threading.Barrier(parties), threading.Barrier(parties)
    return ctx.Barrier(parties), ctx.Barrier(parties)


def check_rewrite_race(
    uri: str, options: dict[str, Any], rival: str, rounds: int, reports: dict[int, Any]
) -> Counter[str]:
    """Apply each round's setup and landed commits, in snapshot order, to a model; every snapshot must read as
    it says. Returns the tally of outcome pairs."""
    table = lakefmt.open_table(uri, storage_options=options)
    model: dict[int, Counter[Row]] = {1: Counter({(0, "b"): 1})}
    tally: Counter[str] = Counter()
    for rnd in range(1, rounds + 1):
        (what, detail), (compaction, result) = reports[0][rnd - 1], reports[1][rnd - 1]
        for rows in round_files(rnd):  # racer 0's appends: the next three snapshots
            model[max(model) + 1] = model[max(model)] + Counter(rows)
        assert what in (rival, "conflict"), f"round {rnd}: {what} {detail}"
        if what == "conflict":  # only a removal by another kind than a compaction may fail it
            raise AssertionError(f"round {rnd}: the {rival} lost to a compaction: {detail}")
        landed = sorted([(detail, rival)] + ([(result, "compact")] if compaction == "compacted" else []))
        for sid, kind in landed:
            assert sid == max(model) + 1, f"round {rnd}: snapshot {sid} is not the next one ({landed})"
            rows = model[max(model)]
            if kind == "delete":
                rows = Counter({r: n for r, n in rows.items() if not deleted(rnd, r)})
            elif kind == "overwrite":
                rows = Counter({r: n for r, n in rows.items() if r[1] != "a"}) + Counter(overwrite_rows(rnd))
            model[sid] = rows
            expected = lakefmt.CommitKind.COMPACT if kind == "compact" else lakefmt.CommitKind.OVERWRITE
            assert table.snapshot(sid).commit_kind is expected, f"snapshot {sid}"
        tally[f"{landed[0][1]} first; {what} + {compaction}"] += 1
        # with one rival, a compaction loses at most once: it lands, or its re-plan finds too few files left
        assert compaction in ("compacted", "nothing left"), f"round {rnd}: {compaction} {result}"
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == sorted(model)
    for sid, rows in model.items():
        assert rows_of(table.to_arrow(snapshot_id=sid)) == rows, f"snapshot {sid}"
    table.remove_orphan_files(older_than=0)
    files = {f.path for f in table.io.walk()}
    assert unreferenced(files, referenced_files(MetaStore(table.io))) == set()
    return tally


@pytest.fixture(
    params=[("local", "processes", 4), pytest.param(("s3", "threads", 2), marks=pytest.mark.s3)],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def setup(request: pytest.FixtureRequest) -> tuple[Any, str, int]:
    kind, how, rounds = request.param
    return request.getfixturevalue(f"{kind}_store"), how, (rounds * 3 if FULL else rounds)


@pytest.mark.parametrize("rival", ["delete", "overwrite"])
def test_a_rewrite_racing_a_compaction_of_its_partition(
    setup: tuple[Any, str, int], rival: str, fault_ctx: Any
) -> None:
    store, how, rounds = setup
    table = lakefmt.create_table(  # every snapshot is one of the racers' commits: no automatic compaction
        store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options,
        options={"compaction.auto": "false"},
    )
    table.append(as_table([(0, "b")]))
    start, gate = barriers(how, fault_ctx, 2)
    args = [(table.uri, store.storage_options, who, rival, rounds, start, gate) for who in (0, 1)]
    reports = run_workers(rewrite_racer, args, how, fault_ctx)
    tally = check_rewrite_race(table.uri, store.storage_options, rival, rounds, reports)
    record("rewrite_race", f"{store.kind}-{how}/{rival}-vs-compact", dict(tally))
    print(dict(tally))


# -- appends with a compactor looping beside them ------------------------------------------------------------------
PROCESSES = 8
APPENDS = {"local": 100 if FULL else 25, "s3": 100 if FULL else 2}
ROWS = 5
PARTITIONS = 4
#: the compactor's min_files and its pause between rounds (on S3 fewer appends: it compacts sooner; each round's
#: requests are paced so that the compactor does not take moto, which serves every request under the test
#: process's one GIL, from the writers)
COMPACTOR = {"local": (4, 0.01), "s3": (2, 0.2)}
GIVE_UP_RETRIES = 5


def batch_rows(proc: int, batch: int) -> list[Row]:
    return [(proc * 1_000_000 + batch * 1_000 + j, f"p{proc % PARTITIONS}") for j in range(ROWS)]


def appender(uri: str, options: dict[str, Any], proc: int, batches: int, start: Any, results: Any) -> None:
    """Append ``batches`` batches, alternating Table.append and a committer (commit user ``writer-<proc>``) whose
    every commit is replayed at once; reports (snapshot ids created, commits that gave up and were run again)."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        committer = table.new_committer(f"writer-{proc}")
        created: list[int] = []
        gave_up = 0
        start.wait(timeout=TIMEOUT)
        for batch in range(batches):
            data = as_table(batch_rows(proc, batch))
            identifier = batch // 2 + 1
            for attempt in range(GIVE_UP_RETRIES + 1):
                messages: list[lakefmt.CommitMessage] = []
                try:
                    if batch % 2 == 0:
                        snap = table.append(data)
                    else:
                        with table.new_writer() as writer:
                            writer.write(data)
                            messages = [writer.prepare_commit()]
                        snap = committer.commit(messages, identifier=identifier)
                    break
                except CommitRetriesExhaustedError:  # lost every race it tried: it did not land, run it again
                    gave_up += 1
                    table.discard(messages)
                    if attempt == GIVE_UP_RETRIES:
                        raise
            if snap is None:
                raise AssertionError(f"batch {batch} of process {proc} did not commit")
            created.append(snap.id)
            if batch % 2 == 1:  # a restarted driver commits the same identifier again: a no-op
                with table.new_writer() as writer:
                    writer.write(data)
                    replay = [writer.prepare_commit()]
                if committer.commit(replay, identifier=identifier) is not None:
                    raise AssertionError(f"the replay of identifier {identifier} of process {proc} committed")
                table.discard(replay)
        results.put((proc, "ok", (created, gave_up)))
    except BaseException:
        start.abort()
        results.put((proc, "error", traceback.format_exc()))


def compactor(
    uri: str, options: dict[str, Any], proc: int, settings: tuple[int, float], done: Any, start: Any, results: Any
) -> None:
    """Compact the whole table in a loop until ``done`` is set, then once more; reports the snapshot ids it
    created, rounds that gave a partition up or re-planned, and the most live files it saw."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        min_files, pause = settings
        created: list[int] = []
        tally: Counter[str] = Counter()
        most = 0
        start.wait(timeout=TIMEOUT)
        last = False
        while not last:
            last = done.is_set()
            tally["rounds"] += 1
            try:
                report = table.compact(min_files=min_files)
            except CommitRetriesExhaustedError:  # lost every race it tried to the appends: did not land, go on
                if last:  # the writers are done: nothing left to lose against
                    raise
                tally["rounds that lost every race"] += 1
                continue
            most = max(most, report.files_before)
            tally["re-planned"] += len(report.replanned)
            tally["partitions given up"] += len(report.given_up)
            if report.snapshot is not None:
                created.append(report.snapshot.id)
            elif not last:
                time.sleep(pause)
        results.put((proc, "ok", (created, dict(tally), most)))
    except BaseException:
        start.abort()
        results.put((proc, "error", traceback.format_exc()))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def shared_store(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_store")


def test_appending_processes_with_a_compactor_looping(shared_store: Any, fault_ctx: Any) -> None:
    store = shared_store
    table = lakefmt.create_table(  # every snapshot is one of the racers' commits: no automatic compaction
        store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options,
        options={"compaction.auto": "false"},
    )
    batches = APPENDS[store.kind]
    start, done, results = fault_ctx.Barrier(PROCESSES + 1), fault_ctx.Event(), fault_ctx.Queue()
    procs = [
        fault_ctx.Process(target=appender, args=(table.uri, store.storage_options, i, batches, start, results))
        for i in range(PROCESSES)
    ]
    settings = COMPACTOR[store.kind]
    procs.append(
        fault_ctx.Process(
            target=compactor, args=(table.uri, store.storage_options, PROCESSES, settings, done, start, results)
        )
    )
    started = time.monotonic()
    for p in procs:
        p.start()
    reports: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for n in range(len(procs)):
            try:
                who, status, payload = results.get(timeout=TIMEOUT * 15 if FULL else TIMEOUT * 3)
            except queue.Empty:
                errors.append(f"a process hung or died silently; exit codes {[p.exitcode for p in procs]}")
                break
            if status == "ok":
                reports[who] = payload
            else:
                errors.append(f"process {who} failed:\n{payload}")
            if n == PROCESSES - 1 or status != "ok":
                done.set()  # every appender has reported (or one failed): the compactor's last round
    finally:
        for p in procs:
            p.join(timeout=TIMEOUT)
            if p.is_alive():
                p.kill()
    seconds = time.monotonic() - started
    assert not errors, "\n".join(errors)
    compacted, tally, most = reports.pop(PROCESSES)
    started = time.monotonic()

    appended = sorted(sid for created, _ in reports.values() for sid in created)
    total = PROCESSES * batches
    assert len(appended) == total and not set(appended) & set(compacted)
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, total + len(compacted) + 1))
    kinds = {s.id: s.commit_kind for s in snapshots}
    assert all(kinds[sid] is lakefmt.CommitKind.APPEND for sid in appended)
    assert all(kinds[sid] is lakefmt.CommitKind.COMPACT for sid in compacted)
    for before, snap in itertools.pairwise(snapshots):
        if snap.commit_kind is lakefmt.CommitKind.COMPACT:
            assert snap.total_record_count == before.total_record_count, f"snapshot {snap.id}"
            assert snap.commit_users == before.commit_users, f"snapshot {snap.id} changed the commit-user map"
    for proc in range(PROCESSES):
        assert table.commit_user_identifier(f"writer-{proc}") == batches // 2

    expected = Counter(r for proc in range(PROCESSES) for b in range(batches) for r in batch_rows(proc, b))
    assert rows_of(table.to_arrow()) == expected, "the latest snapshot lost or duplicated rows"
    incremental = rows_of(table.to_arrow(from_snapshot=0, to_snapshot=snapshots[-1].id))
    assert incremental == expected, "the incremental read of the whole history read a row twice or missed one"
    files = Counter(f.partition["dt"] for f in table.files())
    assert all(n < settings[0] for n in files.values()), f"files per partition after the last round: {files}"

    gave_up = sum(n for _, n in reports.values())
    summary = {
        "appending processes": PROCESSES,
        "appends per process": batches,
        "compactions landed": len(compacted),
        "compactor": tally,
        "most live files the compactor saw": most,
        "files at the end": sum(files.values()),
        "commits that gave up after losing every race and were run again": gave_up,
        "seconds (race)": round(seconds, 1),
        "seconds (checks)": round(time.monotonic() - started, 1),
    }
    print(summary)
    record("appends_with_compactor", f"{store.kind} {PROCESSES} x {batches}", summary)
    assert compacted, "the compactor never compacted: the race proves nothing"
