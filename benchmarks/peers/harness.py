"""What every commit-speed script shares: the rows, the command line, the timed loop and the JSON result.

Standard library and pyarrow only, so that it imports in every peer's virtualenv (pypaimon's pins an older
pyarrow) as well as in lakefmt's, where :mod:`benchmarks.common` takes :func:`events` from here: every side of a
comparison appends exactly the same rows. A peer script imports it as a sibling module (``import harness``: a
script's own folder is first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: The events of the data-path benchmarks: about 5 columns of the usual kinds.
EVENTS_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("user", pa.string()),
                           ("amount", pa.float64()), ("dt", pa.string())])
DAYS = 10  # distinct dt values in a commit-speed run; each commit's rows fall in 1 or 2 of them
EPOCH_US = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z
DAY_US = 86_400_000_000


def day_name(i: int) -> str:
    """``2026-11-01`` for 0, then one day per step (ISO dates, so they sort like the days)."""
    return (datetime.date(2026, 11, 1) + datetime.timedelta(days=i)).isoformat()


def events(n: int, *, seed: int = 1, days: int = DAYS, users: int = 10_000, first_id: int = 0) -> pa.Table:
    """``n`` event rows (id, ts, user, amount, dt), deterministic, built with pyarrow compute only.

    ids ascend from ``first_id``, ts ascends with id over ``days`` days, ``dt`` is ts's day, users are drawn
    from a pool of ``users``."""
    ids = pa.array(range(first_id, first_id + n), pa.int64())
    step = max(1, (days * DAY_US) // max(n, 1))
    ts_us = pc.add(pc.multiply(pc.subtract(ids, first_id), step), EPOCH_US)
    day_idx = pc.cast(pc.divide(pc.subtract(ts_us, EPOCH_US), DAY_US), pa.int64())
    day_pool = pa.array([day_name(i) for i in range(days + 1)])
    user_pool = pa.array([f"user-{i:06d}" for i in range(users)])
    user_idx = pc.cast(pc.floor(pc.multiply(pc.random(n, initializer=seed), users)), pa.int64())
    amount = pc.round(pc.multiply(pc.random(n, initializer=seed + 1), 1000.0), 2)
    return pa.table([ids, pc.cast(ts_us, pa.timestamp("us")), user_pool.take(user_idx), amount,
                     day_pool.take(day_idx)], schema=EVENTS_SCHEMA)


def tree_size(path: str | os.PathLike[str], *, skip_suffix: str | None = None) -> tuple[int, int]:
    """(bytes, files) under ``path``, leaving out files whose name ends with ``skip_suffix``."""
    total = files = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            if skip_suffix is None or not name.endswith(skip_suffix):
                total += os.lstat(os.path.join(folder, name)).st_size
                files += 1
    return total, files


def parse_args(peer: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line every peer script takes."""
    ap = argparse.ArgumentParser(description=f"Time N append commits of R rows to a new {peer} table.")
    ap.add_argument("--root", required=True, help="the folder to create the table (or warehouse) in")
    ap.add_argument("--commits", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--partitioned", type=int, choices=(0, 1), required=True)
    ap.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds of commits")
    return ap.parse_args(argv)


def time_slices(append: Callable[[pa.Table], Any], data: pa.Table, rows: int,
                time_budget: float | None = None) -> list[float]:
    """Call ``append`` with consecutive slices of ``rows`` rows of ``data``, until the data or the time budget
    is spent; the seconds each call took. Every side of a commit-speed comparison is timed by this loop."""
    commit_s: list[float] = []
    t_start = time.perf_counter()
    for i in range(data.num_rows // rows):
        batch = data.slice(i * rows, rows)
        t0 = time.perf_counter()
        append(batch)
        commit_s.append(time.perf_counter() - t0)
        if time_budget is not None and time.perf_counter() - t_start > time_budget:
            break
    return commit_s


def time_appends(append: Callable[[pa.Table], Any], args: argparse.Namespace) -> list[float]:
    """:func:`time_slices` over ``args.commits`` appends of ``args.rows`` event rows, within ``args.time_budget``."""
    return time_slices(append, events(args.commits * args.rows), args.rows, args.time_budget)


def report(peer: str, version: str, args: argparse.Namespace, commit_s: list[float], *, rows_read: int,
           metadata: tuple[int, int], notes: list[str], **extra: Any) -> int:
    """Print the result as the last line of stdout (one JSON object) and return the exit code: 1 when the
    table did not read back every row appended."""
    done = len(commit_s)
    if done < args.commits:
        notes.append(f"stopped on the time budget ({args.time_budget:g} s) after {done} of {args.commits} commits")
    print(json.dumps({
        "peer": peer,
        "version": version,
        "pyarrow": pa.__version__,
        "commits_done": done,
        "commits_requested": args.commits,
        "rows": args.rows,
        "rows_read": rows_read,
        "partitioned": bool(args.partitioned),
        "commit_s": commit_s,
        "total_s": sum(commit_s),
        "metadata_bytes": metadata[0],
        "metadata_files": metadata[1],
        **extra,
        "notes": notes,
    }), flush=True)
    if rows_read != done * args.rows:
        print(f"read back {rows_read} rows, expected {done * args.rows}", file=sys.stderr)
        return 1
    return 0
