"""Planning: how fast a fresh process plans the latest snapshot of a table with many live data files.

The table (100,000 live files; 20,000 in quick mode) is built without writing any data file: each commit is
one day's partition written by several tasks, and each task's per-task manifest is made by lakefmt's
writer-side metadata code (``DataFile`` with min/max/null counts on 3 columns -> ``entries_table`` ->
``encode_manifest`` -> ``manifest_meta``) and committed by the real committer, so the snapshots, manifest
lists and merged manifests are exactly what real writes would have produced.

Each measurement runs in a fresh interpreter (no metadata cache, imports done before the clock starts):

* ``scan().entries()`` and ``scan().files()`` of the latest snapshot, without a filter;
* ``scan(filter=dt == <one day>).entries()`` (partition filter);
* the baseline: the same metadata read with pyarrow alone (snapshot JSON -> manifest lists -> manifests ->
  concat -> ADD entries, the same manifest pruning for the partition filter): the decode limit.

Each is run in 5 fresh processes, interleaved; the best is compared. Rates are live entries of the snapshot
per second of planning (target >= 500,000 entries/s).
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
    fake_data_files,
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
    table = lakefmt.create_table(uri, META_SCHEMA, partition_by=list(META_PARTITION_KEYS))
    schema_id = table.table_schema().id
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
            entries = entries_table(FileKind.ADD, files, META_SCHEMA, META_PARTITION_KEYS)
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
        with pa.OSFile(str(root / "manifest" / snap[key])) as f:
            lists.append(pa.ipc.open_file(f).read_all())
    metas = pa.concat_tables(lists)
    if day is not None:  # prune manifests by their partition range, as a planner would
        dt = pc.struct_field(metas.column("partition_stats"), "dt")
        lo, hi = pc.struct_field(dt, "min"), pc.struct_field(dt, "max")
        metas = metas.filter(pc.and_(pc.less_equal(lo, day), pc.greater_equal(hi, day)))
    tables = []
    for name in metas.column("file_name").to_pylist():
        with pa.OSFile(str(root / "manifest" / name)) as f:
            tables.append(pa.ipc.open_file(f).read_all())
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
def run(quick: bool, workdir: Path) -> Result:
    days = 20 if quick else 100
    files_per_day, tasks_per_day = 1000, 10
    live = days * files_per_day
    result = Result(NAME, "quick" if quick else "full", {
        "live_files": live, "partitions": days, "commits": days, "tasks_per_commit": tasks_per_day,
        "files_per_task_manifest": files_per_day // tasks_per_day, "stats_columns": list(META_SCHEMA.names),
        "fresh_process_reps": REPS, "statistic": "best of reps (all reps reported)",
    })
    root = workdir / NAME / "table"
    build = build_table(str(root), days, files_per_day, tasks_per_day)
    day = day_name(days // 2)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for rep in range(REPS):
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

    def rate(mode: str) -> float:
        return live / best[mode]

    result.comparisons += [
        Comparison("plan latest: scan().entries()", rate("entries"), rate("raw"), "entries/s",
                   best["entries"] / best["raw"], TARGET_RATE, "value>="),
        Comparison("plan latest: scan().files()", rate("files"), rate("raw"), "entries/s",
                   best["files"] / best["raw"], TARGET_RATE, "value>="),
        Comparison("plan latest, dt filter: scan(f).entries()", rate("entries_partition"),
                   rate("raw_partition"), "entries/s", best["entries_partition"] / best["raw_partition"],
                   TARGET_RATE, "value>="),
    ]
    size = sum(p.stat().st_size for p in (root / "manifest").iterdir())
    result.metrics = {
        "build": build,
        "best_s": best,
        "best_cpu_s": {m: min(r["cpu_seconds"] for r in runs[m]) for m in MODES},
        "entries_per_s": {m: rate(m) for m in MODES},
        "partition_filter": {"day": day, "files_matched": runs["entries_partition"][0]["result_rows"],
                             "manifests_read_by_baseline": runs["raw_partition"][0]["manifests_read"]},
        "manifests_in_latest_snapshot": runs["raw"][0]["manifests_read"],
        "manifest_folder_bytes": size,
        "open_table_s": min(r["open_s"] for r in runs["entries"]),
        "runs": runs,
    }
    result.notes.append(
        "Rates count every live entry of the snapshot (the partition-filtered plan returns one day's files "
        "but considers all of them). Planning time excludes interpreter start-up and imports and "
        "open_table; it includes resolving the latest snapshot."
    )
    return result


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        sys.exit("usage: python -m benchmarks planning (this module's entry point is for its child processes)")
