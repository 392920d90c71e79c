"""Row-level delete against its limit: ``Table.delete`` of 1% of a table's rows, spread over 10% of its files,
against pyarrow rewriting exactly those files (read each, filter, write it again) on the same disk.

The table: 100 files of 100,000 event rows each (20 of 20,000 in quick mode), unpartitioned, one append per file,
so ``id`` ranges are disjoint and min/max tell the files apart. The delete is a bad-batch cleanup: the rows of
10% of the appends (their ``id`` ranges) whose ``amount`` is under 100, a tenth of those files' rows spread
through them, 1% of the table's. lakefmt plans on the manifests (min/max rule out the other 90% of the files),
reads the matching files' filter columns to count matches, rewrites them without the matching rows and commits
one OVERWRITE snapshot. The baseline knows
the files beforehand and does only the rewrite: ``pq.read_table``, ``Table.filter``, ``pq.write_table`` with the
same codec (zstd) and row-group size, one output file per input file.

lakefmt fsyncs the files it writes by default (``write.fsync``); a plain ``write_table`` does not: the delete is
measured with the default and with ``write.fsync=false``, and the baseline with and without an fsync per file.
Each side runs 7 times (2 in quick mode), in rotating order, on a fresh copy of the table made outside the
timing (its data files hard-linked); the best wall time of each side is compared.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, drop_tree, events
from lakefmt.spec.sql.predicate import any_of

NAME = "delete_rows"
TARGET_RATIO = 1.3
REPS = 7
COMPRESSION = "zstd"
ROW_GROUP_ROWS = 1 << 20
CUTOFF = 100.0  # amount is uniform in [0, 1000): a tenth of a file's rows


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(quick: bool, workdir: Path) -> Result:
    files, rows_per_file = (20, 20_000) if quick else (100, 100_000)
    reps = 2 if quick else REPS
    chosen = list(range(0, files, 10))  # 10% of the files, spread over the table
    # bad-batch cleanup: the rows of 10% of the appends (their id ranges) whose amount is under CUTOFF
    batches = [(pc.field("id") >= k * rows_per_file) & (pc.field("id") < (k + 1) * rows_per_file) for k in chosen]
    flt = (pc.field("amount") < CUTOFF) & any_of(batches)
    result = Result(NAME, "quick" if quick else "full", {
        "files": files, "rows_per_file": rows_per_file, "rows": files * rows_per_file,
        "files_with_matches": len(chosen), "columns": EVENTS_SCHEMA.names,
        "compression": COMPRESSION, "row_group_rows": ROW_GROUP_ROWS, "reps": reps, "statistic": "best of reps",
        "filter": f"amount < {CUTOFF} AND (id in the range of one of {len(chosen)} appends)",
    })
    base = workdir / NAME
    drop_tree(base)
    base.mkdir(parents=True)
    options = {"file.compression": COMPRESSION, "write.row-group-rows": str(ROW_GROUP_ROWS), "compaction.auto": "false"}
    masters = {fsync: base / f"master-fsync-{str(fsync).lower()}" for fsync in (True, False)}
    tables = {
        fsync: lakefmt.create_table(str(folder), EVENTS_SCHEMA, options={**options, "write.fsync": str(fsync).lower()})
        for fsync, folder in masters.items()
    }
    for k in range(files):
        data = events(rows_per_file, first_id=k * rows_per_file, seed=k + 1)
        for table in tables.values():
            table.append(data)
    master = masters[True]
    targets = tables[True].files()
    hit = [f.path for f in targets if pq.read_table(f.full_path, filters=flt).num_rows]
    expected = sum(pq.read_table(master / rel, filters=flt).num_rows for rel in hit)
    if len(hit) != len(chosen) or not 0.009 <= expected / (files * rows_per_file) <= 0.011:
        raise RuntimeError(f"expected 1% of the rows in {len(chosen)} files, found {expected} rows in {len(hit)}")
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    deleted: dict[str, int] = {}

    def copy(name: str) -> Path:
        dst = base / name
        drop_tree(dst)
        shutil.copytree(masters[name != "lakefmt_delete_nofsync"], dst, copy_function=_link_data)
        return dst

    def lakefmt_delete(fsync: bool) -> Any:
        def side(folder: Path) -> None:
            table = lakefmt.open_table(str(folder))
            snap = table.delete(flt)
            assert snap is not None
            deleted[f"lakefmt-{fsync}"] = -snap.delta_record_count
        return side

    def pyarrow_rewrite(fsync: bool) -> Any:
        def side(folder: Path) -> None:
            n = 0
            for rel in hit:
                src = str(folder / rel)
                data = pq.read_table(src)
                kept = data.filter(~flt)
                n += data.num_rows - kept.num_rows
                out = str(folder / (rel + ".rewritten.parquet"))
                pq.write_table(kept, out, compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS)
                if fsync:
                    _fsync(out)
            deleted[f"pyarrow-{fsync}"] = n
        return side

    sides = {
        "lakefmt_delete_fsync": lakefmt_delete(True),
        "lakefmt_delete_nofsync": lakefmt_delete(False),
        "pyarrow_rewrite": pyarrow_rewrite(False),
        "pyarrow_rewrite_fsync": pyarrow_rewrite(True),
    }
    names = list(sides)
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            folder = copy(name)
            c0, t0 = time.process_time(), time.perf_counter()
            sides[name](folder)
            t1, c1 = time.perf_counter(), time.process_time()
            walls.setdefault(name, []).append(t1 - t0)
            cpus.setdefault(name, []).append(c1 - c0)
            drop_tree(folder)
    if set(deleted.values()) != {expected}:
        raise RuntimeError(f"sides deleted {deleted} rows, expected {expected} each")
    best = {k: min(v) for k, v in walls.items()}
    cpu = {k: min(v) for k, v in cpus.items()}
    raw, raw_sync = best["pyarrow_rewrite"], best["pyarrow_rewrite_fsync"]
    result.comparisons += [
        Comparison("delete 1% of rows in 10% of files, default (fsync) vs pyarrow rewrite",
                   best["lakefmt_delete_fsync"], raw, "s", best["lakefmt_delete_fsync"] / raw, TARGET_RATIO, "ratio<="),
        Comparison("delete, write.fsync=false vs pyarrow rewrite", best["lakefmt_delete_nofsync"], raw, "s",
                   best["lakefmt_delete_nofsync"] / raw, TARGET_RATIO, "ratio<="),
        Comparison("delete, default (fsync) vs pyarrow rewrite + fsync", best["lakefmt_delete_fsync"], raw_sync, "s",
                   best["lakefmt_delete_fsync"] / raw_sync),
        Comparison("delete CPU time, write.fsync=false vs pyarrow rewrite", cpu["lakefmt_delete_nofsync"],
                   cpu["pyarrow_rewrite"], "s", cpu["lakefmt_delete_nofsync"] / cpu["pyarrow_rewrite"]),
    ]
    result.metrics = {
        "best_wall_s": best,
        "best_cpu_s": cpu,
        "runs": {k: {"wall": walls[k], "cpu": cpus[k]} for k in walls},
        "rows_deleted": expected,
        "bytes_rewritten": sum(os.path.getsize(master / rel) for rel in hit),
    }
    result.notes.append(
        "lakefmt's side includes what the baseline is handed: finding the files (planning on the manifests, then "
        "reading the id column of the candidates to count matches) and the commit."
    )
    drop_tree(base)
    return result


def _link_data(src: str, dst: str) -> None:
    """Data files are immutable: hard-link them (a copy then costs no data I/O, and every side reads the same
    cached pages); copy the metadata, which a commit may rewrite in place (the LATEST hint)."""
    if src.endswith(".parquet"):
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)
