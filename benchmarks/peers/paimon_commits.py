"""Commit speed of pypaimon (Apache Paimon's pure-Python API): N append commits of R rows to a new local table.

Runs inside the pypaimon virtualenv made by ``tools/bench-setup.sh`` (stdlib + pypaimon + pyarrow only; it must
not import lakefmt or the benchmarks package):

    python paimon_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

A filesystem catalog whose warehouse is ``DIR`` holds the table ``bench.events`` (``DIR/bench.db/events``): an
append-only table (no primary key, so bucket -1: "bucket-unaware"), partitioned by ``dt`` when asked. One append
= one batch commit in the usual API: ``new_batch_write_builder()`` -> ``new_write().write_arrow(batch)`` ->
``prepare_commit()`` -> ``new_commit().commit(messages)``, the whole of it timed. Prints one JSON line last.

Metadata bytes: every file under the table folder except the data ``*.parquet`` files, i.e. ``snapshot/``
(snapshot-N, LATEST, EARLIEST), ``manifest/`` (Avro manifests and manifest lists) and ``schema/``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from importlib.metadata import version

import pyarrow as pa
import pyarrow.compute as pc

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("user", pa.string()),
                    ("amount", pa.float64()), ("dt", pa.string())])
DAYS = 10  # distinct dt values over the whole run; each commit's rows fall in 1 or 2 of them
_EPOCH_US = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z
_DAY_US = 86_400_000_000


def events(n: int, *, seed: int = 1, days: int = DAYS, users: int = 10_000) -> pa.Table:
    """``n`` rows, deterministic, pyarrow compute only: the same rows as lakefmt's benchmarks.common.events."""
    ids = pa.array(range(n), pa.int64())
    step = max(1, (days * _DAY_US) // max(n, 1))
    ts_us = pc.add(pc.multiply(ids, step), _EPOCH_US)
    day_idx = pc.cast(pc.divide(pc.subtract(ts_us, _EPOCH_US), _DAY_US), pa.int64())
    day_pool = pa.array([(datetime.date(2026, 11, 1) + datetime.timedelta(days=i)).isoformat()
                         for i in range(days + 1)])
    user_pool = pa.array([f"user-{i:06d}" for i in range(users)])
    user_idx = pc.cast(pc.floor(pc.multiply(pc.random(n, initializer=seed), users)), pa.int64())
    amount = pc.round(pc.multiply(pc.random(n, initializer=seed + 1), 1000.0), 2)
    return pa.table([ids, pc.cast(ts_us, pa.timestamp("us")), user_pool.take(user_idx), amount,
                     day_pool.take(day_idx)], schema=SCHEMA)


def metadata_size(table_dir: str) -> tuple[int, int]:
    """(bytes, files) under ``table_dir`` except the data files (``*.parquet``)."""
    total = files = 0
    for folder, _dirs, names in os.walk(table_dir):
        for name in names:
            if not name.endswith(".parquet"):
                total += os.lstat(os.path.join(folder, name)).st_size
                files += 1
    return total, files


def main() -> int:
    ap = argparse.ArgumentParser(description="Time N append commits of R rows to a new pypaimon table.")
    ap.add_argument("--root", required=True)
    ap.add_argument("--commits", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--partitioned", type=int, choices=(0, 1), required=True)
    ap.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds of commits")
    args = ap.parse_args()

    from pypaimon import CatalogFactory, Schema

    os.makedirs(args.root, exist_ok=False)
    catalog = CatalogFactory.create({"warehouse": args.root})
    catalog.create_database("bench", False)
    schema = Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"] if args.partitioned else None)
    catalog.create_table("bench.events", schema, False)
    table = catalog.get_table("bench.events")
    data = events(args.commits * args.rows)

    commit_s: list[float] = []
    t_start = time.perf_counter()
    for i in range(args.commits):
        batch = data.slice(i * args.rows, args.rows)
        t0 = time.perf_counter()
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(batch)
        messages = write.prepare_commit()
        commit = builder.new_commit()
        commit.commit(messages)
        write.close()
        commit.close()
        commit_s.append(time.perf_counter() - t0)
        if args.time_budget is not None and time.perf_counter() - t_start > args.time_budget:
            break
    done = len(commit_s)

    read_builder = catalog.get_table("bench.events").new_read_builder()
    rows_read = read_builder.new_read().to_arrow(read_builder.new_scan().plan().splits()).num_rows
    table_dir = os.path.join(args.root, "bench.db", "events")
    meta_bytes, meta_files = metadata_size(table_dir)
    notes = [
        "pure-Python pypaimon (the optional pypaimon_rust native writer is not installed)",
        "append-only table, bucket -1 (bucket-unaware); one batch write builder + one BatchTableCommit per append",
        "metadata = every file under the table folder except data *.parquet: snapshot/ (snapshot-N, LATEST), "
        "manifest/ (Avro manifests + manifest lists), schema/",
        "pypaimon's local FileIO issues no fsync; it publishes a snapshot by renaming a temp file after checking "
        "the name is free (a lock makes that atomic between threads of one process only)",
        "pypaimon never merges manifests or expires snapshots during commits (left to external maintenance)",
    ]
    if done < args.commits:
        notes.append(f"stopped on the time budget ({args.time_budget:g} s) after {done} of {args.commits} commits")
    print(json.dumps({
        "peer": "pypaimon",
        "version": version("pypaimon"),
        "pyarrow": pa.__version__,
        "commits_done": done,
        "commits_requested": args.commits,
        "rows": args.rows,
        "rows_read": rows_read,
        "partitioned": bool(args.partitioned),
        "commit_s": commit_s,
        "total_s": sum(commit_s),
        "metadata_bytes": meta_bytes,
        "metadata_files": meta_files,
        "notes": notes,
    }))
    if rows_read != done * args.rows:
        print(f"read back {rows_read} rows, expected {done * args.rows}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
