"""Planning: how fast a fresh process plans the latest snapshot of a table with many live data files.

Tables of 10,000, 100,000 and 1,000,000 live files (2,000 and 5,000 in quick mode) are built without
writing any data file: each of 100 commits is one day's partition written by 10 tasks, and each task's
per-task manifest is made by lakefmt's
writer-side metadata code (``DataFile`` with min/max/null counts on 3 columns -> ``entries_table`` ->
``encode_manifest`` -> ``manifest_meta``) and committed by the real committer, so the snapshots, manifest
lists and merged manifests are exactly what real writes would have produced.

Each measurement runs in a fresh interpreter (no metadata cache, imports done before the clock starts):

* ``scan().entries()`` and ``scan().files()`` of the latest snapshot, without a filter;
* ``scan(filter=dt == <one day>).entries()`` (partition filter);
* the baseline: the same metadata read with pyarrow alone (snapshot JSON -> manifest lists -> manifests ->
  concat -> ADD entries, the same manifest pruning for the partition filter): the decode limit.

Each is run in 5 fresh processes (2 in quick mode), interleaved; the best is compared. Rates are live entries of
the snapshot per second of planning (target >= 500,000 entries/s).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt
from benchmarks.common import (
    META_PARTITION_KEYS,
    META_SCHEMA,
    Comparison,
    Result,
    day_name,
    drop_tree,
    fake_data_files,
    raw_decode,
    run_child,
)
from lakefmt.spec import CommitMessage, FileKind, layout
from lakefmt.spec.manifest import encode_manifest, entries_table, manifest_meta

NAME = "planning"
TARGET_RATE = 500_000.0
REPS = 5
MODES = ("entries", "files", "entries_partition", "raw", "raw_partition")


def build_table(uri: str, days: int, files_per_day: int, tasks_per_day: int) -> dict[str, Any]:
    """One commit per day; each of the day's tasks contributes a per-task manifest of its files."""
    table = lakefmt.create_table(
        uri, META_SCHEMA, partition_by=list(META_PARTITION_KEYS), options={"write-only": "true"}
    )
    schema_id = table.table_schema().id
    stats_ids = table.table_schema().stats_ids
    committer = table.new_committer("bench-planning")
    per_task = files_per_day // tasks_per_day
    gen_s = commit_s = 0.0
    next_id = 0
    for day in range(days):
        t0 = time.perf_counter()
        messages = []
        for _task in range(tasks_per_day):
            writer_id = uuid.uuid4().hex
            files = fake_data_files(writer_id, per_task, day, next_id, schema_id=schema_id)
            next_id += per_task * files[0].row_count
            # stats keyed as the table's format version keys them (field ids in version 2), as its writers do
            entries = entries_table(FileKind.ADD, files, META_SCHEMA, META_PARTITION_KEYS, ids=stats_ids)
            data = encode_manifest(entries)
            name = layout.manifest_name(writer_id, 0)
            table.io.write(layout.manifest_path(name), data)
            messages.append(CommitMessage(writer_id, (manifest_meta(name, len(data), entries, schema_id),)))
        t1 = time.perf_counter()
        if committer.commit(messages, identifier=day) is None:
            raise RuntimeError(f"commit of day {day} did not land")
        commit_s += time.perf_counter() - t1
        gen_s += t1 - t0
    return {"generate_manifests_s": gen_s, "commit_s": commit_s, "commits": days}


# -- the child: one measurement in a fresh interpreter --------------------------------------------------
def _raw_plan(root: Path, day: str | None) -> tuple[int, int]:
    """The decode limit: read the latest snapshot's metadata with pyarrow only. Returns (entries, manifests)."""
    ids = [int(n.split("-", 1)[1]) for n in os.listdir(root / "snapshot") if n.startswith("snapshot-")]
    snap = json.loads((root / "snapshot" / f"snapshot-{max(ids)}").read_bytes())
    lists = []
    for key in ("baseManifestList", "deltaManifestList"):
        lists.append(raw_decode((root / "manifest" / snap[key]).read_bytes()))
    metas = pa.concat_tables(lists)
    if day is not None:  # prune manifests by their partition range, as a planner would
        dt = pc.struct_field(metas.column("partition_stats"), "dt")
        lo, hi = pc.struct_field(dt, "min"), pc.struct_field(dt, "max")
        metas = metas.filter(pc.and_(pc.less_equal(lo, day), pc.greater_equal(hi, day)))
    tables = []
    for name in metas.column("file_name").to_pylist():
        tables.append(raw_decode((root / "manifest" / name).read_bytes()))
    entries = pa.concat_tables(tables)
    is_add = pc.equal(entries.column("kind"), 0)
    adds = entries.filter(is_add)
    if adds.num_rows != entries.num_rows:
        gone = entries.filter(pc.invert(is_add)).column("path").combine_chunks()
        adds = adds.filter(pc.invert(pc.is_in(adds.column("path"), value_set=gone)))
    if day is not None:
        adds = adds.filter(pc.equal(pc.struct_field(adds.column("partition"), "dt"), day))
    return adds.num_rows, metas.num_rows


