"""Schema changes racing 4 appending processes (real processes, spawned; local disk, and S3 through moto).

The appenders are jobs: each batch opens the table, builds its rows for the schema it finds (columns found by
field id, so a rename does not lose them; a column it finds added gets values too), writes them under that schema
(``new_writer(schema_id=)``) and commits them as (its commit user, the batch's identifier). A sixth process
changes the schema while they run, waiting for the table to grow between changes: add a column, widen an int32
column to int64, rename a column, drop a column the appenders write, add another column. A commit whose files
hold the dropped column fails with ``SchemaConflictError`` and commits nothing: the job runs the batch again (the
same identifier) with the schema it now finds. At the end every row is there exactly once, each value as written
(no lost or mis-typed row), each schema change applied exactly once, and every snapshot reads.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from faults.report import record
from helpers import create_table_in

import lakefmt
from lakefmt.errors import CommitRetriesExhaustedError, SchemaConflictError

pytestmark = pytest.mark.slow

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
APPENDERS = 4
#: batches per appender: moto serves about 100 requests/s on the busy CI machine, so S3 races fewer in CI
BATCHES = {"local": 20, "s3": 20 if FULL else 5}
ROWS = 3
RETRIES = 8  #: times a job runs a batch again after a conflict (the drop) or a commit that gave up
START_TIMEOUT = 120
RUN_TIMEOUT = 900

#: id (never changes), w (renamed to writer), v (int32, widened to int64), x (dropped)
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("w", pa.string()), ("v", pa.int32()), ("x", pa.string())]
)
W, V, X = 2, 3, 4  #: field ids of the columns the appenders find by id
WIDE = 2**32  #: added to v once the column is int64: a value an int32 file could never hold


def _changes() -> list[tuple[str, Any]]:
    return [
        ("add c", lambda u: u.add_column("c", pa.string())),
        ("widen v", lambda u: u.update_column("v", pa.int64())),
        ("rename w", lambda u: u.rename_column("w", "writer")),
        ("drop x", lambda u: u.drop_column("x")),
        ("add d", lambda u: u.add_column("d", pa.int16())),
    ]


def batch_ids(proc: int, batch: int) -> list[int]:
    return [proc * 1_000_000 + batch * 1_000 + j for j in range(ROWS)]


def rows_for(schema: lakefmt.TableSchema, proc: int, ids: list[int]) -> pa.Table:
    """The batch's rows in ``schema``: every column it has, known ones by field id."""
    by_id = {n.id: n for n in schema.nodes}
    cols: dict[str, Any] = {}
    for node in schema.nodes:
        if node.name == "id":
            values: list[Any] = ids
        elif node.id == W:
            values = [f"w{proc}"] * len(ids)
        elif node.id == V:
            values = [i + (WIDE if pa.types.is_int64(by_id[V].type) else 0) for i in ids]
        elif node.id == X:
            values = [f"x{i}" for i in ids]
        elif node.name == "c":
            values = [f"c{i}" for i in ids]
        elif node.name == "d":
            values = [i % 100 for i in ids]
        else:
            raise AssertionError(f"a column the test does not know: {node.name}")
        cols[node.name] = pa.array(values, node.type)
    return pa.table(cols, schema=schema.arrow_schema)


