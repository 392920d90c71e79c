"""The main streaming job: a Structured Streaming query writes events exactly-once into a lakefmt table on
local disk, then the table is read back with PyArrow alone.

What it does, in order:

1. lands ``--batches`` new files of events (JSON lines: id, event_time, user, amount, dt) in an input folder,
   continuing the ids after the files already there (so each run adds only new input);
2. runs ``readStream.json(input) -> writeStream.format("lakefmt")`` with ``maxFilesPerTrigger=1`` and
   ``trigger(availableNow=True)``: one micro-batch per new file, then the query stops. The sink creates the
   table on the first run (``createTable``, ``partitionBy=dt``); each micro-batch becomes one snapshot, with
   the commit user derived from the checkpoint and the identifier = the micro-batch id;
3. reads the table with ``lakefmt.open_table(...).scan().to_arrow()`` (no JVM needed) and prints events per
   day, an exactly-once check (every event id once), a pruned scan and the snapshot history.

Run it again and the query resumes from its checkpoint: only the new files are read and appended.
``--replay-last`` first deletes the checkpoint's record of the last completed micro-batch, as if the driver had
died after the table commit but before Spark logged it: Spark re-runs that batch with the same id and the sink
recognises it and skips it, so no event is written twice.

    python spark/jobs/stream_events.py [TABLE] [--batches N] [--rows N] [--replay-last]

The input files and the checkpoint live next to the table, in ``TABLE.stream/`` (a table owns its folder:
maintenance deletes files under it that no snapshot references). The default table is ``./demo-table`` (the
PyArrow demo, ``tools/demo.py``, writes ``./demo-table-pyarrow``); the exactly-once check counts only the rows
this query's commits added, so it holds on a table that other writers write to as well.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt

EPOCH = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
STEP_MS = 3_000  # one event every 3 s of event time: a file of 20,000 events spans about 17 hours
LATE_MS = 15 * 60_000  # events arrive up to 15 minutes late, so a batch can touch the previous day
USERS = 500
SCHEMA_DDL = "id BIGINT, event_time TIMESTAMP, user STRING, amount DECIMAL(12,2), dt STRING"


def _mix(i: int) -> int:
    """A cheap deterministic hash of an id (the same events on every machine and run)."""
    x = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    return (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF


def event(i: int) -> dict[str, Any]:
    h = _mix(i)
    when = EPOCH + datetime.timedelta(milliseconds=i * STEP_MS - h % LATE_MS)
    return {
        "id": i,
        "event_time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "user": f"user-{h % USERS:03d}",
        "amount": (h >> 20) % 100_000 / 100,
        "dt": when.date().isoformat(),
    }


def landed_events(folder: Path) -> int:
    """How many events the input folder holds: their ids are ``0 .. n-1`` (each file continues the last one)."""
    existing = sorted(folder.glob("events-*.json")) if folder.is_dir() else []
    if not existing:
        return 0
    with existing[-1].open("rb") as f:
        last_line = f.read().splitlines()[-1]
    return int(json.loads(last_line)["id"]) + 1


def land_input(folder: Path, files: int, rows: int) -> list[Path]:
    """Write ``files`` new event files after the ones already in ``folder``; ids continue where they stopped.

    Each file is written under a hidden name and renamed into place, so the stream never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    existing = sorted(folder.glob("events-*.json"))
    next_id = landed_events(folder)
    out = []
    for k in range(len(existing), len(existing) + files):
        path = folder / f"events-{k:05d}.json"
        tmp = folder / f".{path.name}.tmp"
        with tmp.open("w") as f:
            for i in range(next_id, next_id + rows):
                f.write(json.dumps(event(i), separators=(",", ":")) + "\n")
        os.replace(tmp, path)
        next_id += rows
        out.append(path)
    return out


def spark_session() -> Any:
    from pyspark_lakefmt.session import local_session

    return local_session("lakefmt-stream-events", log_config=Path(__file__).resolve().with_name("log4j2.properties"))


def forget_last_batch(checkpoint: Path) -> int | None:
    """Delete the checkpoint's commit record of the last micro-batch (as if the driver died right after the
    sink's commit): Spark will run that batch again, with the same id and input. Returns its id."""
    commits = checkpoint / "commits"
    ids = sorted(int(p.name) for p in commits.glob("*") if p.name.isdigit()) if commits.is_dir() else []
    if not ids:
        return None
    last = ids[-1]
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    return last


