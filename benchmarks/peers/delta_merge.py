"""Upserts by key in lakefmt's peers: deltalake's ``merge(...).when_matched_update_all().when_not_matched_insert_all()``
and pyiceberg's ``Table.upsert``, on rows given as Parquet files.

Runs inside the deltalake/pyiceberg virtualenv made by ``tools/bench-setup.sh`` (stdlib, pyarrow, deltalake and
pyiceberg only; it must not import lakefmt or the benchmarks package). One action per process, so that a merge's
peak memory is its own:

    python delta_merge.py build --root DIR --source FILE          # write_deltalake of the source rows, one commit
    python delta_merge.py merge --root DIR --updates FILE         # open the table, merge the updates on id
    python delta_merge.py iceberg --root DIR --source FILE --updates FILE --reps N

``iceberg`` builds a fresh table (a SQLite catalog under ``DIR/<rep>``) from the source rows before each upsert,
outside the timing. Prints one JSON line last: wall and CPU seconds (CPU of the whole process, all threads), the
peak RSS of the process, and the rows the peer reports updated and inserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from importlib.metadata import version

import pyarrow as pa
import pyarrow.parquet as pq


def _reader(path: str) -> pa.RecordBatchReader:
    pf = pq.ParquetFile(path)
    return pa.RecordBatchReader.from_batches(pf.schema_arrow, pf.iter_batches(batch_size=1 << 20))


def _maxrss() -> int:
    """This process's peak RSS in bytes: VmHWM (ru_maxrss would carry the parent's peak over fork and exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build(args: argparse.Namespace) -> dict:
    from deltalake import DeltaTable, write_deltalake

    t0 = time.perf_counter()
    write_deltalake(args.root, _reader(args.source), mode="error")
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "files": len(DeltaTable(args.root).file_uris())}


def merge(args: argparse.Namespace) -> dict:
    from deltalake import DeltaTable

    updates = pq.read_table(args.updates)
    c0, t0 = time.process_time(), time.perf_counter()
    dt = DeltaTable(args.root)
    metrics = (
        dt.merge(updates, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": seconds, "cpu": cpu, "maxrss": _maxrss(), "updated": metrics.get("num_target_rows_updated"),
            "inserted": metrics.get("num_target_rows_inserted")}


def iceberg(args: argparse.Namespace) -> dict:
    from pyiceberg.catalog.sql import SqlCatalog

    base = pq.read_table(args.source)
    updates = pq.read_table(args.updates)
    seconds, cpus, out = [], [], {}
    for rep in range(args.reps):
        folder = os.path.join(args.root, str(rep))
        os.makedirs(folder)
        catalog = SqlCatalog("bench", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.t", schema=base.schema)
        table.append(base)
        c0, t0 = time.process_time(), time.perf_counter()
        res = table.upsert(updates, join_cols=["id"])
        seconds.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        out = {"updated": res.rows_updated, "inserted": res.rows_inserted}
    return {"seconds": seconds, "cpu": cpus, **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("build", "merge", "iceberg"))
    ap.add_argument("--root", required=True)
    ap.add_argument("--source")
    ap.add_argument("--updates")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    out = {"build": build, "merge": merge, "iceberg": iceberg}[args.action](args)
    peer = "pyiceberg" if args.action == "iceberg" else "deltalake"
    out.update(peer=peer, version=version(peer), pyarrow=pa.__version__)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
