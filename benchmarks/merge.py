"""MERGE into a table without a key, side by side with deltalake's merge.

1M rows (half of them ids already in the table, half new) merged into a table of 10M rows on ``t.id = s.id`` with
``when_matched_update_all().when_not_matched_insert_all()``: lakefmt's ``Table.merge`` on a table without a
primary key, copy-on-write (the default) and with ``write.delete.mode=merge-on-read`` (deletion vectors), against
deltalake's ``merge`` of the same rows into a Delta table built from the same source (run in its own virtualenv,
``tools/bench-setup.sh``). Target: lakefmt at most 0.7x deltalake's time. Each timed merge runs on a fresh copy
of the table (data files hard-linked) and includes opening the table. ``LAKEFMT_BENCH_MERGE_SCALE`` scales the
sizes (``--quick``: 0.001).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import Comparison, Result, drop_tree
from benchmarks.key_tables import (
    SCHEMA,
    copy_table,
    delta_merge,
    read_source,
    timed_once,
    upsert_batch,
    write_source,
)
from benchmarks.peers import PEERS_DIR, SETUP_HINT, python_for

NAME = "merge"
SCALE_ENV = "LAKEFMT_BENCH_MERGE_SCALE"
TARGET = 0.7
#: the tables' options: no automatic compaction after the merge, whose time would count (deltalake's merge has none)
MODES = {
    "copy-on-write": {"compaction.auto": "false"},
    "merge-on-read": {"write.delete.mode": "merge-on-read", "compaction.auto": "false"},
}

__all__ = ["NAME", "run"]


def sizes(quick: bool) -> dict[str, Any]:
    scale = 0.001 if quick else float(os.environ.get(SCALE_ENV, "1"))
    return {"scale": scale, "base": max(1000, int(10_000_000 * scale)), "rows": max(100, int(1_000_000 * scale)),
            "reps": 1 if quick else 2}


def delta_build(root: Path, source: Path) -> None:
    """Write the source rows as a Delta table at ``root`` (one commit), in deltalake's virtualenv."""
    python = python_for("deltalake")
    if python is None:
        raise RuntimeError(f"deltalake is not set up: {SETUP_HINT}")
    cmd = [str(python), str(PEERS_DIR / "delta_merge.py"), "build", "--root", str(root), "--source", str(source)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"deltalake build failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    json.loads(proc.stdout.strip().splitlines()[-1])


def lakefmt_merge(master: Path, work: Path, source: Any) -> dict[str, Any]:
    folder = copy_table(master, work)

    def go() -> lakefmt.MergeReport:
        t = lakefmt.open_table(str(folder))
        return (t.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all().when_not_matched_insert_all().execute())

    wall, cpu, report = timed_once(go)
    drop_tree(folder)
    return {"wall": wall, "cpu": cpu, "updated": report.num_target_rows_updated,
            "inserted": report.num_target_rows_inserted}


def run(quick: bool, workdir: Path) -> Result:
    sz = sizes(quick)
    result = Result(NAME, "quick" if quick else "full", dict(sz))
    base = workdir / "merge"
    base.mkdir(parents=True, exist_ok=True)
    source = write_source(base / f"source-{sz['base']}.parquet", sz["base"])
    updates = upsert_batch(sz["base"], sz["rows"], seed=7)
    updates_path = base / "updates.parquet"
    pq.write_table(updates, updates_path)
    masters = {}
    for mode, opts in MODES.items():
        masters[mode] = base / f"lakefmt-{mode}"
        drop_tree(masters[mode])
        lakefmt.create_table(str(masters[mode]), SCHEMA.remove_metadata(), options=opts).append(read_source(source))
    peer = python_for("deltalake") is not None
    if peer:
        delta = base / "delta"
        drop_tree(delta)
        delta_build(delta, source)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in [*MODES, "deltalake"]}
    for rep in range(sz["reps"]):  # alternate who goes first: a busy machine slows both alike
        order = [*MODES, "deltalake"] if rep % 2 == 0 else ["deltalake", *MODES]
        for who in order:
            if who in MODES:
                runs[who].append(lakefmt_merge(masters[who], base / "work", updates))
            elif peer:
                runs["deltalake"].append(delta_merge(delta, base / "work", updates_path))
    best = {m: min(r, key=lambda x: x["wall"]) for m, r in runs.items() if r}
    result.metrics = {"runs": runs, "best": best}
    for mode in MODES:
        counts = (best[mode]["updated"], best[mode]["inserted"])
        if counts != (sz["rows"] // 2, sz["rows"] - sz["rows"] // 2):
            raise RuntimeError(f"lakefmt merge ({mode}) updated/inserted {counts}")
        label = f"merge {sz['rows']:,} into {sz['base']:,} rows, {mode}"
        if peer:
            d = best["deltalake"]["wall"]
            result.comparisons.append(Comparison(f"{label}, vs deltalake merge", best[mode]["wall"], d, "s",
                                                 best[mode]["wall"] / d, TARGET, "ratio<="))
            cpu, d_cpu = best[mode]["cpu"], best["deltalake"]["cpu"]
            result.comparisons.append(Comparison(f"{label}, CPU time vs deltalake merge", cpu, d_cpu, "s",
                                                 cpu / d_cpu, note="process CPU, all threads"))
    if not peer:  # the comparison measured here without the peer: marking vectors against rewriting files
        mor, cow = best["merge-on-read"]["wall"], best["copy-on-write"]["wall"]
        result.comparisons.append(Comparison(f"merge {sz['rows']:,} into {sz['base']:,} rows, merge-on-read vs "
                                             "copy-on-write", mor, cow, "s", mor / cow))
        result.notes.append(f"deltalake is not set up ({SETUP_HINT}): the comparison is left out")
    result.notes.append("Each merge runs on a fresh copy of its table and includes opening it; best of the reps.")
    return result
