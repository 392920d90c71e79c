"""S3 faults on the wire: racing committers against a moto server that answers a share of the table's requests
with 500 InternalError, 503 SlowDown, 409 ConditionalRequestConflict (conditional PUTs only), applies a write
and then answers 500 (the answer was lost), or drops the connection without an answer: before applying the
request, or after applying it (see :mod:`faults.wire`).

Each committer process is a job with its own commit user, committing identifiers 1..n in order. When a
commit raises (whatever the type) the job does what a real one does: open the table anew, write the same rows
again into new files and commit them under the same identifier; dedup makes that a no-op if the first
attempt had landed (and the job then discards the replay's files). Afterwards every (user, identifier) is in
exactly one snapshot, snapshot ids are contiguous, and every row is there exactly once. (What the failed
attempts left behind is orphan-clean's, and the crash matrix checks that on S3 too.)

Two clients:

* ``retrying``: botocore's and s3fs's default retries. Racing commits (how many: below), 5 % of requests
  faulted and a share of the snapshot publishes. What makes it exactly-once: botocore retries 500 and 503
  (s3fs also retries SlowDown) and a dropped connection; a conditional PUT whose 500 or dropped answer hid a
  success is retried by botocore and answered 412, which lakefmt's read-back turns into "ours"; a 409 arrives
  as ``OSError(EIO)`` and the same PUT is retried; a lost race is retried by the committer.
* ``no-retries``: botocore and s3fs make one attempt per request (``total_max_attempts=1``, s3fs
  ``retries=1``), so every fault reaches lakefmt: a dropped publish as ``ConnectionClosedError`` (not an
  ``OSError``), after the snapshot may have landed. Four jobs and one one-off writer (``Table.append``, no
  commit user) race, 2 % of requests faulted and a share of each committer's publishes. The one-off writer
  does what the rules allow a caller to do: after an error other than CommitStateUnknownError it appends
  again (the append did not land and removed its files); after CommitStateUnknownError it reads the table and
  appends again only if its rows are not there. Its appends must be there exactly once too.

Publishes are faulted at a fixed period, cycling through the six faults (see :mod:`faults.wire`), so how many
each kind gets depends on the period, not on chance. ``LAKEFMT_FULL_FAULTS=1`` runs the 400 racing commits the
claim is made for, every 20th publish faulted (about 30 publish faults, 5 of each kind; about a minute of commits
on an idle 2-core machine), and 125 no-retries commits (4 jobs and the one-off writer, 25 each), every 5th
publish of each committer faulted. CI runs 160 retrying commits with every 8th publish faulted (as many publish
faults, 5 or more of each kind, and about 120 on other requests) and 75 no-retries commits (15 each) with every
3rd publish of each committer faulted (a committer publishes at least 20 times, its 15 and a retry of each
faulted one: each kind reaches it at least once; checked for the one-off writer).
``LAKEFMT_WIRE_COMMITS=n`` and ``LAKEFMT_WIRE_COMMITS_NO_RETRIES=n`` set other numbers of commits.
"""

from __future__ import annotations

import json
import os
import queue
import re
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import CommitStateUnknownError

from .report import record
from .wire import FAULTS, WireFaults

pytestmark = [pytest.mark.s3, pytest.mark.slow]

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
PROCESSES = 4
ROWS = 3
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("user", pa.string())])
PARTS = ("a", "b", "c")
RUN_TIMEOUT = 600
ONE_OFF = PROCESSES  #: the process number of the one-off writer, when there is one


@dataclass(frozen=True)
class Client:
    """How the racing processes talk to S3, and how hard the server is on them."""

    name: str
    commits: int  #: in all, over the processes that commit
    rate: float  #: share of ordinary requests faulted
    publish_every: int  #: every n-th conditional PUT (snapshot publish) is faulted
    attempts: int  #: a job gives up on an identifier after this many errors
    one_off: bool = False  #: a fifth process appends with Table.append (no commit user)
    per_committer: bool = False  #: the publish faults cycle per committer (each job, the one-off writer)
    config: dict[str, Any] = field(default_factory=dict)  #: botocore config (storage option config_kwargs)
    s3fs_retries: int | None = None  #: s3fs's own retries (a class attribute, set in the child)

    @property
    def writers(self) -> int:
        return PROCESSES + (1 if self.one_off else 0)


CLIENTS = [
    Client(
        "retrying",
        int(os.environ.get("LAKEFMT_WIRE_COMMITS", "400" if FULL else "160")),
        0.05,
        20 if FULL else 8,
        10,
    ),
    Client(
        "no-retries",
        int(os.environ.get("LAKEFMT_WIRE_COMMITS_NO_RETRIES", "125" if FULL else "75")),
        0.02,
        5 if FULL else 3,
        60,
        one_off=True,
        per_committer=True,
        config={"retries": {"total_max_attempts": 1}},
        s3fs_retries=1,
    ),
]


