"""Render the benchmark results (``benchmarks/results/*.json``) as the PNG plots of ``docs/benchmarks.md``.

``python -m benchmarks.plots [--results DIR] [--out DIR] [--quick]`` (needs matplotlib: ``pip install
'.[bench]'``). Full-mode results are used unless ``--quick``; a plot whose results are missing is skipped
with a message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import PACKAGE_DIR, REPO_DIR

COLORS = {"lakefmt": "#1b7837", "lakefmt-nofsync": "#7fbf7b", "pypaimon": "#2166ac", "deltalake": "#b2182b",
          "pyiceberg": "#e08214"}
MIB = 1 << 20


def _load(results: Path, name: str, quick: bool) -> dict[str, Any] | None:
    path = results / (f"{name}-quick.json" if quick else f"{name}.json")
    if not path.exists():
        print(f"skipped: {path.name} not found", file=sys.stderr)
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _rolling_median(xs: list[float], k: int) -> list[float]:
    out = []
    for i in range(len(xs)):
        window = sorted(xs[max(0, i - k + 1) : i + 1])
        out.append(window[len(window) // 2])
    return out


def _finish(fig: Any, out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    print(f"wrote {out / name}")


def plot_commit_times(plt: Any, speed: dict[str, Any] | None, scaling: dict[str, Any] | None, out: Path) -> None:
    """Left: each side's append time against commit number over the first 1,000 commits. Right: lakefmt's
    commit time over the whole scaling run."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    if speed is not None:
        ax = axes[0]
        for side, times in speed["metrics"]["per_commit_s"]["unpartitioned"].items():
            xs = list(range(1, len(times) + 1))
            ax.plot(xs, _rolling_median(times, 10), label=side, color=COLORS.get(side), lw=1.4)
        ax.set_yscale("log")
        ax.set_xlabel("commit number")
        ax.set_ylabel("seconds per append (rolling median of 10)")
        ax.set_title("Append of 1,000 rows: write + commit, unpartitioned")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if scaling is not None:
        ax = axes[1]
        per10 = scaling["metrics"]["commit_s_median_per_10"]
        xs = [10 * (i + 1) for i in range(len(per10))]
        smooth = _rolling_median(per10, 10)  # medians over 100 commits: a busy disk's spikes are not the code
        ax.plot(xs, [1000 * x for x in smooth], color=COLORS["lakefmt"], lw=1)
        first = scaling["metrics"]["commit_s"]["median_first_10pct"] * 1000
        ax.axhline(first * 1.2, color="grey", ls="--", lw=1, label="1.2 x median of the first 10% (target)")
        ax.set_ylim(0, max(first * 3, max(1000 * x for x in smooth) * 1.05))
        ax.set_xlabel("commit number")
        ax.set_ylabel("commit time, ms (rolling median of 100)")
        ax.set_title(f"lakefmt commit time over {len(per10) * 10:,} commits, no expiration")
        ax.grid(True, alpha=0.3)
        ax.legend()
    _finish(fig, out, "commit_times.png")


