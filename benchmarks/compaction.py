"""Compaction against its limit: ``Table.compact`` rewriting a table of small files against pyarrow reading the
same files and writing the same rows into target-size files, on the same disk, in the same run.

The table: 4 partitions (``dt``) of 100 small files of 10,000 event rows each (4M rows; quick mode: 4 x 10 files
of 2,000), one append per file per partition, the table's defaults otherwise (zstd, 128 MiB target: every
partition's files fit one new file). lakefmt plans on the manifests, reads each partition's files through
:func:`lakefmt.read.files.read_entries`, writes one file per partition through the table's writer (statistics,
a per-task manifest) and commits one COMPACT snapshot. The baseline knows the files beforehand and does only the
rewrite: ``pyarrow.dataset`` over a partition's files, ``to_table()``, ``pq.write_table`` with the same codec
and row-group size, one output file per partition; pyarrow's default encodings (every column dictionary-encoded
first), and once more with the column encodings lakefmt's writer picks (:mod:`lakefmt.write.encoding`), so that
the comparison isolates what lakefmt adds.

lakefmt fsyncs what it writes by default (``write.fsync``); a plain ``write_table`` does not: the compaction is
measured with the default and with ``write.fsync=false``, and the baseline with and without an fsync per file.
Each side runs 5 times (2 in quick mode), in rotating order, on a fresh copy of the table made outside the
timing; the best wall time of each side is compared (and the best CPU time, less sensitive to other processes).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, day_name, drop_tree, events
from lakefmt.write.encoding import dictionary_columns

NAME = "compaction"
TARGET_RATIO = 1.2
REPS = 5
COMPRESSION = "zstd"
ROW_GROUP_ROWS = 1 << 20
PARTITIONS = 4


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(quick: bool, workdir: Path) -> Result:
    files, rows_per_file = (10, 2_000) if quick else (100, 10_000)
    reps = 2 if quick else REPS
    result = Result(NAME, "quick" if quick else "full", {
        "partitions": PARTITIONS, "files_per_partition": files, "rows_per_file": rows_per_file,
        "rows": PARTITIONS * files * rows_per_file, "columns": EVENTS_SCHEMA.names, "compression": COMPRESSION,
        "row_group_rows": ROW_GROUP_ROWS, "reps": reps, "statistic": "best of reps",
    })
    base = workdir / NAME
    drop_tree(base)
    base.mkdir(parents=True)
    options = {"file.compression": COMPRESSION, "write.row-group-rows": str(ROW_GROUP_ROWS), "compaction.auto": "false"}
    masters = {fsync: base / f"master-fsync-{str(fsync).lower()}" for fsync in (True, False)}
    tables = {
        fsync: lakefmt.create_table(
            str(folder), EVENTS_SCHEMA, partition_by=["dt"], options={**options, "write.fsync": str(fsync).lower()}
        )
        for fsync, folder in masters.items()
    }
    days = [day_name(d) for d in range(PARTITIONS)]
    for k in range(files):
        for d, day in enumerate(days):
            data = events(rows_per_file, first_id=(k * PARTITIONS + d) * rows_per_file, seed=k * PARTITIONS + d + 1)
            data = data.set_column(data.schema.get_field_index("dt"), "dt", [[day] * rows_per_file])
            for table in tables.values():
                table.append(data)
    by_part: dict[str, list[str]] = {}
    for f in tables[True].files():
        by_part.setdefault(f.partition["dt"], []).append(f.path)
    in_bytes = sum(f.file_size for f in tables[True].files())
    rows = PARTITIONS * files * rows_per_file
    written: dict[str, tuple[int, int]] = {}

    def lakefmt_compact(folder: Path, name: str) -> None:
        report = lakefmt.open_table(str(folder)).compact()
        assert report.snapshot is not None and report.rows == rows
        written[name] = (report.written_files, report.written_bytes)

    def pyarrow_rewrite(folder: Path, name: str, fsync: bool, same_encoding: bool = False) -> None:
        n = size = 0
        for day, paths in by_part.items():
            data = ds.dataset([str(folder / p) for p in paths], format="parquet").to_table()
            out = str(folder / f"dt={day}" / "rewritten.parquet")
            dictionary = dictionary_columns(data.schema, data) if same_encoding else True
            pq.write_table(
                data, out, compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS, use_dictionary=dictionary
            )
            if fsync:
                _fsync(out)
            n += 1
            size += os.path.getsize(out)
        written[name] = (n, size)

    sides: dict[str, Any] = {
        "lakefmt_compact_fsync": lambda folder: lakefmt_compact(folder, "lakefmt_compact_fsync"),
        "lakefmt_compact_nofsync": lambda folder: lakefmt_compact(folder, "lakefmt_compact_nofsync"),
        "pyarrow_rewrite": lambda folder: pyarrow_rewrite(folder, "pyarrow_rewrite", False),
        "pyarrow_rewrite_fsync": lambda folder: pyarrow_rewrite(folder, "pyarrow_rewrite_fsync", True),
        "pyarrow_rewrite_same_encoding": lambda folder: pyarrow_rewrite(
            folder, "pyarrow_rewrite_same_encoding", False, same_encoding=True
        ),
    }
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    names = list(sides)
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            folder = base / name
            drop_tree(folder)
            shutil.copytree(masters[name != "lakefmt_compact_nofsync"], folder)
            c0, t0 = time.process_time(), time.perf_counter()
            sides[name](folder)
            t1, c1 = time.perf_counter(), time.process_time()
            walls.setdefault(name, []).append(t1 - t0)
            cpus.setdefault(name, []).append(c1 - c0)
            drop_tree(folder)
    best = {k: min(v) for k, v in walls.items()}
    cpu = {k: min(v) for k, v in cpus.items()}
    raw, raw_sync = best["pyarrow_rewrite"], best["pyarrow_rewrite_fsync"]
    mb = in_bytes / 1e6
    result.comparisons += [
        Comparison(f"compact {PARTITIONS * files} small files ({mb:.0f} MB), default (fsync) vs pyarrow rewrite",
                   best["lakefmt_compact_fsync"], raw, "s", best["lakefmt_compact_fsync"] / raw, TARGET_RATIO,
                   "ratio<="),
        Comparison("compact, write.fsync=false vs pyarrow rewrite", best["lakefmt_compact_nofsync"], raw, "s",
                   best["lakefmt_compact_nofsync"] / raw, TARGET_RATIO, "ratio<="),
        Comparison("compact, default (fsync) vs pyarrow rewrite + fsync", best["lakefmt_compact_fsync"], raw_sync,
                   "s", best["lakefmt_compact_fsync"] / raw_sync),
        Comparison("compact CPU time, write.fsync=false vs pyarrow rewrite", cpu["lakefmt_compact_nofsync"],
                   cpu["pyarrow_rewrite"], "s", cpu["lakefmt_compact_nofsync"] / cpu["pyarrow_rewrite"]),
        Comparison("compact, write.fsync=false vs pyarrow rewrite with lakefmt's column encodings",
                   best["lakefmt_compact_nofsync"], best["pyarrow_rewrite_same_encoding"], "s",
                   best["lakefmt_compact_nofsync"] / best["pyarrow_rewrite_same_encoding"]),
    ]
    result.metrics = {
        "input_bytes": in_bytes,
        "input_files": PARTITIONS * files,
        "written": {k: {"files": v[0], "bytes": v[1]} for k, v in written.items()},
        "throughput_mb_s": {k: round(mb / v, 1) for k, v in best.items()},
        "best_wall_s": best,
        "best_cpu_s": cpu,
        "runs": {k: {"wall": walls[k], "cpu": cpus[k]} for k in walls},
    }
    result.notes += [
        "the baseline knows the files and their partitions beforehand; lakefmt plans them from the manifests",
        "lakefmt also computes column statistics, writes a manifest, a manifest list and a snapshot",
    ]
    drop_tree(base)
    return result