def user_of(proc: int) -> str:
    return f"wire-{proc}"


def rows_for(proc: int, identifier: int) -> pa.Table:
    ids = [proc * 1_000_000 + identifier * 100 + j for j in range(ROWS)]
    return pa.table(
        {"id": ids, "dt": [PARTS[identifier % len(PARTS)]] * ROWS, "user": [user_of(proc)] * ROWS},
        schema=SCHEMA,
    )


def committer_of(body: bytes) -> str:
    """Who publishes a snapshot, from the body of its conditional PUT: a job's user, or "one-off"."""
    found = re.search(rb'"commitUser"\s*:\s*"([^"]*)"', body)
    user = found.group(1).decode() if found else "?"
    return user if user.startswith("wire-") else "one-off"


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:120] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


def _configure(client: Client) -> None:
    if client.s3fs_retries is not None:
        import s3fs

        s3fs.S3FileSystem.retries = client.s3fs_retries  # this child process only


def commit_job(
    uri: str, options: dict[str, Any], proc: int, commits: int, client: Client, barrier: Any, results: Any
) -> None:
    """One job: commit identifiers 1..commits as user wire-<proc>, retrying each until it has landed."""
    try:
        _configure(client)
        table: lakefmt.Table | None = None
        barrier.wait(timeout=120)
        errors: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        discard_errors: list[str] = []
        for identifier in range(1, commits + 1):
            for attempt in range(1, client.attempts + 1):
                try:
                    if table is None:
                        table = lakefmt.open_table(uri, storage_options=options)
                    with table.new_writer() as writer:
                        writer.write(rows_for(proc, identifier))
                        messages = [writer.prepare_commit()]
                    snap = table.new_committer(user_of(proc)).commit(messages, identifier=identifier)
                except Exception as exc:  # what the job sees; it starts the batch again on a table opened anew
                    errors[_short(exc)] += 1
                    if attempt == client.attempts:
                        raise
                    table = None
                    continue
                if snap is None:
                    outcomes["deduplicated (an earlier attempt had landed)"] += 1
                    try:  # documented as best effort: it must not raise
                        table.discard(messages)
                    except Exception as exc:
                        discard_errors.append(f"identifier {identifier}: {_short(exc)}")
                else:
                    outcomes["committed"] += 1
                break
        results.put((proc, "ok", {"errors": dict(errors), "outcomes": dict(outcomes), "discard": discard_errors}))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def _mine(table: lakefmt.Table, proc: int, identifier: int) -> int:
    """How many of the rows of append ``identifier`` the latest snapshot holds."""
    ids = rows_for(proc, identifier).column("id")
    return int(table.scan(filter=pc.field("id").isin(ids)).to_arrow().num_rows)


