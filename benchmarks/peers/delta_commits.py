"""Commit speed of deltalake (delta-rs's Python binding): N append commits of R rows to a new local table.

Runs inside the deltalake virtualenv made by ``tools/bench-setup.sh`` (stdlib + deltalake + pyarrow only; it must
not import lakefmt or the benchmarks package):

    python delta_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

``DeltaTable.create`` makes the table at ``DIR`` (partitioned by ``dt`` when asked; the timestamp-without-zone
column makes it protocol 3/7 with the timestampNtz feature), with default table properties: a checkpoint every
100 commits, no log clean-up within the 30-day retention. One append = one ``write_deltalake(table, batch,
mode="append")``, passed the one ``DeltaTable`` object kept across commits (it updates its state in place
after each commit, as a long-lived writer would; given a URI string instead, every append loads the table
state anew, a little slower over 300 commits here). Timed whole. Prints one JSON line last.

Metadata bytes: every file under ``DIR/_delta_log/`` (JSON commits, ``*.checkpoint.parquet`` checkpoints,
``_last_checkpoint``); data files are the ``*.parquet`` files outside ``_delta_log``.
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


def tree_size(path: str) -> tuple[int, int]:
    """(bytes, files) under ``path``, every file."""
    total = files = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            total += os.lstat(os.path.join(folder, name)).st_size
            files += 1
    return total, files



def main() -> int:
    ap = argparse.ArgumentParser(description="Time N append commits of R rows to a new Delta table.")
    ap.add_argument("--root", required=True)
    ap.add_argument("--commits", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--partitioned", type=int, choices=(0, 1), required=True)
    ap.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds of commits")
    args = ap.parse_args()

    from deltalake import DeltaTable, write_deltalake

    os.makedirs(args.root, exist_ok=False)
    table = DeltaTable.create(args.root, SCHEMA, partition_by=["dt"] if args.partitioned else None)
    data = events(args.commits * args.rows)

    commit_s: list[float] = []
    t_start = time.perf_counter()
    for i in range(args.commits):
        batch = data.slice(i * args.rows, args.rows)
        t0 = time.perf_counter()
        write_deltalake(table, batch, mode="append")
        commit_s.append(time.perf_counter() - t0)
        if args.time_budget is not None and time.perf_counter() - t_start > args.time_budget:
            break
    done = len(commit_s)
    if table.version() != done:
        print(f"table is at version {table.version()}, expected {done}", file=sys.stderr)
        return 1

    rows_read = DeltaTable(args.root).to_pyarrow_table().num_rows
    meta_bytes, meta_files = tree_size(os.path.join(args.root, "_delta_log"))
    checkpoints = sum(1 for n in os.listdir(os.path.join(args.root, "_delta_log")) if ".checkpoint." in n)
    notes = [
        "one write_deltalake(DeltaTable, batch, mode='append') per append, on one DeltaTable object kept open",
        "default table properties: checkpoint every 100 commits; expired-log clean-up never due in this run",
        f"metadata = every file under _delta_log/ (JSON commits, _last_checkpoint, checkpoints: {checkpoints})",
        "delta-rs's local object store issues no fsync; it publishes a log version by hard-linking a temp file "
        "to its name (fails if taken)",
    ]
    if done < args.commits:
        notes.append(f"stopped on the time budget ({args.time_budget:g} s) after {done} of {args.commits} commits")
    print(json.dumps({
        "peer": "deltalake",
        "version": version("deltalake"),
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
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # delta-rs's runtime threads sometimes abort the interpreter's shutdown ("terminate called without an
    # active exception"), after the result is printed: leave without finalization.
    os._exit(code)
