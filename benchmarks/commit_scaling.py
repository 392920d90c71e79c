"""Commit scaling: N append commits of 1,000 rows each to a local table. Commit cost must not grow with history.

Each commit is a task-side write (``Table.new_writer``: one data file and its per-task manifest) followed by a
driver-side commit (``Committer.commit`` with one stable commit user and increasing identifiers, as a streaming
query does). Only the commit is the measured quantity; the write is reported alongside.

Compared: the median commit time of the last 10% of commits with that of the first 10% (target <= 1.2), and the
commit times around commit 10 and around the last commit (windows of 10 commits). Wall times of small fsync'd
writes are noisy on a shared machine, so two steadier views of the same question are reported with them: the
commit's process CPU time, and the bytes of manifest lists and snapshot file each commit writes (deterministic:
if the commit's work grew with history, these would). Also reported: the metadata bytes on disk (snapshot/ +
manifest/ + schema/), in total and per commit, and the commit-time trend by decile.
"""

from __future__ import annotations

import time
from pathlib import Path

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, events, median, tree_size

NAME = "commit_scaling"
TARGET_RATIO = 1.2
WINDOW = 10  # commits in the "around commit k" windows
SAMPLE = 100  # metadata bytes on disk are sampled every SAMPLE commits
META_AT = 1000  # the metadata-bytes target applies at this many commits
META_TARGET = 3 << 20


def _metadata_bytes(table_root: Path) -> int:
    return sum(tree_size(table_root / sub)[0] for sub in ("snapshot", "manifest", "schema"))