def one_off_job(
    uri: str, options: dict[str, Any], proc: int, commits: int, client: Client, barrier: Any, results: Any
) -> None:
    """A writer without a commit user: ``Table.append`` of batches 1..commits. After an error it appends again,
    unless an attempt's outcome was unknown (CommitStateUnknownError): then it first reads the table and
    appends only if the rows are not there (its rows have ids of their own, as a real one checks by its key)."""
    try:
        _configure(client)
        table: lakefmt.Table | None = None
        barrier.wait(timeout=120)
        errors: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        for identifier in range(1, commits + 1):
            unknown = False  # an earlier attempt of this batch may have landed
            for attempt in range(1, client.attempts + 1):
                try:
                    if table is None:
                        table = lakefmt.open_table(uri, storage_options=options)
                    if unknown:
                        found = _mine(table, proc, identifier)
                        if found not in (0, ROWS):
                            raise AssertionError(f"append {identifier} is torn: {found} of its {ROWS} rows")
                        if found:
                            outcomes["found landed after CommitStateUnknownError"] += 1
                            break
                        unknown = False  # it did not land: nothing in flight can land it later
                    table.append(rows_for(proc, identifier))
                except AssertionError:
                    raise
                except CommitStateUnknownError as exc:
                    errors[_short(exc)] += 1
                    unknown = True
                except Exception as exc:  # the append did not land and removed its files: append again
                    errors[_short(exc)] += 1
                else:
                    outcomes["appended"] += 1
                    break
                if attempt == client.attempts:
                    raise RuntimeError(f"append {identifier} failed {attempt} times")
                table = None
        results.put((proc, "ok", {"errors": dict(errors), "outcomes": dict(outcomes), "discard": []}))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_racing_commits_are_exactly_once_under_s3_faults(
    s3_store: Any, wire_faults: WireFaults, fault_ctx: Any, client: Client
) -> None:
    per_process = client.commits // client.writers
    total = per_process * client.writers
    table = lakefmt.create_table(
        s3_store.uri(f"wire-{uuid.uuid4().hex}"),
        SCHEMA,
        partition_by=["dt"],
        # 4 racers and injected faults: lost races are the common case; one snapshot a commit (no compaction)
        options={"commit.max-retries": "100", "compaction.auto": "false"},
        storage_options=s3_store.storage_options,
    )
    options = dict(s3_store.storage_options)
    if client.config:
        options["config_kwargs"] = client.config
    wire_faults.prefix = table.io.root.split("/", 1)[1]  # the table's key prefix: other tests are untouched
    wire_faults.rate = client.rate
    wire_faults.publish_every = client.publish_every
    if client.per_committer:
        wire_faults.publish_group = committer_of

    started = time.monotonic()
    barrier = fault_ctx.Barrier(client.writers)
    results = fault_ctx.Queue()
    procs = [
        fault_ctx.Process(
            target=one_off_job if p == ONE_OFF else commit_job,
            args=(table.uri, options, p, per_process, client, barrier, results),
        )
        for p in range(client.writers)
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
    wire_faults.publish_every = None
    wire_faults.publish_group = None
    checks_started = time.monotonic()

    job_errors: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    discard_errors: list[str] = []
    for report in reports.values():
        job_errors.update(report["errors"])
        outcomes.update(report["outcomes"])
        discard_errors += report["discard"]
    summary = {
        "client": client.name,
        "commits": total,
        "processes": client.writers,
        "one-off writer": client.one_off,
        "rate": client.rate,
        "publish faulted every": client.publish_every,
        "seconds (commits)": round(seconds, 1),
        "requests and faults": dict(sorted(wire_faults.counts.items())),
        "publish faults per committer": dict(sorted(wire_faults.by_group.items())),
        "errors the jobs saw (each retried)": dict(job_errors),
        "errors the one-off writer saw": reports.get(ONE_OFF, {}).get("errors", {}),
        "outcomes": dict(outcomes),
        "errors from Table.discard (best effort)": discard_errors,
    }
    print(json.dumps(summary, indent=1))  # also when a check below fails: what the run went through
    assert not failures, "\n".join(failures)

    # every (user, identifier) exactly once, contiguous ids, one snapshot per commit
    jobs = range(PROCESSES)
    t = lakefmt.open_table(table.uri, storage_options=s3_store.storage_options)
    snapshots = t.snapshots()
    rows = t.to_arrow().sort_by("id")
    twice = sorted(i for i, n in Counter(rows.column("id").to_pylist()).items() if n > 1)
    expected_ids = list(range(1, total + 1))
    assert [s.id for s in snapshots] == expected_ids, (
        f"{len(snapshots)} snapshots for {total} commits; row ids present more than once: {twice[:12]} "
        f"(writer = id // 1000000, batch = id % 1000000 // 100; writer {ONE_OFF} is the one-off writer)"
    )
    job_snapshots = [s for s in snapshots if s.commit_user in {user_of(p) for p in jobs}]
    pairs = Counter((s.commit_user, s.commit_identifier) for s in job_snapshots)
    expected_pairs = {(user_of(p), i) for p in jobs for i in range(1, per_process + 1)}
    assert set(pairs) == expected_pairs and set(pairs.values()) == {1}, (
        f"missing {sorted(expected_pairs - set(pairs))}, twice {sorted(k for k, n in pairs.items() if n > 1)}"
    )
    assert len(snapshots) - len(job_snapshots) == (per_process if client.one_off else 0)  # the one-off appends
    assert all(s.delta_record_count == ROWS for s in snapshots)
    for p in jobs:
        assert t.commit_user_identifier(user_of(p)) == per_process
    # every row exactly once
    expected = pa.concat_tables(rows_for(p, i) for p in range(client.writers) for i in range(1, per_process + 1))
    assert rows.num_rows == total * ROWS == snapshots[-1].total_record_count, f"row ids twice: {twice[:12]}"
    assert rows.to_pylist() == expected.sort_by("id").to_pylist()
    assert sum(outcomes.values()) == total  # committed, or found already landed by the retry after an error

    # the faults really happened, each kind, also on the conditional PUTs that publish snapshots
    for fault in FAULTS:
        assert wire_faults.total(fault) > 0, f"no {fault} was injected"
    for fault in ("409", "applied-500", "drop", "applied-drop"):
        assert wire_faults.counts[f"{fault} conditional-PUT"] > 0, f"no {fault} hit a snapshot publish"
    if client.one_off:  # the one-off writer's own publishes were dropped, also after they were applied
        for fault in ("applied-500", "drop", "applied-drop"):
            assert wire_faults.by_group[f"{fault} one-off"] > 0, f"no {fault} hit a one-off publish"
    summary["seconds (checks)"] = round(time.monotonic() - checks_started, 1)
    record("s3_wire_faults", f"{client.name}: {total} commits", summary)
    # Table.discard is documented as best effort (its errors suppressed; orphan-clean is the backstop)
    assert not discard_errors, f"Table.discard raised: {discard_errors}"
