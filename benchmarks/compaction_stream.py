"""A stream that lives long: 1,000 micro-batches of 1,000 rows into a table partitioned 4 ways, through
``Table.append``, with automatic compaction on (``compaction.auto=true``, every other option at its default)
and off, against the same rows written at once.

Measured in one run, on the same disk:

* the whole stream's time, compaction on against off (target: at most 1.5x);
* a full read (``Table.to_arrow()``, best of 5) of the table the stream left with compaction on, against the
  same rows written at once (target: at most 1.5x); off is reported too;
* files per partition: the most any partition held after any commit (from the snapshots' file counts: a
  bound), and at the end (target: at most ``compaction.max.file-num``, 50);
* the same reads on S3: each table is copied to a moto server on 127.0.0.1 and read through s3fs, counting
  the requests the server receives, and timed (best of 3; the table left with compaction off: once).

The two streams run side by side: each micro-batch is appended to both tables, in alternating order, and each
side's wall and CPU time is summed over its appends, so that a neighbour's load falls on both alike.

A third stream has the compaction in the table's worker thread (``compaction.async=true``): it runs alone,
timed from its first append to the end of its worker's last compaction, right after the stream with
compaction off run alone the same way (target: at most 1.5x); its read and files per partition are reported
as the others'. Quick mode: 20 micro-batches.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, day_name, drop_tree, events
from benchmarks.s3_requests import BUCKET, RequestLog, counting_moto_server

NAME = "compaction_stream"
TARGET_READ = 1.5
TARGET_STREAM = 1.5
PARTITIONS = 4
ROWS = 1000
READS = 5
S3_READS = 3
#: the third stream: automatic compaction in the table's worker thread
ASYNC_OPTIONS = {"compaction.auto": "true", "compaction.async": "true"}
#: the stream without compaction (on by default)
OFF_OPTIONS = {"compaction.auto": "false"}


def _batches(n: int) -> list[pa.Table]:
    """``n`` micro-batches of ROWS event rows, spread over PARTITIONS days."""
    days = pa.array([day_name(d) for d in range(PARTITIONS)])
    out = []
    for b in range(n):
        data = events(ROWS, first_id=b * ROWS, seed=b + 1)
        dt = days.take(pa.array([i % PARTITIONS for i in range(ROWS)], pa.int64()))
        out.append(data.set_column(data.schema.get_field_index("dt"), "dt", dt))
    return out


def _streams(base: Path, batches: list[pa.Table]) -> tuple[dict[str, lakefmt.Table], dict[str, dict[str, float]]]:
    """Both streams side by side: each micro-batch goes to the table with compaction off and to the one with it
    on, in alternating order, so that both see the same machine over the run. Wall and CPU seconds per side."""
    tables = {
        side: lakefmt.create_table(
            str(base / side), EVENTS_SCHEMA, partition_by=["dt"],
            options={"compaction.auto": "true" if side == "on" else "false"},
        )
        for side in ("on", "off")
    }
    spent = {side: {"wall": 0.0, "cpu": 0.0} for side in tables}
    for i, batch in enumerate(batches):
        for side in ("on", "off") if i % 2 == 0 else ("off", "on"):
            c0, t0 = time.process_time(), time.perf_counter()
            tables[side].append(batch)
            spent[side]["wall"] += time.perf_counter() - t0
            spent[side]["cpu"] += time.process_time() - c0
    return tables, spent


def _solo(
    base: Path, batches: list[pa.Table], name: str, options: dict[str, str]
) -> tuple[lakefmt.Table, float, float]:
    """One stream alone, start to end: every append, then (``compaction.async``) the wait for the table's
    compaction worker to finish; wall and CPU seconds (the process's CPU: the worker thread's included)."""
    table = lakefmt.create_table(str(base / name), EVENTS_SCHEMA, partition_by=["dt"], options=options)
    c0, t0 = time.process_time(), time.perf_counter()
    for batch in batches:
        table.append(batch)
    assert table.wait_for_compaction(timeout=600)
    return table, time.perf_counter() - t0, time.process_time() - c0


def _best_read(table: lakefmt.Table, reps: int, rows: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        got = table.to_arrow()
        best = min(best, time.perf_counter() - t0)
        assert got.num_rows == rows
    return best


def _per_partition(table: lakefmt.Table) -> int:
    return max(Counter(f.partition["dt"] for f in table.files()).values())


def run(quick: bool, workdir: Path) -> Result:
    n = 20 if quick else 1000
    rows = n * ROWS
    result = Result(NAME, "quick" if quick else "full", {
        "micro_batches": n, "rows_per_batch": ROWS, "partitions": PARTITIONS, "rows": rows,
        "columns": EVENTS_SCHEMA.names, "options_on": {"compaction.auto": "true"},
        "reads": READS, "s3_reads": S3_READS, "statistic": "streams: sum over the micro-batches; reads: best of",
    })
    base = workdir / NAME
    drop_tree(base)
    base.mkdir(parents=True)
    batches = _batches(n)
    tables, spent = _streams(base, batches)
    once = lakefmt.create_table(str(base / "once"), EVENTS_SCHEMA, partition_by=["dt"])
    t0 = time.perf_counter()
    once.append(pa.concat_tables(batches))
    once_write = time.perf_counter() - t0
    tables["once"] = once
    # compaction in the table's worker thread: each stream alone, so that the worker's overlap with the appends
    # is its own stream's (side by side, it would overlap the other stream's appends too)
    solo_off, solo_off_s, solo_off_cpu = _solo(base, batches, "solo-off", OFF_OPTIONS)
    tables["async"], solo_async_s, solo_async_cpu = _solo(base, batches, "async", ASYNC_OPTIONS)
    drop_tree(base / "solo-off")
    del solo_off

    reads = {name: _best_read(t, READS, rows) for name, t in tables.items()}
    files = {name: len(t.files()) for name, t in tables.items()}
    per_part = {name: _per_partition(t) for name, t in tables.items()}
    on = tables["on"]
    kinds = Counter(s.commit_kind.value for s in on.snapshots())
    peak = max(s.total_file_count for s in on.snapshots())  # live files after any commit, all partitions
    max_files = on.table_schema().table_options.compaction_max_file_num
    peak_async = max(s.total_file_count for s in tables["async"].snapshots())
    stream = {k: v["wall"] for k, v in spent.items()}
    cpu = {k: v["cpu"] for k, v in spent.items()}

    s3 = _s3_reads({k: v for k, v in tables.items() if k != "async"}, rows, 1 if quick else S3_READS)
    result.comparisons += [
        Comparison(f"full read after {n} micro-batches, compaction on vs written at once", reads["on"],
                   reads["once"], "s", reads["on"] / reads["once"], TARGET_READ, "ratio<="),
        Comparison("full read, compaction off vs written at once", reads["off"], reads["once"], "s",
                   reads["off"] / reads["once"]),
        Comparison(f"stream of {n} appends, compaction on vs off", stream["on"], stream["off"], "s",
                   stream["on"] / stream["off"], TARGET_STREAM, "ratio<="),
        Comparison("stream CPU time, compaction on vs off", cpu["on"], cpu["off"], "s", cpu["on"] / cpu["off"]),
        Comparison(f"stream of {n} appends alone, compaction.async (until its worker is done) vs compaction off",
                   solo_async_s, solo_off_s, "s", solo_async_s / solo_off_s, TARGET_STREAM, "ratio<="),
        Comparison("stream CPU time alone, compaction.async vs compaction off", solo_async_cpu, solo_off_cpu, "s",
                   solo_async_cpu / solo_off_cpu),
        Comparison("full read after the stream with compaction.async vs written at once", reads["async"],
                   reads["once"], "s", reads["async"] / reads["once"], TARGET_READ, "ratio<="),
        Comparison("files per partition at the end, compaction.async (target: compaction.max.file-num)",
                   per_part["async"], max_files, "files", per_part["async"] / max_files, 1.0, "ratio<="),
        Comparison("most live files after any commit, compaction.async (all partitions' files)", peak_async,
                   max_files, "files", peak_async / max_files),
        Comparison("files per partition at the end, compaction on (target: compaction.max.file-num)",
                   per_part["on"], max_files, "files", per_part["on"] / max_files, 1.0, "ratio<="),
        Comparison("most files per partition after any commit, compaction on (bound: all partitions' files)",
                   peak, max_files, "files", peak / max_files),
        Comparison("S3 full read, compaction on vs written at once", s3["on"]["seconds"], s3["once"]["seconds"],
                   "s", s3["on"]["seconds"] / s3["once"]["seconds"]),
        Comparison("S3 full read requests, compaction on vs written at once", s3["on"]["requests"],
                   s3["once"]["requests"], "requests", s3["on"]["requests"] / s3["once"]["requests"]),
        Comparison("S3 full read requests, compaction off vs written at once", s3["off"]["requests"],
                   s3["once"]["requests"], "requests", s3["off"]["requests"] / s3["once"]["requests"]),
    ]
    result.metrics = {
        "stream_s": spent,
        "per_append_ms": {k: round(1000 * v / n, 2) for k, v in stream.items()},
        "write_once_s": once_write,
        "solo_s": {"off": {"wall": solo_off_s, "cpu": solo_off_cpu}, "async": {"wall": solo_async_s,
                                                                           "cpu": solo_async_cpu}},
        "snapshots_async": dict(Counter(s.commit_kind.value for s in tables["async"].snapshots())),
        "read_best_s": reads,
        "live_files": files,
        "files_per_partition_end": per_part,
        "live_files_peak_on": peak,
        "snapshots_on": dict(kinds),
        "s3_read": s3,
    }
    result.notes += [
        "Table.append per micro-batch (a one-off commit each); automatic compaction runs in the appending thread "
        "right after a commit lands, so its cost is inside the stream's time",
        "live_files_peak_on is the most live files of all 4 partitions together after any commit",
        "compaction.async: the stream run alone (and compaction off alone beside it, right before), timed from "
        "the first append to the end of the compaction worker's last job; CPU is the process's, the worker's "
        "thread included",
        "S3: the tables are uploaded to moto (127.0.0.1) after the local measurements; the requests are those the "
        "server received for one full read of the latest snapshot through a freshly opened table",
    ]
    drop_tree(base)
    return result


def _s3_reads(tables: dict[str, lakefmt.Table], rows: int, reads: int) -> dict[str, dict[str, Any]]:
    """Each table copied to a moto S3 server and read there: requests of the first read, best time of ``reads``."""
    import s3fs

    log = RequestLog()
    out: dict[str, dict[str, Any]] = {}
    with counting_moto_server(log) as options:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
        for name, table in tables.items():
            root = table.uri.rstrip("/")
            for folder, _dirs, names in os.walk(root):
                for fname in names:
                    local = os.path.join(folder, fname)
                    fs.put_file(local, f"{BUCKET}/{name}/{os.path.relpath(local, root)}")
            uri = f"s3://{BUCKET}/{name}"
            best = float("inf")
            counted: list[tuple[str, str]] = []
            for rep in range(1 if name == "off" else reads):  # thousands of GETs a read: once is enough
                with log.window() as requests:
                    t0 = time.perf_counter()
                    got = lakefmt.open_table(uri, storage_options=options).to_arrow()
                    best = min(best, time.perf_counter() - t0)
                assert got.num_rows == rows
                if rep == 0:
                    counted = list(requests)
            out[name] = {
                "seconds": best,
                "requests": len(counted),
                "by_kind": dict(Counter(kind for _m, kind in counted)),
            }
    return out
