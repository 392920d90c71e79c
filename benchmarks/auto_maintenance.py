"""What the default maintenance costs a writer: appends in a loop to a table created with no options (automatic
compaction and expiration on: ``snapshot.time-retained`` 1h, ``snapshot.num-retained.min`` 10) against the same
appends to a table with maintenance off (``write-only=true``).

Each micro-batch (1,000 rows over 4 partitions) goes to both tables, in alternating order, through
``Table.append``; each side's wall and CPU time is summed over its appends, so that a neighbour's load falls on
both alike. Both tables share a fake clock that moves one minute per micro-batch, so that over the run the
hour of retention passes several times and expiration really runs (in real time a run of minutes would never
expire anything). Reported: the stream's time and CPU time (target: defaults at most 1.5x off), files per
partition, snapshots kept, files and bytes on storage at the end, and a full read (best of 3). Quick mode: 40
micro-batches (expiration then barely starts).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, day_name, drop_tree, events
from lakefmt.meta.store import MetaStore

NAME = "auto_maintenance"
TARGET_STREAM = 1.5
PARTITIONS = 4
ROWS = 1000
READS = 3
STEP_MS = 60_000  #: the fake clock's step per micro-batch
SIDES = {"defaults": {}, "off": {"write-only": "true"}}


class _Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def _batch(b: int) -> pa.Table:
    data = events(ROWS, first_id=b * ROWS, seed=b + 1)
    days = pa.array([day_name(d) for d in range(PARTITIONS)])
    dt = days.take(pa.array([i % PARTITIONS for i in range(ROWS)], pa.int64()))
    return data.set_column(data.schema.get_field_index("dt"), "dt", dt)


def _best_read(table: lakefmt.Table, rows: int) -> float:
    best = float("inf")
    for _ in range(READS):
        t0 = time.perf_counter()
        got = table.to_arrow()
        best = min(best, time.perf_counter() - t0)
        assert got.num_rows == rows
    return best


def run(quick: bool, workdir: Path) -> Result:
    n = 40 if quick else 300
    rows = n * ROWS
    result = Result(NAME, "quick" if quick else "full", {
        "micro_batches": n, "rows_per_batch": ROWS, "partitions": PARTITIONS, "rows": rows, "sides": SIDES,
        "clock_step_s": STEP_MS / 1000, "statistic": "stream: sum over the micro-batches; read: best of 3",
    })
    drop_tree(workdir)
    workdir.mkdir(parents=True)
    clock = _Clock(int(time.time() * 1000) - n * STEP_MS)
    tables = {}
    for side, options in SIDES.items():
        created = lakefmt.create_table(str(workdir / side), EVENTS_SCHEMA, partition_by=["dt"], options=options)
        tables[side] = lakefmt.Table(created.io, MetaStore(created.io), clock=clock.time)
    spent = {side: {"wall": 0.0, "cpu": 0.0} for side in SIDES}
    most_per_part = dict.fromkeys(SIDES, 0)
    most_snapshots = dict.fromkeys(SIDES, 0)
    for b in range(n):
        batch = _batch(b)
        for side in tuple(SIDES) if b % 2 == 0 else tuple(reversed(SIDES)):
            c0, t0 = time.process_time(), time.perf_counter()
            tables[side].append(batch)
            spent[side]["wall"] += time.perf_counter() - t0
            spent[side]["cpu"] += time.process_time() - c0
        if b % 10 == 9 or b == n - 1:  # sampled (outside the timed appends): both sides alike
            for side, t in tables.items():
                most_per_part[side] = max(most_per_part[side], *Counter(f.partition["dt"] for f in t.files()).values())
                most_snapshots[side] = max(most_snapshots[side], len(t.snapshots()))
        clock.ms += STEP_MS
    per_part = {s: max(Counter(f.partition["dt"] for f in t.files()).values()) for s, t in tables.items()}
    snapshots = {s: len(t.snapshots()) for s, t in tables.items()}
    stored = {s: list(t.io.walk()) for s, t in tables.items()}
    files = {s: len(v) for s, v in stored.items()}
    size = {s: sum(f.size for f in v) for s, v in stored.items()}
    reads = {s: _best_read(t, rows) for s, t in tables.items()}
    kinds = dict(Counter(s.commit_kind.value for s in tables["defaults"].snapshots()))
    wall = {s: v["wall"] for s, v in spent.items()}
    cpu = {s: v["cpu"] for s, v in spent.items()}
    result.comparisons += [
        Comparison(f"{n} appends, default maintenance vs off (write-only)", wall["defaults"], wall["off"], "s",
                   wall["defaults"] / wall["off"], TARGET_STREAM, "ratio<="),
        Comparison("CPU time of the appends, default maintenance vs off", cpu["defaults"], cpu["off"], "s",
                   cpu["defaults"] / cpu["off"]),
        Comparison("files per partition at the end, defaults vs off", per_part["defaults"], per_part["off"], "files",
                   per_part["defaults"] / per_part["off"]),
        Comparison("snapshots kept at the end, defaults vs off", snapshots["defaults"], snapshots["off"], "snapshots",
                   snapshots["defaults"] / snapshots["off"]),
        Comparison("files on storage at the end, defaults vs off", files["defaults"], files["off"], "files",
                   files["defaults"] / files["off"]),
        Comparison("bytes on storage at the end, defaults vs off", size["defaults"], size["off"], "bytes",
                   size["defaults"] / size["off"]),
        Comparison("full read at the end, defaults vs off", reads["defaults"], reads["off"], "s",
                   reads["defaults"] / reads["off"]),
    ]
    result.metrics = {
        "stream_s": spent,
        "per_append_ms": {s: round(1000 * v / n, 2) for s, v in wall.items()},
        "files_per_partition_end": per_part,
        "files_per_partition_most_sampled": most_per_part,
        "snapshots_end": snapshots,
        "snapshots_most_sampled": most_snapshots,
        "snapshots_defaults_by_kind": kinds,
        "files_stored": files,
        "bytes_stored": size,
        "read_best_s": reads,
    }
    result.notes += [
        "the defaults side compacts in the appending thread right after each commit (compaction.async is off by "
        "default), so its compaction and expiration are inside its stream time",
        "the most files per partition and snapshots are sampled every 10 micro-batches, outside the timed appends",
    ]
    drop_tree(workdir)
    return result