def run(quick: bool, workdir: Path) -> Result:
    n_commits = 300 if quick else 10_000
    rows = 1000
    result = Result(NAME, "quick" if quick else "full", {"commits": n_commits, "rows_per_commit": rows,
                                                          "storage": "local", "partitioned": False,
                                                          "commit_user": "stable (streaming-style identifiers)"})
    root = workdir / NAME
    table = lakefmt.create_table(str(root / "table"), EVENTS_SCHEMA, options={"write-only": "true"})  # history grows
    data = events(n_commits * rows, days=max(1, n_commits // 100))
    committer = table.new_committer("bench-commit-scaling")
    write_s: list[float] = []
    commit_s: list[float] = []
    commit_cpu: list[float] = []  # CPU time: insensitive to the disk, less sensitive to other processes
    written: list[int] = []  # bytes of the manifest lists and snapshot each commit wrote: deterministic work
    meta_series: list[tuple[int, int]] = []  # (commits, metadata bytes on disk), every SAMPLE commits
    for i in range(n_commits):
        batch = data.slice(i * rows, rows)
        t0 = time.perf_counter()
        writer = table.new_writer()
        writer.write(batch)
        message = writer.prepare_commit()
        c1, t1 = time.process_time(), time.perf_counter()
        snap = committer.commit([message], identifier=i)
        t2, c2 = time.perf_counter(), time.process_time()
        commit_cpu.append(c2 - c1)
        if snap is None or snap.id != i + 1:
            raise RuntimeError(f"commit {i} did not produce snapshot {i + 1}")
        snap_bytes = (root / "table" / "snapshot" / f"snapshot-{snap.id}").stat().st_size
        written.append(snap.base_manifest_list_size + snap.delta_manifest_list_size + snap_bytes)
        write_s.append(t1 - t0)
        commit_s.append(t2 - t1)
        if (i + 1) % SAMPLE == 0:
            meta_series.append((i + 1, _metadata_bytes(root / "table")))

    check = table.scan().count()
    if check != n_commits * rows:
        raise RuntimeError(f"table holds {check} rows, expected {n_commits * rows}")

    tenth = max(1, n_commits // 10)
    first, last = median(commit_s[:tenth]), median(commit_s[-tenth:])
    around_10 = median(commit_s[10 - WINDOW // 2 : 10 + WINDOW // 2])  # commits 6..15
    around_n = median(commit_s[-WINDOW:])  # the last 10 commits
    both = [w + c for w, c in zip(write_s, commit_s, strict=True)]
    both_first, both_last = median(both[:tenth]), median(both[-tenth:])
    result.comparisons += [
        Comparison(f"commit median, last 10% vs first 10% ({tenth} each)", last, first, "s",
                   last / first, TARGET_RATIO, "ratio<="),
        Comparison(f"commit {n_commits} vs commit 10 (medians of {WINDOW})", around_n, around_10, "s",
                   around_n / around_10, TARGET_RATIO, "ratio<="),
        Comparison("commit CPU time median, last 10% vs first 10%", median(commit_cpu[-tenth:]),
                   median(commit_cpu[:tenth]), "s", median(commit_cpu[-tenth:]) / median(commit_cpu[:tenth])),
        Comparison("write+commit median, last 10% vs first 10%", both_last, both_first, "s",
                   both_last / both_first),
        Comparison("lists+snapshot bytes per commit, last 10% vs first 10%", median(written[-tenth:]),
                   median(written[:tenth]), "B", median(written[-tenth:]) / median(written[:tenth])),
    ]

    at = dict(meta_series).get(META_AT)
    if at is not None:
        result.comparisons.append(Comparison(
            f"metadata bytes on disk at {META_AT} commits vs the 3 MiB target", at, META_TARGET, "B",
            at / META_TARGET, 1.0, "ratio<=", note="snapshot/ + manifest/ + schema/, nothing expired"))
    meta = {}
    for sub in ("snapshot", "manifest", "schema"):
        size, count = tree_size(root / "table" / sub)
        meta[sub] = {"bytes": size, "files": count}
    meta_bytes = sum(v["bytes"] for v in meta.values())
    data_bytes = sum(f.file_size for f in table.files())
    deciles = [median(commit_s[k * tenth : (k + 1) * tenth]) for k in range(10)]
    result.metrics = {
        "commit_s": {
            "median_first_10pct": first,
            "median_last_10pct": last,
            "ratio_last_over_first": last / first,
            "median_around_commit_10": around_10,
            f"median_around_commit_{n_commits}": around_n,
            "ratio_commit_n_over_commit_10": around_n / around_10,
            "median_all": median(commit_s),
            "mean_all": sum(commit_s) / n_commits,
            "p90_all": sorted(commit_s)[int(0.9 * n_commits)],
            "max_all": max(commit_s),
            "median_by_decile": deciles,
        },
        "commit_cpu_s": {
            "median_first_10pct": median(commit_cpu[:tenth]),
            "median_last_10pct": median(commit_cpu[-tenth:]),
            "median_by_decile": [median(commit_cpu[k * tenth : (k + 1) * tenth]) for k in range(10)],
        },
        "write_s": {"median_first_10pct": median(write_s[:tenth]), "median_last_10pct": median(write_s[-tenth:])},
        "lists_and_snapshot_bytes_per_commit": {
            "median_first_10pct": median(written[:tenth]),
            "median_last_10pct": median(written[-tenth:]),
            "max": max(written),
        },
        "metadata_bytes": meta_bytes,
        "metadata_bytes_series": meta_series,
        # for the plot: the median of each run of 10 commits (commits 1-10, 11-20, ...)
        "commit_s_median_per_10": [round(median(commit_s[k : k + 10]), 6) for k in range(0, n_commits, 10)],
        "metadata_bytes_per_commit": meta_bytes / n_commits,
        "metadata_by_folder": meta,
        "data_bytes": data_bytes,
        "total_s": sum(write_s) + sum(commit_s),
    }
    result.notes.append(
        "Commit times include every fsync lakefmt does on local disk (manifests, manifest lists, snapshot, "
        "folder); they depend on the disk as much as on the code. Nothing is expired: metadata grows with "
        "history by design until `expire` runs."
    )
    return result