def run_stream(spark: Any, table_uri: str, input_dir: Path, checkpoint: Path) -> list[dict[str, Any]]:
    """Run the query until the input available now is consumed; return Spark's progress of each micro-batch."""
    events = (
        spark.readStream.schema(SCHEMA_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(input_dir))
    )
    query = (
        events.writeStream.format("lakefmt")
        .option("checkpointLocation", str(checkpoint))
        .option("createTable", "true")
        .option("partitionBy", "dt")
        .outputMode("append")
        .trigger(availableNow=True)
        .start(table_uri)
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    progress = [json.loads(p.json) for p in query.recentProgress]
    return [p for p in progress if "addBatch" in p["durationMs"]]  # triggers that ran a micro-batch


def _when(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def stream_commit_user(checkpoint: Path) -> str | None:
    """The commit user the sink derives from this query's checkpoint (None before the query first started)."""
    from pyspark_lakefmt.writer import commit_user

    if not (checkpoint / "metadata").is_file():
        return None
    return commit_user({"checkpointLocation": str(checkpoint)})


def ids_committed_by(table: lakefmt.Table, user: str | None) -> pa.ChunkedArray:
    """The ids of the rows that the snapshots of ``user`` added (each snapshot's delta, read incrementally): what
    the exactly-once check counts, so rows other writers put in the table (the PyArrow demo) do not count."""
    added = [
        table.scan(from_snapshot=s.id - 1, to_snapshot=s.id, columns=["id"]).to_arrow().column("id")
        for s in table.snapshots()
        if s.commit_user == user
    ]
    return pa.chunked_array([c for chunk in added for c in chunk.chunks], pa.int64())


def report(
    table_uri: str, shown: str, before: int, progress: list[dict[str, Any]], checkpoint: Path, events: int
) -> bool:
    try:
        table = lakefmt.open_table(table_uri)
    except lakefmt.NotATableError:
        print("no table yet: the query had no input (run with --batches 1 or more)")
        return True
    snapshots = table.snapshots()
    user = stream_commit_user(checkpoint)
    by_ident = {s.commit_identifier: s for s in snapshots if s.commit_user == user}
    for p in progress:
        batch, rows = int(p["batchId"]), int(p["numInputRows"])
        ms = int(p["durationMs"].get("triggerExecution", 0))
        snap = by_ident.get(batch)
        if snap is not None and snap.id > before:
            outcome = f"snapshot {snap.id}"
        elif snap is not None:
            outcome = f"already committed in snapshot {snap.id}: skipped"
        else:
            outcome = "no snapshot"
        print(f"  micro-batch {batch}: {rows:,} rows -> {outcome} ({ms:,} ms)")

    data = table.scan().to_arrow()
    print(f"\nread back with PyArrow: {data.num_rows:,} rows in {len(table.files())} data files")
    per_day = data.group_by("dt").aggregate([("id", "count"), ("amount", "sum")]).sort_by("dt")
    for row in per_day.to_pylist():
        print(f"  dt={row['dt']}: {row['id_count']:>7,} events, amount {row['amount_sum']:>14,}")

    # the rows this query committed must be the landed events 0 .. events-1, each once
    ids = ids_committed_by(table, user)
    distinct = pc.count_distinct(ids).as_py()
    lo, hi = pc.min(ids).as_py(), pc.max(ids).as_py()
    once = bool(len(ids) == distinct == events and (events == 0 or (lo == 0 and hi == events - 1)))
    print(
        f"exactly-once: this query committed {len(ids):,} rows, {distinct:,} distinct ids {lo}..{hi}, "
        f"for {events:,} input events -> {'every event exactly once' if once else 'NOT EXACTLY ONCE'}"
    )

    if data.num_rows == 0:
        return once
    first_day = per_day.column("dt")[0].as_py()
    pruned = table.scan(filter=pc.field("dt") == first_day, columns=["id", "user", "amount"])
    print(
        f"pruned scan dt={first_day}: reads {len(pruned.files())} of {len(table.files())} files, "
        f"{pruned.to_arrow().num_rows:,} rows"
    )

    print("\nsnapshot history:")
    print(
        f"  {'id':>3}  {'kind':<9} {'commit user':<29} {'ident':>5}  {'delta rows':>10}  {'total rows':>10}  "
        "time (UTC)"
    )
    for s in snapshots:
        print(
            f"  {s.id:>3}  {s.commit_kind.value:<9} {s.commit_user:<29} {s.commit_identifier:>5}  "
            f"{s.delta_record_count:>10,}  {s.total_record_count:>10,}  {_when(s.time_millis)}"
        )
    print(f"\nthe table is at {shown}; read it from Python with lakefmt.open_table({shown!r}).scan().to_arrow()")
    return once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", nargs="?", default="demo-table", help="table path (default: ./demo-table)")
    parser.add_argument("--batches", type=int, default=3, help="new input files, so micro-batches, per run")
    parser.add_argument("--rows", type=int, default=20_000, help="events per input file")
    parser.add_argument("--replay-last", action="store_true",
                        help="make Spark re-run the last completed micro-batch, as after a driver crash")
    args = parser.parse_args(argv)
    if args.batches < 0 or args.rows < 1:
        parser.error("--batches must be >= 0 and --rows >= 1")

    table_uri = os.path.abspath(args.table)
    stream_dir = Path(table_uri + ".stream")
    input_dir, checkpoint = stream_dir / "input", stream_dir / "checkpoint"
    try:
        before_snap = lakefmt.open_table(table_uri).latest_snapshot()
        before = before_snap.id if before_snap else 0
        print(f"table {args.table}: exists, latest snapshot {before}")
    except lakefmt.NotATableError:
        before = 0
        print(f"table {args.table}: new (the sink creates it, partitioned by dt)")

    t0 = time.perf_counter()
    landed = land_input(input_dir, args.batches, args.rows)
    total_files = len(list(input_dir.glob("events-*.json")))
    print(f"landed {len(landed)} new input files of {args.rows:,} events ({total_files} in the input folder)")
    if args.replay_last:
        replayed = forget_last_batch(checkpoint)
        if replayed is not None:
            print(f"simulated a crash after the commit of micro-batch {replayed}: Spark will run it again")

    spark = spark_session()
    try:
        t1 = time.perf_counter()
        progress = run_stream(spark, table_uri, input_dir, checkpoint)
        print(f"streaming query: {len(progress)} micro-batch(es) in {time.perf_counter() - t1:.1f} s "
              "(maxFilesPerTrigger=1, trigger availableNow)")
    finally:
        spark.stop()
    once = report(table_uri, args.table, before, progress, checkpoint, landed_events(input_dir))
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0 if once else 1


if __name__ == "__main__":
    sys.exit(main())