def child(uri: str, mode: str, day: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode}
    c0, t0 = time.process_time(), time.perf_counter()
    if mode.startswith("raw"):
        n, manifests = _raw_plan(Path(uri), day if mode == "raw_partition" else None)
        out["seconds"] = time.perf_counter() - t0
        out["cpu_seconds"] = time.process_time() - c0
        out.update(result_rows=n, manifests_read=manifests)
        return out
    table = lakefmt.open_table(uri)
    c1, t1 = time.process_time(), time.perf_counter()
    if mode == "entries":
        n = table.scan().entries().num_rows
    elif mode == "files":
        n = len(table.scan().files())
    elif mode == "entries_partition":
        n = table.scan(filter=pc.field("dt") == day).entries().num_rows
    else:
        raise ValueError(mode)
    t2, c2 = time.perf_counter(), time.process_time()
    out.update(seconds=t2 - t1, cpu_seconds=c2 - c1, open_s=t1 - t0, result_rows=n)
    return out


# -- the parent -----------------------------------------------------------------------------------------
DAYS = 100  # one commit per day: every table has 100 partitions and 100 snapshots
TASKS_PER_DAY = 10
TARGET_1M_S = 2.0


def plan_size(workdir: Path, live: int, reps: int = REPS) -> dict[str, Any]:
    """Build a table of ``live`` files and plan it in fresh processes; the metrics of one table size."""
    files_per_day = live // DAYS
    root = workdir / f"table-{live}"
    build = build_table(str(root), DAYS, files_per_day, TASKS_PER_DAY)
    day = day_name(DAYS // 2)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for rep in range(reps):
        k = rep % len(MODES)
        for mode in MODES[k:] + MODES[:k]:
            runs[mode].append(run_child("benchmarks.planning", [str(root), mode, day]))
    best = {m: min(r["seconds"] for r in runs[m]) for m in MODES}
    for m in ("entries", "files", "raw"):
        got = runs[m][0]["result_rows"]
        if got != live:
            raise RuntimeError(f"{m} planned {got} files, expected {live}")
    if runs["entries_partition"][0]["result_rows"] != runs["raw_partition"][0]["result_rows"]:
        raise RuntimeError("lakefmt and the baseline disagree on the partition-filtered plan")
    size = sum(p.stat().st_size for p in (root / "manifest").iterdir())
    drop_tree(root)
    return {
        "live_files": live,
        "files_per_task_manifest": files_per_day // TASKS_PER_DAY,
        "build": build,
        "best_s": best,
        "best_cpu_s": {m: min(r["cpu_seconds"] for r in runs[m]) for m in MODES},
        "entries_per_s": {m: live / best[m] for m in MODES},
        "partition_filter": {"day": day, "files_matched": runs["entries_partition"][0]["result_rows"],
                             "manifests_read_by_baseline": runs["raw_partition"][0]["manifests_read"]},
        "manifests_in_latest_snapshot": runs["raw"][0]["manifests_read"],
        "manifest_folder_bytes": size,
        "open_table_s": min(r["open_s"] for r in runs["entries"]),
        "runs": runs,
    }


def run(quick: bool, workdir: Path) -> Result:
    sizes = [2_000, 5_000] if quick else [10_000, 100_000, 1_000_000]
    result = Result(NAME, "quick" if quick else "full", {
        "live_files": sizes, "partitions": DAYS, "commits": DAYS, "tasks_per_commit": TASKS_PER_DAY,
        "stats_columns": list(META_SCHEMA.names), "fresh_process_reps": 2 if quick else REPS,
        "statistic": "best of reps (all reps reported)",
    })
    by_size: dict[str, Any] = {}
    for live in sizes:
        m = plan_size(workdir / NAME, live, 2 if quick else REPS)
        by_size[str(live)] = m
        best = m["best_s"]
        n = f"{live // 1000}k" if live < 1_000_000 else f"{live // 1_000_000}M"
        result.comparisons += [
            Comparison(f"{n} files: scan().entries()", live / best["entries"], live / best["raw"], "entries/s",
                       best["entries"] / best["raw"], TARGET_RATE, "value>="),
            Comparison(f"{n} files, dt filter: scan(f).entries()", live / best["entries_partition"],
                       live / best["raw_partition"], "entries/s", best["entries_partition"] / best["raw_partition"],
                       TARGET_RATE, "value>="),
            Comparison(f"{n} files: scan().files() (Python FileTask objects)", live / best["files"],
                       live / best["raw"], "entries/s", best["files"] / best["raw"]),
        ]
        print(f"  [{NAME}] {n} files: entries {best['entries']:.3f} s, filtered {best['entries_partition']:.3f} s, "
              f"files() {best['files']:.3f} s, raw {best['raw']:.3f} s", flush=True)
    if not quick:
        s = by_size["1000000"]["best_s"]["entries"]
        result.comparisons.append(Comparison(
            "1M files: plan time vs the 2 s target", s, TARGET_1M_S, "s", s / TARGET_1M_S, 1.0, "ratio<="))
    result.metrics = {"by_size": by_size}
    result.notes.append(
        "Rates count every live entry of the snapshot (the partition-filtered plan returns one day's files "
        "but considers all of them). Planning time excludes interpreter start-up and imports and "
        "open_table; it includes resolving the latest snapshot. The ratio column is lakefmt's time over the "
        "pyarrow-only decode of the same metadata (zstandard + pyarrow.ipc, no validation)."
    )
    return result


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        sys.exit("usage: python -m benchmarks planning (this module's entry point is for its child processes)")
