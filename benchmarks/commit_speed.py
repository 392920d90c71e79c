"""Commit speed against the peers: N append commits of 1,000 rows each to a new local table, by lakefmt and by
pypaimon, deltalake and pyiceberg, unpartitioned and partitioned by ``dt``, side by side in one run.

Every side appends the same deterministic rows (``events``: id, ts, user, amount, dt over 10 days, so each
commit's rows fall in 1 or 2 ``dt`` values) with its usual one-call-per-commit API, and each whole append (data
file write + commit) is timed with ``perf_counter``: lakefmt ``Table.append`` here in this process; the peers in
their own virtualenvs (``tools/bench-setup.sh``), each by its script in ``benchmarks/peers/`` in a fresh process.

Compared, per partitioning: lakefmt's total against the fastest peer's (target ratio <= 0.5), and one
informative ratio per peer. lakefmt fsyncs what it writes on local disk and the peers do not, so lakefmt also
runs with ``write.fsync=false`` (side ``lakefmt-nofsync``: as durable as the peers), compared informatively. A
peer that stopped on its time budget (pyiceberg's appends slow down as its table grows) is compared on the
commits it did: the sum of the first k commit times of both sides. Every side's per-commit times (for the
commit time vs commit number plot), metadata bytes and versions are in ``metrics``. A peer whose virtualenv is
missing is skipped with a note; the full run is meant to have them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, events, median, tree_size
from benchmarks.peers import PEERS, SETUP_HINT, python_for, run_peer
from benchmarks.peers.harness import time_slices

NAME = "commit_speed"
TARGET_RATIO = 0.5
ROWS = 1000
DAYS = 10
#: Seconds of appends after which a peer stops (it reports the commits it did). pyiceberg's append cost grows
#: with the table (~18x over 300 commits), so 1,000 of them would take far longer than the rest of the run.
BUDGET_S = {
    "quick": {"pypaimon": 60.0, "deltalake": 60.0, "pyiceberg": 25.0},
    "full": {"pypaimon": 600.0, "deltalake": 600.0, "pyiceberg": 240.0},
}
LAKEFMT_META_DIRS = ("snapshot", "manifest", "schema")
#: lakefmt's sides: default options (the target), and without fsync, as durable as the peers' local writers; both
#: ``write-only`` (no automatic compaction or expiration, which the peers' writers do not do either: the cost of
#: lakefmt's default maintenance is the benchmark ``auto_maintenance``'s)
LAKEFMT_SIDES = {"lakefmt": {"write-only": "true"}, "lakefmt-nofsync": {"write.fsync": "false", "write-only": "true"}}


def run(quick: bool, workdir: Path) -> Result:
    mode = "quick" if quick else "full"
    n_commits = 100 if quick else 1000
    budgets = BUDGET_S[mode]
    root = workdir / NAME
    result = Result(NAME, mode, {
        "commits": n_commits, "rows_per_commit": ROWS, "dt_values": DAYS, "storage": "local",
        "partitionings": ["unpartitioned", "partitioned by dt"],
        "timed": "each whole append: data file write + commit, perf_counter",
        "peer_time_budget_s": budgets,
    })
    available = [p for p in PEERS if python_for(p) is not None]
    for peer in PEERS:
        if peer not in available:
            result.notes.append(f"peer {peer} not set up: {SETUP_HINT}")
    data = events(n_commits * ROWS, days=DAYS)
    versions: dict[str, str] = {"lakefmt": lakefmt.__version__}
    pyarrow_versions: dict[str, str] = {}
    peer_notes: dict[str, list[str]] = {}

    for k, partitioned in enumerate((False, True)):
        label = "partitioned" if partitioned else "unpartitioned"
        sides: dict[str, dict[str, Any]] = {}
        order = [*LAKEFMT_SIDES, *available]
        order = order[k % len(order):] + order[: k % len(order)]  # rotate: spread drift over the sides
        for side in order:
            where = root / label / side
            if side in LAKEFMT_SIDES:
                sides[side] = _lakefmt_side(where, data, n_commits, partitioned, LAKEFMT_SIDES[side])
                continue
            out = run_peer(side, root=where, commits=n_commits, rows=ROWS, partitioned=partitioned,
                           time_budget=budgets[side], timeout=budgets[side] + 600)
            versions[side] = out["version"]
            pyarrow_versions[side] = out["pyarrow"]
            for note in out.get("notes", []):
                if note not in peer_notes.setdefault(side, []):
                    peer_notes[side].append(note if "stopped on" not in note else f"{label}: {note}")
            sides[side] = _summary(out["commit_s"], out["metadata_bytes"], out["metadata_files"],
                                   {key: out[key] for key in ("catalog_bytes",) if key in out})
        _store(result.metrics, label, sides)
        result.comparisons += _compare(label, sides)

    pyarrow_versions["lakefmt"] = pa.__version__
    result.metrics["versions"] = versions
    result.metrics["pyarrow"] = pyarrow_versions
    result.notes.append("lakefmt: one Table.append(batch) per append on one Table object, in the benchmark's "
                        "process (the peers run in fresh processes of their own virtualenvs); default options "
                        "but write-only (no automatic maintenance, as the peers' writers), and write.fsync=false "
                        "for side lakefmt-nofsync.")
    result.notes.append(
        "Durability differs: on local disk lakefmt (default write.fsync=true) fsyncs each data and metadata file "
        "before a snapshot can reference it and the snapshot folder after a publish; pypaimon and deltalake issue "
        "no fsync at all, pyiceberg only its sqlite catalog's (about 5 fdatasyncs per append), as counted with "
        "strace on the pinned versions. Side lakefmt-nofsync (write.fsync=false) matches the peers' durability."
    )
    result.notes.append(
        "metrics.total_s sums the commits each side did (metrics.metadata[...].commits): a peer stopped on its "
        "time budget did fewer; the comparisons use the same number of commits on both sides."
    )
    result.notes.append(
        "metrics.metadata bytes: lakefmt and pypaimon = every file under the table except data *.parquet (snapshot/, "
        "manifest/, schema/); deltalake = every file under _delta_log/ (JSON commits + checkpoints); pyiceberg = "
        "every file under the table's metadata/ (metadata.json versions, manifest lists, manifests), its sqlite "
        "catalog apart (catalog_bytes)."
    )
    for peer, notes in peer_notes.items():
        result.notes += [f"{peer}: {n}" for n in notes]
    return result


def _lakefmt_side(where: Path, data: Any, n_commits: int, partitioned: bool,
                  options: dict[str, str]) -> dict[str, Any]:
    """Create a table at ``where`` with ``options`` and time ``n_commits`` appends of ``ROWS`` rows."""
    table = lakefmt.create_table(str(where), EVENTS_SCHEMA, partition_by=["dt"] if partitioned else None,
                                 options=options)
    commit_s = time_slices(table.append, data, ROWS)
    rows_read = table.to_arrow().num_rows
    if rows_read != n_commits * ROWS:
        raise RuntimeError(f"lakefmt table holds {rows_read} rows, expected {n_commits * ROWS}")
    meta_bytes = meta_files = 0
    for sub in LAKEFMT_META_DIRS:
        size, count = tree_size(where / sub)
        meta_bytes += size
        meta_files += count
    return _summary(commit_s, meta_bytes, meta_files, {"options": options})


def _summary(commit_s: list[float], meta_bytes: int, meta_files: int, extra: dict[str, Any]) -> dict[str, Any]:
    n = len(commit_s)
    tenth = max(1, n // 10)
    return {
        "commits_done": n,
        "total_s": sum(commit_s),
        "mean_s": sum(commit_s) / n,
        "median_s": median(commit_s),
        "median_first_10pct_s": median(commit_s[:tenth]),
        "median_last_10pct_s": median(commit_s[-tenth:]),
        "metadata_bytes": meta_bytes,
        "metadata_files": meta_files,
        "metadata_bytes_per_commit": meta_bytes / n,
        **extra,
        "commit_s": [round(x, 6) for x in commit_s],
    }


def _store(metrics: dict[str, Any], label: str, sides: dict[str, dict[str, Any]]) -> None:
    """Per layout and side: ``per_commit_s`` (every append's seconds, for the commit time vs commit number
    plot), ``total_s`` (of the commits the side did), ``metadata`` (bytes and files on disk after ``commits``
    commits) and ``summary`` (medians and the rest)."""
    meta_keys = ("metadata_bytes", "metadata_files", "metadata_bytes_per_commit", "catalog_bytes")
    canonical = [*LAKEFMT_SIDES, *PEERS]
    for side in sorted(sides, key=canonical.index):
        info = sides[side]
        metrics.setdefault("per_commit_s", {}).setdefault(label, {})[side] = info["commit_s"]
        metrics.setdefault("total_s", {}).setdefault(label, {})[side] = info["total_s"]
        meta = {"commits": info["commits_done"], "bytes": info["metadata_bytes"], "files": info["metadata_files"],
                "bytes_per_commit": info["metadata_bytes_per_commit"]}
        if "catalog_bytes" in info:
            meta["catalog_bytes"] = info["catalog_bytes"]
        metrics.setdefault("metadata", {}).setdefault(label, {})[side] = meta
        metrics.setdefault("summary", {}).setdefault(label, {})[side] = {
            k: v for k, v in info.items() if k != "commit_s" and k not in meta_keys
        }


def _compare(label: str, sides: dict[str, dict[str, Any]]) -> list[Comparison]:
    """lakefmt vs the fastest peer (target) and vs each peer (informative), then lakefmt without fsync vs the
    fastest peer (informative); each on the commits both sides did."""
    peers = {name: s["commit_s"] for name, s in sides.items() if name not in LAKEFMT_SIDES}
    if not peers:  # nothing to rank against: what fsync costs lakefmt is still worth a line
        return [_versus(label, "lakefmt", sides["lakefmt"]["commit_s"], "lakefmt write.fsync=false (no peer set up)",
                        sides["lakefmt-nofsync"]["commit_s"])]
    ours = sides["lakefmt"]["commit_s"]
    common = min(len(ours), *(len(c) for c in peers.values()))  # rank the peers on equal footing
    fastest = min(peers, key=lambda name: sum(peers[name][:common]))
    out = [_versus(label, "lakefmt", ours, f"fastest peer ({fastest})", peers[fastest], target=True)]
    out += [_versus(label, "lakefmt", ours, name, theirs) for name, theirs in peers.items()]
    out.append(_versus(label, "lakefmt write.fsync=false", sides["lakefmt-nofsync"]["commit_s"],
                       f"fastest peer ({fastest})", peers[fastest]))
    return out


def _versus(label: str, ours_name: str, ours: list[float], name: str, theirs: list[float],
            target: bool = False) -> Comparison:
    """Sum of the first k commit times of both sides, k = the commits both did."""
    k = min(len(ours), len(theirs))
    value, base = sum(ours[:k]), sum(theirs[:k])
    note = (f"{name} stopped on its time budget after {k} of {len(ours)} commits: both sides' first {k} commit "
            f"times summed" if k < len(ours) else f"{k} commits each, summed")
    return Comparison(f"{label}: {ours_name} vs {name}, total of {k} commits", value, base, "s", value / base,
                      TARGET_RATIO if target else None, "ratio<=" if target else None, note)