def plot_metadata_bytes(plt: Any, speed: dict[str, Any] | None, scaling: dict[str, Any] | None, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    if scaling is not None:
        series = scaling["metrics"]["metadata_bytes_series"]
        ax.plot([c for c, _ in series], [b / MIB for _, b in series], color=COLORS["lakefmt"], label="lakefmt")
    if speed is not None:
        for side, info in speed["metrics"]["metadata"]["unpartitioned"].items():
            if side.startswith("lakefmt"):
                continue
            ax.scatter([info["commits"]], [info["bytes"] / MIB], color=COLORS.get(side), label=side, zorder=3)
    ax.scatter([1000], [3], marker="_", s=600, color="black", label="target at 1,000 commits: 3 MiB", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("commits (1,000 rows each)")
    ax.set_ylabel("metadata on disk, MiB")
    ax.set_title("Metadata bytes as history grows (nothing expired)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    _finish(fig, out, "metadata_bytes.png")


def plot_commit_speed(plt: Any, speed: dict[str, Any], out: Path) -> None:
    totals = speed["metrics"]["total_s"]
    layouts = list(totals)
    sides = sorted({s for lay in layouts for s in totals[lay]}, key=lambda s: (s != "lakefmt", s))
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    width = 0.8 / max(len(sides), 1)
    wanted = speed["params"].get("commits")
    done = speed["metrics"].get("metadata", {})
    for j, side in enumerate(sides):
        xs = [i + j * width for i in range(len(layouts))]
        ys = [totals[lay].get(side, 0.0) for lay in layouts]
        bars = ax.bar(xs, ys, width, label=side, color=COLORS.get(side))
        labels = []
        for lay, y in zip(layouts, ys, strict=True):
            n = done.get(lay, {}).get(side, {}).get("commits", wanted)
            labels.append(f"{y:.1f} s" if n == wanted else f"{y:.0f} s\n({n} commits:\ntime budget)")
        ax.bar_label(bars, labels, fontsize=7)
    ax.set_ylim(0, 1.25 * max(v for lay in layouts for v in totals[lay].values()))
    ax.set_xticks([i + width * (len(sides) - 1) / 2 for i in range(len(layouts))], layouts)
    ax.set_ylabel("seconds for all commits (lower is better)")
    ax.set_title(f"{wanted:,} append commits of 1,000 rows, each timed (write + commit)")
    ax.legend()
    _finish(fig, out, "commit_speed.png")


def plot_planning(plt: Any, planning: dict[str, Any], out: Path) -> None:
    by_size = planning["metrics"]["by_size"]
    sizes = sorted(int(k) for k in by_size)
    labels = {"entries": "scan().entries()", "entries_partition": "scan(dt filter).entries()",
              "files": "scan().files() (Python objects)", "raw": "pyarrow-only decode (limit)"}
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    for mode, label in labels.items():
        ax.plot(sizes, [by_size[str(n)]["best_s"][mode] for n in sizes], marker="o", label=label)
    ax.plot(sizes, [n / 500_000 for n in sizes], color="grey", ls="--", lw=1, label="500k entries/s (target)")
    ax.axhline(2.0, color="black", ls=":", lw=1, label="2 s for 1M files (target)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("live data files in the snapshot")
    ax.set_ylabel("seconds to plan, fresh process")
    ax.set_title("Planning the latest snapshot")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _finish(fig, out, "planning.png")


def plot_s3_requests(plt: Any, s3: dict[str, Any], out: Path) -> None:
    by_cp = s3["metrics"]["by_checkpoint"]
    cps = sorted(by_cp, key=int)
    kinds = sorted({k for cp in cps for mode in ("warm", "cold") for k in by_cp[cp][mode]["per_append_by_request"]})
    bars = [(f"{int(cp):,}\n{mode}", by_cp[cp][mode]["per_append_by_request"])
            for cp in cps for mode in ("warm", "cold")]
    fig, ax = plt.subplots(figsize=(9.5, 4.4))
    bottom = [0.0] * len(bars)
    cmap = plt.get_cmap("tab20")
    for i, kind in enumerate(kinds):
        ys = [b[1].get(kind, 0.0) for b in bars]
        ax.bar(range(len(bars)), ys, bottom=bottom, label=kind, color=cmap(i))
        bottom = [a + b for a, b in zip(bottom, ys, strict=True)]
    ax.axhline(8, color="black", ls="--", lw=1, label="target: 8")
    ax.set_xticks(range(len(bars)), [b[0] for b in bars])
    ax.set_xlabel("snapshots in the table / committer")
    ax.set_ylabel("S3 requests per append (mean)")
    ax.set_title("Requests to S3 (moto) per append commit")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _finish(fig, out, "s3_requests.png")


def plot_ratios(plt: Any, results: list[dict[str, Any]], out: Path) -> None:
    """Every 'lakefmt vs limit' ratio with a target: manifest merge and I/O overhead."""
    rows = [(f"{r['benchmark']}: {c['name']}", c["ratio"], c["target"])
            for r in results for c in r["comparisons"]
            if c["check"] == "ratio<=" and c["ratio"] is not None
            and r["benchmark"] in ("manifest_merge", "io_overhead")]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    ys = range(len(rows))
    ax.barh(ys, [r[1] for r in rows], color=["#1b7837" if r[1] <= r[2] else "#b2182b" for r in rows])
    for y, (_, ratio, target) in zip(ys, rows, strict=True):
        ax.plot([target, target], [y - 0.4, y + 0.4], color="black", lw=1.5)
        ax.text(ratio, y, f" {ratio:.2f}", va="center", fontsize=8)
    ax.set_yticks(list(ys), [r[0] for r in rows], fontsize=8)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("lakefmt time / baseline time (black tick: target)")
    ax.set_title("Against the physical limits")
    ax.invert_yaxis()
    _finish(fig, out, "limits.png")


def plot_engines(plt: Any, engines: dict[str, Any], out: Path) -> None:
    """DuckDB and Polars over a lakefmt scan against the same engine over the same files listed by hand: the best
    wall time and the best CPU time of each side."""
    groups = [("DuckDB\nall days", "duckdb_lakefmt", "duckdb_files"),
              ("DuckDB\n3 days", "duckdb_lakefmt_days", "duckdb_files_days"),
              ("Polars\nall days", "polars_lakefmt", "polars_files"),
              ("Polars\n3 days", "polars_lakefmt_days", "polars_files_days"),
              ("DuckDB, scan filtered\non a data column", "duckdb_dataset", "duckdb_files_user")]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    xs = range(len(groups))
    for ax, key, what in ((axes[0], "best_wall_s", "wall time"), (axes[1], "best_cpu_s", "CPU time")):
        best = engines["metrics"][key]
        for offset, index, label, color in ((-0.2, 1, "lakefmt scan", COLORS["lakefmt"]),
                                            (0.2, 2, "files listed by hand (the limit)", "#969696")):
            ys = [best[g[index]] * 1000 for g in groups]
            ax.bar([x + offset for x in xs], ys, width=0.4, label=label, color=color)
            for x, y in zip(xs, ys, strict=True):
                ax.text(x + offset, y, f"{y:.0f}", ha="center", va="bottom", fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(list(xs), [g[0] for g in groups], fontsize=8)
        ax.set_ylabel(f"{what}, milliseconds (best of runs, log scale)")
        ax.set_title(what)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    params = engines["params"]
    fig.suptitle(f"Filtered aggregate over {params['rows']:,} rows in {params['files']} files")
    _finish(fig, out, "engines.png")


def plot_compaction(plt: Any, delta: dict[str, Any] | None, compaction: dict[str, Any] | None,
                    stream: dict[str, Any] | None, out: Path) -> None:
    """Compaction: delta-rs's optimize benchmark side by side, compaction against pyarrow rewriting the same
    files, and a long stream's full read with automatic compaction on and off against the rows written at once."""
    panels = [p for p in (delta, compaction, stream) if p is not None]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    axes = list(axes[0])
    if delta is not None:
        ax = axes.pop(0)
        m = delta["metrics"]
        peer = m["deltalake"].get("peer", "deltalake")
        like = next(k for k in m["lakefmt_best_s"] if k.endswith("_nofsync"))
        tasks = list(m["deltalake_best_s"])
        xs = range(len(tasks))
        for offset, label, values, color in (
            (-0.2, f"lakefmt ({like.replace('_', ', ')})", [m["lakefmt_best_s"][like][t] for t in tasks],
             COLORS["lakefmt"]),
            (0.2, peer, [m["deltalake_best_s"][t] for t in tasks], "#969696"),
        ):
            ax.bar([x + offset for x in xs], values, width=0.4, label=label, color=color)
            for x, y in zip(xs, values, strict=True):
                ax.text(x + offset, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(list(xs), [f"{t} task{'s' if t != '1' else ''}" for t in tasks])
        ax.set_ylabel("seconds (best of runs)")
        ax.set_title(f"50 files -> 5, {delta['params']['rows']:,} rows", fontsize=9)
        ax.legend(fontsize=7)
    if compaction is not None:
        ax = axes.pop(0)
        best = compaction["metrics"]["best_wall_s"]
        names = ["lakefmt_compact_fsync", "lakefmt_compact_nofsync", "pyarrow_rewrite", "pyarrow_rewrite_fsync",
                 "pyarrow_rewrite_same_encoding"]
        names = [n for n in names if n in best]
        ax.barh(range(len(names)), [best[n] for n in names],
                color=[COLORS["lakefmt"] if n.startswith("lakefmt") else "#969696" for n in names])
        ax.set_yticks(range(len(names)), [n.replace("_", " ") for n in names], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (best of runs)")
        ax.set_title(f"Compaction vs pyarrow, {compaction['params']['rows']:,} rows", fontsize=9)
    if stream is not None:
        ax = axes.pop(0)
        reads = stream["metrics"]["read_best_s"]
        files = stream["metrics"]["live_files"]
        names = [n for n in ("once", "on", "off") if n in reads]
        labels = {"once": "written\nat once", "on": "stream,\ncompaction on", "off": "stream,\ncompaction off"}
        values = [reads[n] * 1000 for n in names]
        ax.bar(range(len(names)), values, color=["#969696", COLORS["lakefmt"], "#b2182b"][: len(names)])
        for x, (n, y) in enumerate(zip(names, values, strict=True)):
            ax.text(x, y, f"{y:.0f} ms\n{files[n]} files", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)), [labels[n] for n in names], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylim(top=max(values) * 4)  # room for the labels above the tallest bar, below the title
        ax.set_ylabel("full read, ms (best of runs, log scale)")
        ax.set_title(f"After {stream['params']['micro_batches']:,} micro-batches", fontsize=9)
    _finish(fig, out, "compaction.png")


def plot_schema_evolution(plt: Any, evo: dict[str, Any], out: Path) -> None:
    """Schema evolution: a read of files spanning 10 schema versions against the same rows under one schema, and a
    schema change's commit time as the table's history grows."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.0))
    best = evo["metrics"]["best_wall_s"]
    groups = [("full read", "evolved", "one_schema"), ("2 columns, filter on\na renamed column",
                                                      "evolved_projected", "one_schema_projected")]
    xs = range(len(groups))
    for offset, label, idx, color in ((-0.2, "10 schema versions", 1, COLORS["lakefmt"]),
                                      (0.2, "one schema", 2, "#969696")):
        values = [best[g[idx]] * 1000 for g in groups]
        left.bar([x + offset for x in xs], values, width=0.4, label=label, color=color)
        for x, y in zip(xs, values, strict=True):
            left.text(x + offset, y, f"{y:.0f}", ha="center", va="bottom", fontsize=7)
    left.set_xticks(list(xs), [g[0] for g in groups], fontsize=8)
    left.set_ylabel("ms (best of runs)")
    left.set_title(f"Read, {10 * evo['params']['rows_per_file']:,} rows in 10 files", fontsize=9)
    left.legend(fontsize=7)
    levels = evo["metrics"]["commit_levels"]
    snaps = [levels[k]["snapshots"] for k in levels]
    right.plot(snaps, [levels[k]["schema_change_s"] * 1000 for k in levels], "o-", color=COLORS["lakefmt"],
               label="schema change (add a column)")
    right.plot(snaps, [levels[k]["append_s"] * 1000 for k in levels], "s--", color="#969696", label="10-row append")
    right.set_xscale("log")
    right.set_ylim(bottom=0)
    right.set_xlabel("snapshots in the table")
    right.set_ylabel("ms per commit (median of 5)")
    right.set_title("A schema change as a commit", fontsize=9)
    right.legend(fontsize=7)
    _finish(fig, out, "schema_evolution.png")


def plot_key_tables(plt: Any, kt: dict[str, Any], out: Path) -> None:
    """Key tables: upserts against deltalake's merge (and pyiceberg's upsert), an upsert's time against table size,
    reads after many upsert commits against the same rows written at once, delete by key against copy-on-write."""
    m, p = kt["metrics"], kt["params"]
    cycle = m["read"].get("to_arrow_after_each_of_the_last_commits") or []
    fig, axes = plt.subplots(1, 5 if cycle else 4, figsize=(21 if cycle else 17, 4.0))
    ax = axes[0]
    bars = [(f"{p['merge_rows']:,} into\n{p['merge_base']:,}", m.get("merge", {}), "deltalake")]
    ice = m.get("iceberg") or {}
    if ice.get("pyiceberg"):
        bars.append((f"{p['iceberg_rows']:,} into\n{p['iceberg_base']:,}",
                     {"lakefmt": ice["lakefmt"], "pyiceberg": {"wall": min(ice["pyiceberg"]["seconds"])}}, "pyiceberg"))
    for x, (_label, sides, peer) in enumerate(bars):
        for offset, side in ((-0.2, "lakefmt"), (0.2, peer)):
            if side in sides:
                y = sides[side]["wall"]
                legend = side if side != "lakefmt" or x == 0 else None
                ax.bar(x + offset, y, width=0.4, color=COLORS[side], label=legend)
                ax.text(x + offset, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.set_ylabel("seconds (best of runs)")
    ax.set_title("Upsert, half new keys", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    sc = m["scaling"]
    xs = [int(k) for k in sc]
    for side in ("lakefmt", "deltalake"):
        ys = [sc[k][side]["wall"] for k in sc if side in sc[k]]
        if len(ys) == len(xs):
            ax.plot(xs, ys, "o-", color=COLORS[side], label=side)
    sk = m.get("string_keys") or {}
    if sk:
        sx = [int(k) for k in sk]
        ax.plot(sx, [sk[k]["indexed"]["wall"] for k in sk], "s--", color=COLORS["lakefmt"],
                label="lakefmt, string key")
        ax.plot(sx, [sk[k]["no_index"]["wall"] for k in sk], "s:", color="#969696",
                label="string key, no key index files")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows in the table")
    ax.set_ylabel("seconds (best of runs)")
    ax.set_title(f"Upsert of {p['scaling_rows']:,} rows against table size", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    best = m["read"]["best"]
    engines = list(best)
    sides = [(-0.27, "many", f"after {p['read_commits']} upserts", COLORS["lakefmt"], None),
             (0.0, "files", "its files, no mask (the floor)", "#bdbdbd", "//"),
             (0.27, "once", "written at once", "#969696", None)]
    for offset, side, label, color, hatch in sides:
        if not all(side in best[e] for e in engines):  # results of a run before the floor was measured
            continue
        ys = [best[e][side]["wall"] * 1000 for e in engines]
        ax.bar([x + offset for x in range(len(engines))], ys, width=0.27, color=color, hatch=hatch, label=label)
        if side != "once":
            for x, e in enumerate(engines):
                ratio = best[e][side]["wall"] / best[e]["once"]["wall"]
                ax.text(x + offset, ys[x], f"{ratio:.2f}x", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(engines)), engines, fontsize=8)
    ax.set_ylabel("ms (best of runs)")
    ax.set_title(f"Full read of {p['read_base']:,} live rows", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[3]
    d = m["delete"]["best"]
    names = list(d)
    ys = [d[k]["wall"] for k in names]
    ax.bar(names, ys, color=[COLORS["lakefmt"], "#969696"])
    for x, y in enumerate(ys):
        ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("seconds (best of runs)")
    ax.set_title(f"Delete {m['delete']['rows_deleted']:,} keys (1%) of {p['delete_base']:,}", fontsize=9)
    if cycle:
        ax = axes[4]
        xs = [c["commit"] for c in cycle]
        ax.plot(xs, [c["ratio"] for c in cycle], "o-", color=COLORS["lakefmt"], label="to_arrow, vs written at once")
        ax.axhline(1.3, color="#969696", linestyle="--", linewidth=1, label="target 1.3x")
        for c in cycle:
            ax.text(c["commit"], c["ratio"], str(c["files"]), ha="center", va="bottom", fontsize=6)
        ax.set_ylim(0.8, max(1.4, max(c["ratio"] for c in cycle) + 0.1))
        ax.set_xlabel("upsert commit (labels: files in the table)")
        ax.set_ylabel("read time ratio (best of 5)")
        ax.set_title("The read after each of the last upserts", fontsize=9)
        ax.legend(fontsize=7)
    _finish(fig, out, "key_tables.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plots", description=__doc__)
    parser.add_argument("--results", type=Path, default=PACKAGE_DIR / "results")
    parser.add_argument("--out", type=Path, default=REPO_DIR / "docs" / "img")
    parser.add_argument("--quick", action="store_true", help="plot the --quick results")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def load(name: str) -> dict[str, Any] | None:
        return _load(args.results, name, args.quick)

    speed, scaling = load("commit_speed"), load("commit_scaling")
    plot_commit_times(plt, speed, scaling, args.out)
    plot_metadata_bytes(plt, speed, scaling, args.out)
    if speed is not None:
        plot_commit_speed(plt, speed, args.out)
    planning = load("planning")
    if planning is not None:
        plot_planning(plt, planning, args.out)
    s3 = load("s3_requests")
    if s3 is not None:
        plot_s3_requests(plt, s3, args.out)
    plot_ratios(plt, [r for r in (load("manifest_merge"), load("io_overhead")) if r is not None], args.out)
    engines = load("engines")
    if engines is not None:
        plot_engines(plt, engines, args.out)
    plot_compaction(plt, load("delta_optimize"), load("compaction"), load("compaction_stream"), args.out)
    evo = load("schema_evolution")
    if evo is not None:
        plot_schema_evolution(plt, evo, args.out)
    kt = load("key_tables")
    if kt is not None:
        plot_key_tables(plt, kt, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
