"""Commit speed of pyiceberg (Apache Iceberg's Python API): N append commits of R rows to a new local table.

Runs inside the pyiceberg virtualenv made by ``tools/bench-setup.sh`` (stdlib + pyiceberg + pyarrow only; it must
not import lakefmt or the benchmarks package):

    python iceberg_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

A ``SqlCatalog`` on the sqlite file ``DIR/catalog.db`` with the local warehouse ``DIR/warehouse`` holds the
table ``bench.events`` (``DIR/warehouse/bench/events``), created from the Arrow schema (format version 2,
default properties: fast appends, no manifest merging, old metadata.json files kept) and, when asked, given the
partition spec ``identity(dt)`` before the first append. One append = one ``table.append(batch)`` (write + a
snapshot commit through the catalog), timed whole. Stops early past ``--time-budget``: every pyiceberg append
writes a new metadata.json holding the whole snapshot history and a manifest list naming every manifest so far,
so its appends slow down as the table grows. Prints one JSON line last.

Metadata bytes: every file under the table's ``metadata/`` folder (``*.metadata.json`` versions, ``snap-*.avro``
manifest lists, ``*-m*.avro`` manifests); data files are under ``data/``. The sqlite catalog file is outside the
table and reported apart (``catalog_bytes``).
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
    ap = argparse.ArgumentParser(description="Time N append commits of R rows to a new Iceberg table.")
    ap.add_argument("--root", required=True)
    ap.add_argument("--commits", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--partitioned", type=int, choices=(0, 1), required=True)
    ap.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds of commits")
    args = ap.parse_args()

    from pyiceberg.catalog.sql import SqlCatalog

    root = os.path.abspath(args.root)
    os.makedirs(os.path.join(root, "warehouse"), exist_ok=False)
    catalog_db = os.path.join(root, "catalog.db")
    catalog = SqlCatalog("bench", uri=f"sqlite:///{catalog_db}", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.events", schema=SCHEMA)
    if args.partitioned:
        with table.update_spec() as spec:
            spec.add_identity("dt")
    data = events(args.commits * args.rows)

    commit_s: list[float] = []
    t_start = time.perf_counter()
    for i in range(args.commits):
        batch = data.slice(i * args.rows, args.rows)
        t0 = time.perf_counter()
        table.append(batch)
        commit_s.append(time.perf_counter() - t0)
        if args.time_budget is not None and time.perf_counter() - t_start > args.time_budget:
            break
    done = len(commit_s)

    reloaded = catalog.load_table("bench.events")
    rows_read = reloaded.scan().to_arrow().num_rows
    table_dir = reloaded.location().removeprefix("file://")
    meta_bytes, meta_files = tree_size(os.path.join(table_dir, "metadata"))
    notes = [
        "one table.append(batch) per append on one Table object; SqlCatalog on sqlite, local warehouse",
        f"format version {reloaded.format_version}, default properties (fast append, no manifest merge, "
        "every metadata.json kept)",
        "metadata = every file under the table's metadata/ folder (metadata.json versions, manifest lists, "
        "manifests); the sqlite catalog (catalog_bytes) is not counted in it",
        "pyiceberg's local FileIO (pyarrow) issues no fsync for data or metadata files; the commit is a sqlite "
        "transaction on the catalog (sqlite fdatasyncs its journal and database file)",
    ]
    if args.partitioned:
        notes.append("partition spec identity(dt) set by update_spec() before the first append (one extra "
                     "metadata.json, not timed)")
    if done < args.commits:
        notes.append(f"stopped on the time budget ({args.time_budget:g} s) after {done} of {args.commits} commits")
    print(json.dumps({
        "peer": "pyiceberg",
        "version": version("pyiceberg"),
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
        "catalog_bytes": os.path.getsize(catalog_db),
        "notes": notes,
    }))
    if rows_read != done * args.rows:
        print(f"read back {rows_read} rows, expected {done * args.rows}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
