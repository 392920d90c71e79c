"""I/O overhead: what lakefmt adds on top of pyarrow when writing and reading the same data on the same disk.

Write: ``Table.append`` of 10M rows (2M in quick mode) of (int64 id, timestamp ts, string user, double amount,
string dt) to an unpartitioned local table, against ``pyarrow.parquet.write_table`` of the same in-memory
table into the same filesystem with the same codec (zstd) and row-group size. lakefmt fsyncs data files by
default (``write.fsync``), which a plain ``write_table`` does not: the append is measured with the default and
with ``write.fsync=false``, and the baseline also with an fsync of its file, so the cost of durability is
visible separately from the cost of the code.

Read: ``Table.scan().to_arrow()`` against ``pyarrow.dataset.dataset(<the same files>).to_table()``.

Each write side runs 7 times (3 in quick mode), each read side 21 (9), interleaved with the others (rotating
the order); the best wall time of each is compared. Process CPU times (all threads) are reported too.

Durability: how long an append waits for the fsync of its data file after closing it, with the background
sync-ahead (the ``write.sync-ahead-bytes`` table option, 16 MiB by default) and with it off (``0``), on the same
data.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, drop_tree, events, interleaved
from lakefmt.io import LocalFileIO
from lakefmt.meta.store import MetaStore

NAME = "io_overhead"
TARGET_RATIO = 1.10
REPS = 7  # best of 7 in the full mode (3 in quick): the same 1.5 s write took 1.4 to 2.4 s of CPU here
ROW_GROUP_ROWS = 1 << 20  # lakefmt's default write.row-group-rows, pinned on both sides
COMPRESSION = "zstd"


def _row_groups(paths: list[str]) -> dict[str, Any]:
    sizes = []
    total = 0
    for p in paths:
        md = pq.ParquetFile(p).metadata
        sizes += [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        total += os.path.getsize(p)
    return {"files": len(paths), "row_groups": len(sizes), "max_rows_per_group": max(sizes), "bytes": total}


class _TimedSyncIO(LocalFileIO):
    """Local disk that adds up the time the writing thread waits in ``sync`` for data files."""

    waited = 0.0

    def sync(self, rel: str) -> None:
        start = time.perf_counter()
        super().sync(rel)
        if rel.endswith(".parquet") and threading.current_thread() is threading.main_thread():
            _TimedSyncIO.waited += time.perf_counter() - start


def _fsync_wait(base: Path, data: Any, options: dict[str, str], reps: int) -> dict[str, float]:
    """Median seconds an append waits for the fsync at close, with sync-ahead on (the default) and off."""
    sync_ahead = {"sync_ahead": {}, "sync_at_close_only": {"write.sync-ahead-bytes": "0"}}
    waits: dict[str, list[float]] = {key: [] for key in sync_ahead}
    try:
        for _ in range(reps):
            for key in waits:
                drop_tree(base / "fsync-wait")
                lakefmt.create_table(str(base / "fsync-wait"), EVENTS_SCHEMA, options={**options, **sync_ahead[key]})
                io = _TimedSyncIO(str(base / "fsync-wait"))
                _TimedSyncIO.waited = 0.0
                lakefmt.Table(io, MetaStore(io)).append(data)
                waits[key].append(_TimedSyncIO.waited)
    finally:
        drop_tree(base / "fsync-wait")
    return {k: statistics.median(v) for k, v in waits.items()}


def run(quick: bool, workdir: Path) -> Result:
    rows = 2_000_000 if quick else 10_000_000
    reps = 3 if quick else REPS
    result = Result(NAME, "quick" if quick else "full", {
        "rows": rows, "columns": EVENTS_SCHEMA.names, "compression": COMPRESSION,
        "row_group_rows": ROW_GROUP_ROWS, "partitioned": False, "reps": reps, "read_reps": 3 * reps,
        "statistic": "best of reps",
    })
    base = workdir / NAME
    base.mkdir(parents=True, exist_ok=True)
    data = events(rows)
    options = {"file.compression": COMPRESSION, "write.row-group-rows": str(ROW_GROUP_ROWS)}
    tables: dict[str, lakefmt.Table] = {}

    def lakefmt_append(fsync: bool) -> Any:
        def side(rep: int) -> None:
            key = f"lakefmt-fsync-{str(fsync).lower()}"
            drop_tree(base / key)
            t = lakefmt.create_table(str(base / key), EVENTS_SCHEMA,
                                     options={**options, "write.fsync": str(fsync).lower()})
            t.append(data)
            tables[key] = t
        return side

    def raw_write(fsync: bool) -> Any:
        def side(rep: int) -> None:
            folder = base / f"raw-fsync-{str(fsync).lower()}"
            drop_tree(folder)
            folder.mkdir()
            path = folder / "data.parquet"
            pq.write_table(data, str(path), compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS)
            if fsync:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return side

    write = interleaved({
        "lakefmt_append_fsync": lakefmt_append(True),
        "lakefmt_append_nofsync": lakefmt_append(False),
        "pyarrow_write_table": raw_write(False),
        "pyarrow_write_table_fsync": raw_write(True),
    }, reps)

    table = tables["lakefmt-fsync-true"]
    files = [f.full_path for f in table.files()]
    layout = {
        "lakefmt": _row_groups(files),
        "pyarrow": _row_groups([str(base / "raw-fsync-false" / "data.parquet")]),
    }
    got: dict[str, int] = {}

    def lakefmt_read(rep: int) -> None:
        got["lakefmt"] = table.scan().to_arrow().num_rows

    def raw_read(rep: int) -> None:
        got["pyarrow"] = ds.dataset(files, format="parquet").to_table().num_rows

    # a read takes a third of a second, on both cores: more repetitions for the same confidence
    read = interleaved({"lakefmt_scan_to_arrow": lakefmt_read, "pyarrow_dataset_to_table": raw_read}, 3 * reps)
    if got["lakefmt"] != rows or got["pyarrow"] != rows:
        raise RuntimeError(f"read back {got}, expected {rows} rows each")

    runs = {**write, **read}
    fsync_wait = _fsync_wait(base, data, options, reps)
    best = {k: min(v["wall"]) for k, v in runs.items()}
    cpu = {k: min(v["cpu"]) for k, v in runs.items()}
    raw = best["pyarrow_write_table"]
    result.comparisons += [
        Comparison("append, default (fsync) vs write_table", best["lakefmt_append_fsync"], raw, "s",
                   best["lakefmt_append_fsync"] / raw, TARGET_RATIO, "ratio<="),
        Comparison("append, write.fsync=false vs write_table", best["lakefmt_append_nofsync"], raw, "s",
                   best["lakefmt_append_nofsync"] / raw, TARGET_RATIO, "ratio<="),
        Comparison("append, default (fsync) vs write_table+fsync", best["lakefmt_append_fsync"],
                   best["pyarrow_write_table_fsync"], "s",
                   best["lakefmt_append_fsync"] / best["pyarrow_write_table_fsync"]),
        Comparison("append CPU time, write.fsync=false vs write_table", cpu["lakefmt_append_nofsync"],
                   cpu["pyarrow_write_table"], "s", cpu["lakefmt_append_nofsync"] / cpu["pyarrow_write_table"]),
        Comparison("scan().to_arrow() vs dataset().to_table()", best["lakefmt_scan_to_arrow"],
                   best["pyarrow_dataset_to_table"], "s",
                   best["lakefmt_scan_to_arrow"] / best["pyarrow_dataset_to_table"], TARGET_RATIO, "ratio<="),
        Comparison("scan CPU time vs dataset CPU time", cpu["lakefmt_scan_to_arrow"],
                   cpu["pyarrow_dataset_to_table"], "s",
                   cpu["lakefmt_scan_to_arrow"] / cpu["pyarrow_dataset_to_table"]),
    ]
    result.metrics = {
        "best_wall_s": best,
        "best_cpu_s": cpu,
        "runs": runs,
        "rows_per_s": {k: rows / v for k, v in best.items()},
        "in_memory_bytes": data.nbytes,
        "file_layout": layout,
        "fsync_wait_at_close_s": fsync_wait,
    }
    result.notes.append(
        "The fsync comparison against a plain write_table is the user-visible cost of lakefmt's default; "
        "the write.fsync=false one is the cost of lakefmt's code (statistics, manifest, commit)."
    )
    result.notes.append(
        f"fsync wait at close (median of {reps} appends): {fsync_wait['sync_ahead'] * 1000:.1f} ms with sync-ahead, "
        f"{fsync_wait['sync_at_close_only'] * 1000:.1f} ms without."
    )
    drop_tree(base)
    return result
