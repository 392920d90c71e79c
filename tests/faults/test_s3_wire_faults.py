"""S3 faults on the wire: racing committers against a moto server that answers 5% of the table's requests
with 500 InternalError, 503 SlowDown, 409 ConditionalRequestConflict (conditional PUTs only), or applies a
write and then answers 500 (the answer was lost).

Each committer process is a job with its own commit user, committing identifiers 1..n in order. When a
commit raises (whatever the type) the job does what a real one does: open the table anew, write the same rows
again into new files and commit them under the same identifier; dedup makes that a no-op if the first
attempt had landed (and the job then discards the replay's files). Afterwards every (user, identifier) is in
exactly one snapshot, snapshot ids are contiguous, and every row is there exactly once. (What the failed
attempts left behind is orphan-clean's, and the crash matrix checks that on S3 too.)

What makes it exactly-once: botocore retries 500 and 503 (s3fs also retries SlowDown); a conditional PUT
whose 500 hid a success is retried by botocore and answered 412, which lakefmt's read-back turns into "ours";
a 409 arrives as ``OSError(EIO)`` and the same PUT is retried; a lost race is retried by the committer.

It runs the 400 racing commits the claim is made for (about a minute of commits on an idle 2-core machine);
``LAKEFMT_WIRE_COMMITS=n`` sets any other number.
"""

from __future__ import annotations

import json
import os
import queue
import time
import traceback
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import lakefmt

from .report import record
from .wire import FAULTS, WireFaults

pytestmark = [pytest.mark.s3, pytest.mark.slow]

PROCESSES = 4
WIRE_COMMITS = int(os.environ.get("LAKEFMT_WIRE_COMMITS", "400"))
RATE = 0.05
ROWS = 3
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("user", pa.string())])
PARTS = ("a", "b", "c")
RUN_TIMEOUT = 600


def user_of(proc: int) -> str:
    return f"wire-{proc}"


def rows_for(proc: int, identifier: int) -> pa.Table:
    ids = [proc * 1_000_000 + identifier * 100 + j for j in range(ROWS)]
    return pa.table(
        {"id": ids, "dt": [PARTS[identifier % len(PARTS)]] * ROWS, "user": [user_of(proc)] * ROWS},
        schema=SCHEMA,
    )


def commit_job(uri: str, options: dict[str, Any], proc: int, commits: int, barrier: Any, results: Any) -> None:
    """One job: commit identifiers 1..commits as user wire-<proc>, retrying each until it has landed."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        barrier.wait(timeout=120)
        errors: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        for identifier in range(1, commits + 1):
            for attempt in range(1, 11):
                try:
                    with table.new_writer() as writer:
                        writer.write(rows_for(proc, identifier))
                        messages = [writer.prepare_commit()]
                    snap = table.new_committer(user_of(proc)).commit(messages, identifier=identifier)
                except Exception as exc:  # what the job sees; it starts the batch again on a table opened anew
                    errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"] += 1
                    if attempt == 10:
                        raise
                    table = lakefmt.open_table(uri, storage_options=options)
                    continue
                if snap is None:
                    outcomes["deduplicated (an earlier attempt had landed)"] += 1
                    table.discard(messages)
                else:
                    outcomes["committed"] += 1
                break
        results.put((proc, "ok", {"errors": dict(errors), "outcomes": dict(outcomes)}))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def test_racing_commits_are_exactly_once_under_s3_faults(
    s3_store: Any, wire_faults: WireFaults, fault_ctx: Any
) -> None:
    per_process = WIRE_COMMITS // PROCESSES
    total = per_process * PROCESSES
    table = lakefmt.create_table(
        s3_store.uri(f"wire-{uuid.uuid4().hex}"),
        SCHEMA,
        partition_by=["dt"],
        options={"commit.max-retries": "100"},  # 4 racers and injected faults: lost races are the common case
        storage_options=s3_store.storage_options,
    )
    wire_faults.prefix = table.io.root.split("/", 1)[1]  # the table's key prefix: other tests are untouched
    wire_faults.rate = RATE

    started = time.monotonic()
    barrier = fault_ctx.Barrier(PROCESSES)
    results = fault_ctx.Queue()
    procs = [
        fault_ctx.Process(
            target=commit_job, args=(table.uri, s3_store.storage_options, p, per_process, barrier, results)
        )
        for p in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    reports: dict[int, Any] = {}
    failures: list[str] = []
    try:
        for _ in procs:
            try:
                proc, status, payload = results.get(timeout=RUN_TIMEOUT)
            except queue.Empty:
                failures.append(f"a job hung or died; exit codes {[p.exitcode for p in procs]}")
                break
            if status == "ok":
                reports[proc] = payload
            else:
                failures.append(f"job {proc} failed:\n{payload}")
                barrier.abort()
        for p in procs:
            p.join(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    seconds = time.monotonic() - started
    wire_faults.rate = 0.0  # the checks below read a healthy server
    assert not failures, "\n".join(failures)
    checks_started = time.monotonic()

    # every (user, identifier) exactly once, contiguous ids, one snapshot per commit
    t = lakefmt.open_table(table.uri, storage_options=s3_store.storage_options)
    snapshots = t.snapshots()
    assert [s.id for s in snapshots] == list(range(1, total + 1))
    pairs = Counter((s.commit_user, s.commit_identifier) for s in snapshots)
    expected_pairs = {(user_of(p), i) for p in range(PROCESSES) for i in range(1, per_process + 1)}
    assert set(pairs) == expected_pairs and set(pairs.values()) == {1}
    assert all(s.delta_record_count == ROWS for s in snapshots)
    for p in range(PROCESSES):
        assert t.commit_user_identifier(user_of(p)) == per_process
    # every row exactly once
    rows = t.to_arrow().sort_by("id")
    expected = pa.concat_tables(rows_for(p, i) for p in range(PROCESSES) for i in range(1, per_process + 1))
    assert rows.num_rows == total * ROWS == snapshots[-1].total_record_count
    assert rows.to_pylist() == expected.sort_by("id").to_pylist()

    # the faults really happened, each kind, also on the conditional PUTs that publish snapshots
    for fault in FAULTS:
        assert wire_faults.total(fault) > 0, f"no {fault} was injected"
    assert wire_faults.counts["409 conditional-PUT"] > 0
    assert wire_faults.counts["applied-500 conditional-PUT"] > 0

    job_errors: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for report in reports.values():
        job_errors.update(report["errors"])
        outcomes.update(report["outcomes"])
    assert sum(outcomes.values()) == total  # committed, or found already landed by the retry after an error
    summary = {
        "commits": total,
        "processes": PROCESSES,
        "rate": RATE,
        "seconds (commits)": round(seconds, 1),
        "seconds (checks)": round(time.monotonic() - checks_started, 1),
        "requests and faults": dict(sorted(wire_faults.counts.items())),
        "errors the jobs saw (each retried with the same identifier)": dict(job_errors),
        "outcomes": dict(outcomes),
    }
    print(json.dumps(summary, indent=1))
    record("s3_wire_faults", f"{total} commits", summary)
