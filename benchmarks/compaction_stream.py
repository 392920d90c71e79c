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
  the requests the server receives, and timed (best of 3).

Quick mode: 20 micro-batches. The streams run once each (on, then off),
each into a new table.
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


def _batches(n: int) -> list[pa.Table]:
    """``n`` micro-batches of ROWS event rows, spread over PARTITIONS days."""
    days = pa.array([day_name(d) for d in range(PARTITIONS)])
    out = []
    for b in range(n):
        data = events(ROWS, first_id=b * ROWS, seed=b + 1)
        dt = days.take(pa.array([i % PARTITIONS for i in range(ROWS)], pa.int64()))
        out.append(data.set_column(data.schema.get_field_index("dt"), "dt", dt))
    return out


def _stream(uri: str, batches: list[pa.Table], auto: bool) -> tuple[float, lakefmt.Table]:
    options = {"compaction.auto": "true"} if auto else {}
    table = lakefmt.create_table(uri, EVENTS_SCHEMA, partition_by=["dt"], options=options)
    t0 = time.perf_counter()
    for batch in batches:
        table.append(batch)
    return time.perf_counter() - t0, table


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
    rounds = 1
    rows = n * ROWS
    result = Result(NAME, "quick" if quick else "full", {
        "micro_batches": n, "rows_per_batch": ROWS, "partitions": PARTITIONS, "rows": rows,
        "columns": EVENTS_SCHEMA.names, "options_on": {"compaction.auto": "true"}, "stream_rounds": rounds,
        "reads": READS, "s3_reads": S3_READS, "statistic": "best of rounds / reads",
    })
    base = workdir / NAME
    drop_tree(base)
    base.mkdir(parents=True)
    batches = _batches(n)
    times: dict[str, list[float]] = {"on": [], "off": []}
    tables: dict[str, lakefmt.Table] = {}
    for r in range(rounds):
        for side in (("on", "off") if r % 2 == 0 else ("off", "on")):
            seconds, table = _stream(str(base / f"{side}-{r}"), batches, side == "on")
            times[side].append(seconds)
            tables[side] = table
    once = lakefmt.create_table(str(base / "once"), EVENTS_SCHEMA, partition_by=["dt"])
    t0 = time.perf_counter()
    once.append(pa.concat_tables(batches))
    once_write = time.perf_counter() - t0
    tables["once"] = once

    reads = {name: _best_read(t, READS, rows) for name, t in tables.items()}
    files = {name: len(t.files()) for name, t in tables.items()}
    per_part = {name: _per_partition(t) for name, t in tables.items()}
    on = tables["on"]
    kinds = Counter(s.commit_kind.value for s in on.snapshots())
    peak = max(s.total_file_count for s in on.snapshots())  # live files after any commit, all partitions
    max_files = on.table_schema().table_options.compaction_max_file_num
    stream = {k: min(v) for k, v in times.items()}

    s3 = _s3_reads(tables, rows, 1 if quick else S3_READS)
    result.comparisons += [
        Comparison(f"full read after {n} micro-batches, compaction on vs written at once", reads["on"],
                   reads["once"], "s", reads["on"] / reads["once"], TARGET_READ, "ratio<="),
        Comparison("full read, compaction off vs written at once", reads["off"], reads["once"], "s",
                   reads["off"] / reads["once"]),
        Comparison(f"stream of {n} appends, compaction on vs off", stream["on"], stream["off"], "s",
                   stream["on"] / stream["off"], TARGET_STREAM, "ratio<="),
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
        "stream_s": times,
        "stream_best_s": stream,
        "per_append_ms": {k: round(1000 * v / n, 2) for k, v in stream.items()},
        "write_once_s": once_write,
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
            for rep in range(reads):
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
