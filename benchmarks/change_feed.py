"""The change data feed of upserts against an incremental read of the same snapshots.

A key table (``id`` int64 key, ``v`` float64, ``s`` string; ``bucket`` = 4) of N rows written in one commit, then 100
upsert commits of 1% of N each (ids of live rows, random: every upsert replaces rows of many older files). Both sides
read snapshots 2..101 of the same table:

* **incremental**: ``scan(from_snapshot=1, to_snapshot=last).to_arrow()``, the rows those snapshots added that are
  still live;
* **change feed**: ``changes(1, last)``, every upsert's pre- and post-images (twice the rows upserted), which needs
  the replaced rows read from the older files as well.

Target: the feed within 1.5x of the incremental read. Two table layouts are measured: the key table's defaults
(automatic compaction of a bucket's files, so the upserts replace rows of a few large files) and
``compaction.auto=false`` (each bucket holds 100 small files by the end, each with a vector that every upsert
grows). N = 1M (``--quick``: 50k rows and 20 upserts); best wall time of 3 interleaved reps, each on a freshly
opened table.

Run alone: ``python -m benchmarks.change_feed [--quick] [--out DIR] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import lakefmt
from benchmarks.common import Comparison, Result, drop_tree, environment, interleaved, write_result

NAME = "change_feed"
TARGET = 1.5
LOOKUP_TARGET = 1.3
COMMITS = 100
QUICK_COMMITS = 20  #: ``--quick``: enough commits for every layout to compact
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.float64()), ("s", pa.string())])


def _batch(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    return pa.table({"id": ids, "v": rng.random(len(ids)), "s": [f"s{i:09d}" for i in ids]}, schema=SCHEMA)


def _build(uri: str, rows: int, options: dict[str, str], commits: int) -> tuple[int, int, float, float]:
    """The table, and the wall and CPU seconds its ``commits`` upserts took (the first load not counted)."""
    rng = np.random.default_rng(7)
    t = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options={"bucket": "4", **options})
    first = t.upsert(_batch(np.arange(rows, dtype=np.int64), rng))
    assert first is not None
    batches = [_batch(rng.choice(rows, rows // 100, replace=False).astype(np.int64), rng) for _ in range(commits)]
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        t.upsert(batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    last = t.latest_snapshot()
    assert last is not None
    return first.id, last.id, wall, cpu


def run(quick: bool, workdir: Path) -> Result:
    rows = 50_000 if quick else 1_000_000
    commits = QUICK_COMMITS if quick else COMMITS
    reps = 3
    layouts = {
        "defaults": {"compaction.async": "false"},
        "defaults, lookup": {"compaction.async": "false", "changelog-producer": "lookup"},
        "no compaction": {"compaction.auto": "false"},
        "no compaction, lookup": {"compaction.auto": "false", "changelog-producer": "lookup"},
    }
    builds: dict[str, tuple[float, float]] = {}
    result = Result(NAME, "quick" if quick else "full", {
        "rows": rows, "upsert_commits": commits, "rows_per_upsert": rows // 100, "buckets": 4, "reps": reps,
        "statistic": "best of reps",
    })  # fmt: skip
    drop_tree(workdir)
    workdir.mkdir(parents=True)
    for label, options in layouts.items():
        uri = str(workdir / label.replace(" ", "-"))
        print(f"[{NAME}] {label}: {rows} rows, {commits} upserts of {rows // 100}", flush=True)
        first, last, wall, cpu = _build(uri, rows, options, commits)
        builds[label] = (wall, cpu)
        counts: dict[str, int] = {}

        def incremental(
            _: int, uri: str = uri, first: int = first, last: int = last, out: dict[str, int] = counts
        ) -> None:
            out["incremental"] = lakefmt.open_table(uri).scan(from_snapshot=first, to_snapshot=last).to_arrow().num_rows

        def feed(_: int, uri: str = uri, first: int = first, last: int = last, out: dict[str, int] = counts) -> None:
            out["feed"] = lakefmt.open_table(uri).changes(first, last).num_rows

        times = interleaved({"incremental": incremental, "feed": feed}, reps)
        best = {k: min(v["wall"]) for k, v in times.items()}
        result.comparisons.append(Comparison(
            f"change feed of {commits} upserts vs incremental read ({label})", best["feed"], best["incremental"], "s",
            best["feed"] / best["incremental"], TARGET, "ratio<=",
            note=f"{counts['feed']:,} change rows; {counts['incremental']:,} rows read incrementally",
        ))  # fmt: skip
        result.metrics[label] = {"snapshots": last - first, **counts, **best, "upserts_wall": wall, "upserts_cpu": cpu}
    for label in ("defaults", "no compaction"):  # what storing the pre-images costs the writer
        (off_wall, off_cpu), (on_wall, on_cpu) = builds[label], builds[f"{label}, lookup"]
        result.comparisons.append(Comparison(
            f"{commits} upserts with changelog-producer=lookup vs none ({label})", on_wall, off_wall, "s",
            on_wall / off_wall, LOOKUP_TARGET, "ratio<=",
            note=f"CPU {on_cpu:.2f} s vs {off_cpu:.2f} s = {on_cpu / off_cpu:.2f}x",
        ))  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.change_feed")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--workdir", type=Path, default=Path("bench-work") / NAME)
    args = parser.parse_args()
    start = time.perf_counter()
    result = run(args.quick, args.workdir)
    result.duration_s = time.perf_counter() - start
    result.environment = environment()
    path = write_result(result, args.out)
    for c in result.comparisons:
        print(f"{c.name}: {c.value:.3f} s vs {c.baseline:.3f} s = {c.ratio:.2f}x (target <= {c.target}) {c.note}")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
