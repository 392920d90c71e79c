"""delta-rs's own optimize benchmark (``python/tests/test_benchmark.py::test_benchmark_optimize`` in delta-io/delta-rs),
run with deltalake's Python binding on rows given as a Parquet file.

Runs inside the deltalake virtualenv made by ``tools/bench-setup.sh`` (stdlib, pyarrow and deltalake only; it must
not import lakefmt or the benchmarks package):

    python delta_optimize.py --root DIR --source FILE --parts 5 --files 10 --tasks 1 5 --reps 3

As in delta-rs's benchmark: a table partitioned by ``part`` (``a``, ``b``, ...) gets ``--files`` appends of the
source rows per partition (``write_deltalake(..., mode="append", partition_by=["part"])``), then
``DeltaTable.optimize.compact(max_concurrent_tasks=N, target_size=1 GiB)`` rewrites each partition's files into
one. Between runs the optimize's log entry is removed and the table reloaded (delta-rs's own setup step), and the
files it wrote are deleted, outside the timing. Prints one JSON line last: the seconds of every run per task
count, the files removed and added, and the codec of the files optimize wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib.metadata import version

import pyarrow as pa
import pyarrow.parquet as pq

TARGET_SIZE = 1024 * 1024 * 1024


def _data_files(root: str) -> set[str]:
    out = set()
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        out.update(os.path.join(folder, n) for n in names if n.endswith(".parquet"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--source", required=True, help="a Parquet file of the rows each append writes")
    ap.add_argument("--parts", type=int, default=5)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--tasks", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from deltalake import DeltaTable, write_deltalake

    os.makedirs(args.root, exist_ok=False)
    rows = pq.read_table(args.source)
    t0 = time.perf_counter()
    for p in range(args.parts):
        part = chr(ord("a") + p)
        tab = rows.append_column("part", pa.array([part] * rows.num_rows))
        for _ in range(args.files):
            write_deltalake(args.root, tab, mode="append", partition_by=["part"])
    setup_s = time.perf_counter() - t0
    dt = DeltaTable(args.root)
    initial = dt.version()
    before = _data_files(args.root)
    if len(before) != args.parts * args.files:
        print(f"expected {args.parts * args.files} data files, found {len(before)}", file=sys.stderr)
        return 1
    input_bytes = sum(os.path.getsize(f) for f in before)
    seconds: dict[str, list[float]] = {str(n): [] for n in args.tasks}
    metrics: dict[str, object] = {}
    codec = None
    for rep in range(args.reps):
        for n in args.tasks if rep % 2 == 0 else list(reversed(args.tasks)):
            dt = DeltaTable(args.root)  # reloaded, as in delta-rs's setup
            if dt.version() != initial:
                print(f"table at version {dt.version()}, expected {initial}", file=sys.stderr)
                return 1
            t0 = time.perf_counter()
            result = dt.optimize.compact(max_concurrent_tasks=n, target_size=TARGET_SIZE)
            seconds[str(n)].append(time.perf_counter() - t0)
            if result["numFilesRemoved"] != args.parts * args.files or result["numFilesAdded"] != args.parts:
                print(f"optimize removed/added {result['numFilesRemoved']}/{result['numFilesAdded']}", file=sys.stderr)
                return 1
            metrics = {k: result[k] for k in ("numFilesRemoved", "numFilesAdded", "partitionsOptimized")}
            new = sorted(_data_files(args.root) - before)
            if codec is None and new:
                codec = pq.ParquetFile(new[0]).metadata.row_group(0).column(0).compression
                metrics["output_bytes"] = sum(os.path.getsize(f) for f in new)
            os.remove(os.path.join(args.root, "_delta_log", f"{initial + 1:020}.json"))
            for f in new:
                os.remove(f)
    out = {
        "peer": "deltalake",
        "version": version("deltalake"),
        "pyarrow": pa.__version__,
        "seconds": seconds,
        "setup_s": setup_s,
        "input_files": len(before),
        "input_bytes": input_bytes,
        "rows": rows.num_rows * args.parts * args.files,
        "codec": codec,
        "target_size": TARGET_SIZE,
        **metrics,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # delta-rs's runtime threads sometimes abort the interpreter's shutdown (see delta_commits.py)
