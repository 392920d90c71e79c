"""The PyArrow-only demo (no Spark, no JVM): a stream of event micro-batches written exactly-once to a lakefmt
table on local disk, then read back with PyArrow. The main demo, ``bash tools/run-demo.sh``, runs the same kind
of stream through Spark: ``spark/jobs/stream_events.py``.

It does what a streaming sink does: each micro-batch is written by parallel "tasks" (threads, each with its
own writer and per-task manifest), then one committer publishes the batch with commit user "demo-stream" and
identifier = batch id. Batch 2 is replayed on purpose (as a restarted query would) and is recognised and
skipped. Run it again and it resumes after the last committed batch.

    python tools/demo.py [TABLE] [--batches N]

The default table, ``./demo-table-pyarrow``, is not the Spark demo's (``./demo-table``). The exactly-once check
reads only the rows this demo's commit user added, so it holds on a table other writers also write to.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("user", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("dt", pa.string()),
    ]
)
COMMIT_USER = "demo-stream"
DEFAULT_TABLE = "demo-table-pyarrow"
BATCHES = 5
TASKS = 4
ROWS_PER_TASK = 25_000
USERS = [f"user-{i:03d}" for i in range(200)]


def make_rows(batch_id: int, task: int) -> pa.Table:
    """Deterministic events for one task of one micro-batch, spread over two days."""
    start = (batch_id * TASKS + task) * ROWS_PER_TASK
    ids = pa.array(range(start, start + ROWS_PER_TASK), pa.int64())
    base = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    times = [base + datetime.timedelta(milliseconds=500 * i) for i in range(start, start + ROWS_PER_TASK)]
    amount = [decimal.Decimal((i * 7919) % 100_000).scaleb(-2) for i in range(start, start + ROWS_PER_TASK)]
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
            "user": pa.array([USERS[i % len(USERS)] for i in range(start, start + ROWS_PER_TASK)]),
            "amount": pa.array(amount, pa.decimal128(12, 2)),
            "dt": pa.array([t.date().isoformat() for t in times]),
        }
    )


def run_task(table: lakefmt.Table, batch_id: int, task: int) -> lakefmt.CommitMessage:
    writer = table.new_writer()
    writer.write(make_rows(batch_id, task))
    return writer.prepare_commit()


def write_batch(table: lakefmt.Table, committer: lakefmt.Committer, batch_id: int) -> lakefmt.Snapshot | None:
    with ThreadPoolExecutor(TASKS) as pool:
        messages = list(pool.map(lambda task: run_task(table, batch_id, task), range(TASKS)))
    return committer.commit(messages, identifier=batch_id)


def ids_committed_by(table: lakefmt.Table, commit_user: str) -> pa.ChunkedArray:
    """The ids of the rows that the snapshots of ``commit_user`` added (each snapshot's delta, read incrementally):
    what an exactly-once check counts, whoever else writes to the table."""
    added = [
        table.scan(from_snapshot=s.id - 1, to_snapshot=s.id, columns=["id"]).to_arrow().column("id")
        for s in table.snapshots()
        if s.commit_user == commit_user
    ]
    return pa.chunked_array([c for chunk in added for c in chunk.chunks], pa.int64())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The demo's command line: ``[TABLE] [--batches N]``."""
    parser = argparse.ArgumentParser(
        prog="python tools/demo.py",
        description="A stream of event micro-batches written exactly-once to a lakefmt table with PyArrow alone "
        "(parallel writer threads, one committer), then read back. Run it again and it resumes after the last "
        "committed batch.",
    )
    parser.add_argument(
        "table", nargs="?", default=DEFAULT_TABLE, help=f"table path or URI (default: ./{DEFAULT_TABLE})"
    )
    parser.add_argument(
        "--batches", type=int, default=BATCHES, help=f"micro-batches to write in this run (default: {BATCHES})"
    )
    args = parser.parse_args(argv)
    if args.batches < 0:
        parser.error("--batches must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = args.table
    try:
        table = lakefmt.open_table(path)
        print(f"opened table {path}")
    except lakefmt.NotATableError:
        table = lakefmt.create_table(path, SCHEMA, partition_by=["dt"])
        print(f"created table {path} partitioned by dt")
    committer = table.new_committer(commit_user=COMMIT_USER)
    last = table.commit_user_identifier(COMMIT_USER)
    first = 0 if last is None else last + 1
    for batch_id in range(first, first + args.batches):
        t0 = time.perf_counter()
        snap = write_batch(table, committer, batch_id)
        ms = (time.perf_counter() - t0) * 1000
        print(
            f"micro-batch {batch_id}: {TASKS * ROWS_PER_TASK:,} rows "
            f"-> snapshot {snap.id if snap else '-'} ({ms:.0f} ms)"
        )
        if batch_id == first + 2:
            replay = write_batch(table, committer, batch_id)
            print(
                f"micro-batch {batch_id} replayed (as after a crash): "
                f"{'skipped' if replay is None else 'COMMITTED TWICE'}"
            )
    if table.latest_snapshot() is None:
        print("no snapshot yet: run with --batches 1 or more")
        return 0

    data = table.scan().to_arrow()
    print(f"\nread back with PyArrow: {data.num_rows:,} rows, {len(table.files())} data files")
    ids = ids_committed_by(table, COMMIT_USER)
    last = table.commit_user_identifier(COMMIT_USER)
    expected = 0 if last is None else (last + 1) * TASKS * ROWS_PER_TASK
    distinct = pc.count_distinct(ids).as_py()
    once = len(ids) == distinct == expected and (expected == 0 or pc.max(ids).as_py() == expected - 1)
    print(
        f"rows committed by {COMMIT_USER!r}: {len(ids):,}, distinct ids {distinct:,}, expected {expected:,} "
        f"(every event exactly once: {once})"
    )
    per_day = data.group_by("dt").aggregate([("id", "count"), ("amount", "sum")]).sort_by("dt")
    for row in per_day.to_pylist():
        print(f"  dt={row['dt']}: {row['id_count']:,} events, amount {row['amount_sum']}")
    day = table.scan(filter=pc.field("dt") == "2026-11-01", columns=["id", "user"])
    print(f"pruned scan of dt=2026-11-01 reads {len(day.files())} files, {day.to_arrow().num_rows:,} rows")

    print("\nsnapshot history:")
    print(
        f"  {'id':>4}  {'kind':<9} {'commit user':<14} {'ident':>5}  "
        f"{'delta rows':>10}  {'total rows':>10}  committed at"
    )
    for s in table.snapshots():
        when = datetime.datetime.fromtimestamp(s.time_millis / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"  {s.id:>4}  {s.commit_kind.value:<9} {s.commit_user:<14} {s.commit_identifier:>5}  "
            f"{s.delta_record_count:>10,}  {s.total_record_count:>10,}  {when} UTC"
        )
    first_snap = table.snapshots()[0].id
    old = table.scan(snapshot_id=first_snap).count()
    print(f"\ntime travel: snapshot {first_snap} has {old:,} rows")
    return 0 if once else 1


if __name__ == "__main__":
    sys.exit(main())