def appender(uri: str, options: dict[str, Any], proc: int, barrier: Any, results: Any, batches: int) -> None:
    try:
        conflicts = gave_up = 0
        barrier.wait(timeout=START_TIMEOUT)
        for batch in range(batches):
            for attempt in range(RETRIES + 1):
                table = lakefmt.open_table(uri, storage_options=options)  # a job: the table as it is now
                schema = table.table_schema()
                with table.new_writer(schema_id=schema.id) as writer:
                    writer.write(rows_for(schema, proc, batch_ids(proc, batch)))
                    message = writer.prepare_commit()
                try:
                    table.new_committer(f"job-{proc}").commit([message], identifier=batch + 1)
                    break
                except (SchemaConflictError, CommitRetriesExhaustedError) as exc:
                    table.discard([message])  # nothing committed: its files are garbage
                    conflicts += isinstance(exc, SchemaConflictError)
                    gave_up += isinstance(exc, CommitRetriesExhaustedError)
                    if attempt == RETRIES:
                        raise
        results.put((proc, "ok", (conflicts, gave_up)))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def changer(uri: str, options: dict[str, Any], proc: int, barrier: Any, results: Any, batches: int) -> None:
    """Each change once the table has grown by about a sixth of the race's commits since the last one."""
    try:
        table = lakefmt.open_table(uri, storage_options=options)
        step = max(1, APPENDERS * batches // 6)
        applied = []
        barrier.wait(timeout=START_TIMEOUT)
        for k, (name, change) in enumerate(_changes(), 1):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                latest = table.latest_snapshot()
                if latest is not None and latest.id >= k * step:
                    break
                time.sleep(0.01)
            with table.update_schema() as u:
                change(u)
            applied.append((name, table.latest_snapshot().id))  # type: ignore[union-attr]
        results.put((proc, "ok", applied))
    except BaseException:
        results.put((proc, "error", traceback.format_exc()))


def _run(uri: str, options: dict[str, Any], batches: int) -> dict[int, Any]:
    ctx = multiprocessing.get_context("spawn")
    targets = [appender] * APPENDERS + [changer]
    barrier = ctx.Barrier(len(targets))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=t, args=(uri, options, i, barrier, results, batches), name=f"racer-{i}")
        for i, t in enumerate(targets)
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
                barrier.abort()
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    assert errors == [], "\n".join(errors)
    return reports


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def shared_store(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_store")


def test_schema_changes_racing_four_appending_processes_lose_and_mistype_no_row(shared_store: Any) -> None:
    table = create_table_in(shared_store, SCHEMA)
    batches = BATCHES[shared_store.kind]
    started = time.monotonic()
    reports = _run(table.uri, shared_store.storage_options, batches)
    seconds = time.monotonic() - started
    table = lakefmt.open_table(table.uri, storage_options=shared_store.storage_options)

    # every schema change once, in order
    assert [s.id for s in table.schemas()] == list(range(len(_changes()) + 1))
    final = table.table_schema()
    assert final.arrow_schema == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("writer", pa.string()),
            ("v", pa.int64()),
            ("c", pa.string()),
            ("d", pa.int16()),
        ]
    )
    assert final.column_ids == {"id": 1, "writer": W, "v": V, "c": 5, "d": 6}

    # every batch exactly once, as its own (user, identifier); every value as written
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, len(snapshots) + 1))
    pairs = Counter((s.commit_user, s.commit_identifier) for s in snapshots if s.commit_user.startswith("job-"))
    assert pairs == Counter({(f"job-{p}", b + 1): 1 for p in range(APPENDERS) for b in range(batches)})
    rows = table.to_arrow().to_pylist()
    ids = Counter(r["id"] for r in rows)
    expected = {i for p in range(APPENDERS) for b in range(batches) for i in batch_ids(p, b)}
    assert set(ids) == expected and set(ids.values()) == {1}, "a row lost or committed twice"
    for r in rows:
        i = r["id"]
        assert r["writer"] == f"w{i // 1_000_000}", r
        assert r["v"] in (i, i + WIDE), r
        assert r["c"] in (None, f"c{i}"), r
        assert r["d"] in (None, i % 100), r
    widened = sum(r["v"] > r["id"] for r in rows)
    # every snapshot reads, under the schema it was committed with
    for s in snapshots:
        assert table.scan(snapshot_id=s.id).count() == s.total_record_count, f"snapshot {s.id}"
    conflicts = sum(reports[p][0] for p in range(APPENDERS))
    summary = {
        "appenders": APPENDERS,
        "batches each": batches,
        "schema changes (at snapshot)": reports[APPENDERS],
        "commits refused for a dropped column, run again": conflicts,
        "commits that gave up, run again": sum(reports[p][1] for p in range(APPENDERS)),
        "rows written with v beyond int32": widened,
        "snapshots": len(snapshots),
        "seconds": round(seconds, 1),
    }
    print(summary)
    record("schema_races", f"{shared_store.kind} {APPENDERS} x {batches}", summary)
    assert widened > 0, "no batch was written after the widening: the race did not overlap the changes"
