"""Key tables (primary keys, upserts and deletes by deletion vectors), side by side with their peers and limits.

The rows: ``id`` int64 (the primary key), ``v`` float64 and ``s`` string (about 10 characters); a table of N rows
holds ids 0..N-1, written in one commit. An upsert batch of U rows has U/2 ids of live rows (random, replaced) and
U/2 new ids, shuffled. lakefmt's key tables have ``bucket`` = 4. Every upsert and delete runs on a fresh copy of
its table (data files hard-linked, outside the timing) with lakefmt's in-process cache of data files' keys cleared
first (``key_cache_clear``): each measures a writer that has never seen the table, as deltalake's does.

1. **upsert 1M rows (half new) into 10M** against deltalake's ``merge(...).when_matched_update_all()
   .when_not_matched_insert_all()`` (target ≤ 0.5x), and pyiceberg's ``upsert`` at 100k into 1M (informative).
2. **upsert 100k into 1M, 10M, 50M rows**: lakefmt's time at 50M over its time at 1M (target ≤ 1.5), and
   deltalake's merge on the same tables for comparison.
3. **peak RSS** of the 1M-row upsert into 50M, in a fresh process (``VmHWM``, interpreter and imports
   included): target ≤ 2 GiB; deltalake's merge of the same is reported.
4. **full read after 100 upsert commits of 1% each** (ids of live rows, so the live row count stays N = 1M),
   against the same live rows written at once into a fresh key table: ``scan().to_arrow()``, DuckDB
   (``to_duckdb()``: count, sum of ``v``, max of ``s``) and Polars (``to_polars()``, the same aggregates); target
   ≤ 1.3x each. The table keeps its default options (automatic compaction of a bucket's files included). The
   floor is measured beside them: each engine's own read of the upserted table's data files with no mask
   (``pyarrow.dataset``, DuckDB's ``read_parquet``, Polars' ``scan_parquet``: the deleted rows counted too),
   which no reader that masks them can beat.
2b. **string keys**: the same upsert of 100k rows into tables of 1M and 10M rows whose key is a string
   (``order-<id>``, up to 14 characters), looked up through their hashed key index files: lakefmt's time at 10M
   over its time at 1M (target ≤ 1.5, as for integer keys), and the same upsert with the key index files
   deleted (the writer then reads and hashes the key column of every file of each touched bucket).
5. **write into a key table**, Paimon's ``TableWriterBenchmark`` shape: an int key and 20 strings of 10 random
   characters, one bucket, 3M rows in one commit, in a fresh process pinned to one core (Arrow's CPU pool 1 thread):
   target ≥ 100k rows/s.
6. **delete by key of 1% of the rows** (random ids of a 10M-row table): ``delete_keys`` on the key table
   (deletion vectors) against ``delete(pc.field("id").isin(ids))`` on a table without key written the same way
   (copy-on-write: every file holding a deleted row is rewritten): target ≤ 0.3x.

Sizes: the figures above are the full sizes; ``--quick`` divides them by 1,000 (by 100 for the write), and the
environment variable ``LAKEFMT_BENCH_KEY_SCALE`` (a factor, e.g. ``0.1``) scales the full sizes. Wall and CPU time
(the process's, all threads) are recorded for every side; targets are checked on the best wall time of the reps.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import lakefmt
from benchmarks.common import Comparison, Result, drop_tree, run_child
from benchmarks.peers import PEERS_DIR, SETUP_HINT, python_for
from lakefmt.rewrite.keys.planners import key_cache_clear

NAME = "key_tables"
SCALE_ENV = "LAKEFMT_BENCH_KEY_SCALE"
BUCKETS = 4
CHUNK = 1 << 20
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.float64()), ("s", pa.string())])
GIB = 1 << 30
TARGETS = {"merge": 0.5, "scaling": 1.5, "rss": 2 * GIB, "read": 1.3, "write": 100_000.0, "delete": 0.3}
STRING_SCHEMA = pa.schema([pa.field("id", pa.string(), nullable=False), ("v", pa.float64()), ("s", pa.string())])


# -- sizes ------------------------------------------------------------------------------------------------------
def sizes(quick: bool) -> dict[str, Any]:
    scale = 0.001 if quick else float(os.environ.get(SCALE_ENV, "1"))

    def n(x: int, floor: int = 100) -> int:
        return max(floor, int(x * scale))

    return {
        "scale": scale,
        "merge_base": n(10_000_000), "merge_rows": n(1_000_000),
        "iceberg_base": n(1_000_000), "iceberg_rows": n(100_000),
        "scaling_bases": [n(1_000_000), n(10_000_000), n(50_000_000)], "scaling_rows": n(100_000),
        "rss_base": n(50_000_000), "rss_rows": n(1_000_000),
        "read_base": n(1_000_000), "read_commits": 100 if not quick else 20,
        "write_rows": max(3_000, int(3_000_000 * (scale * 10 if quick else scale))),
        "delete_base": n(10_000_000), "delete_fraction": 0.01,
        "reps": 1 if quick else 3, "big_reps": 1 if quick else 2,
    }


# -- rows -------------------------------------------------------------------------------------------------------
def rows(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.asarray(ids, dtype=np.int64)
    s = pc.cast(pa.array((ids * 7919 + 1_000_000_007) % 10_000_000_000), pa.string())
    return pa.table({"id": pa.array(ids), "v": rng.random(len(ids)), "s": s}, schema=SCHEMA)


def write_source(path: Path, n: int) -> Path:
    """ids 0..n-1 as a Parquet file (each 1 Mi-row chunk seeded by its number: every size is a prefix of the
    larger ones)."""
    if path.exists():
        return path
    with pq.ParquetWriter(path, SCHEMA) as w:
        for k, lo in enumerate(range(0, n, CHUNK)):
            w.write_table(rows(np.arange(lo, min(n, lo + CHUNK)), seed=k))
    return path


def read_source(path: Path) -> pa.RecordBatchReader:
    pf = pq.ParquetFile(path)
    return pa.RecordBatchReader.from_batches(SCHEMA, pf.iter_batches(batch_size=CHUNK))


def upsert_batch(n_base: int, n: int, seed: int) -> pa.Table:
    """n rows: n/2 random live ids of a table of ids 0..n_base-1, and n - n/2 new ids, shuffled."""
    rng = np.random.default_rng(seed)
    old = rng.choice(n_base, n // 2, replace=False)
    ids = np.concatenate([old, np.arange(n_base, n_base + n - n // 2)])
    rng.shuffle(ids)
    return rows(ids, seed + 1000)


def string_keyed(table: pa.Table) -> pa.Table:
    """``table`` with its int64 ``id`` as the string ``order-<id>``."""
    prefix = pa.array(["order-"] * table.num_rows, pa.string())
    key = pc.binary_join_element_wise(prefix, pc.cast(table.column("id"), pa.string()), "")
    return pa.table({"id": key, "v": table.column("v"), "s": table.column("s")}, schema=STRING_SCHEMA)


# -- tables and copies ------------------------------------------------------------------------------------------
def _link(src: str, dst: str) -> None:
    """Data files (and deletion-vector files) are immutable: hard-link them; copy the rest."""
    if src.endswith((".parquet", ".puffin", ".keyindex")):
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)


def copy_table(src: Path, dst: Path) -> Path:
    drop_tree(dst)
    shutil.copytree(src, dst, copy_function=_link)
    return dst


def key_table(path: Path, source: Path | None = None, *, buckets: int = BUCKETS) -> lakefmt.Table:
    table = lakefmt.create_table(str(path), SCHEMA, primary_key=["id"], options={"bucket": str(buckets)})
    if source is not None:
        table.append(read_source(source))
    return table


def timed_once(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def lakefmt_upsert(master: Path, work: Path, updates: pa.Table) -> dict[str, float]:
    folder = copy_table(master, work)
    key_cache_clear()
    wall, cpu, _ = timed_once(lambda: lakefmt.open_table(str(folder)).upsert(updates))
    drop_tree(folder)
    return {"wall": wall, "cpu": cpu}


# -- peers ------------------------------------------------------------------------------------------------------
def _peer(action: str, timeout: float = 3600, **kw: Any) -> dict[str, Any]:
    python = python_for("deltalake")
    if python is None:
        raise RuntimeError(f"deltalake is not set up: {SETUP_HINT}")
    cmd = [str(python), str(PEERS_DIR / "delta_merge.py"), action]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"peer {action} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def delta_merge(master: Path, work: Path, updates: Path) -> dict[str, Any]:
    folder = copy_table(master, work)
    out = _peer("merge", root=folder, updates=updates)
    drop_tree(folder)
    return {"wall": out["seconds"], "cpu": out["cpu"], "maxrss": out["maxrss"], "updated": out["updated"],
            "inserted": out["inserted"], "version": out["version"]}


# -- the benchmark ----------------------------------------------------------------------------------------------
def run(quick: bool, workdir: Path) -> Result:
    sz = sizes(quick)
    result = Result(NAME, "quick" if quick else "full", {
        **sz, "columns": "id int64 (primary key), v float64, s string", "bucket": BUCKETS,
        "statistic": "best wall time of reps (CPU: the same run's)", "scale_env": SCALE_ENV,
    })
    base = workdir / NAME
    drop_tree(base)
    base.mkdir(parents=True)
    peer = python_for("deltalake") is not None
    metrics: dict[str, Any] = {"peers": peer}
    log = _logger()

    # sources and tables of every size, once
    all_sizes = sorted({sz["merge_base"], sz["iceberg_base"], *sz["scaling_bases"], sz["rss_base"],
                        sz["delete_base"]})
    largest = write_source(base / f"source-{all_sizes[-1]}.parquet", all_sizes[-1])
    sources = {n: (largest if n == all_sizes[-1] else write_source(base / f"source-{n}.parquet", n))
               for n in all_sizes}
    lake: dict[int, Path] = {}
    delta: dict[int, Path] = {}
    build: dict[str, dict[str, float]] = {"lakefmt": {}, "deltalake": {}}
    for n in all_sizes:
        lake[n] = base / f"lakefmt-{n}"
        key_cache_clear()
        build["lakefmt"][str(n)] = timed_once(lambda n=n: key_table(lake[n], sources[n]))[0]
        if peer and n in (*sz["scaling_bases"], sz["merge_base"], sz["rss_base"]):
            delta[n] = base / f"delta-{n}"
            build["deltalake"][str(n)] = _peer("build", root=delta[n], source=sources[n])["seconds"]
        log(f"built tables of {n:,} rows")
    metrics["build_s"] = build
    key_cache_clear()

    def updates_file(n_base: int, n: int, seed: int) -> tuple[pa.Table, Path]:
        tab = upsert_batch(n_base, n, seed)
        path = base / f"updates-{n_base}-{n}.parquet"
        pq.write_table(tab, path)
        return tab, path

    def compare_upsert(n_base: int, n: int, reps: int, with_delta: bool) -> dict[str, Any]:
        tab, path = updates_file(n_base, n, seed=n_base % 997 + n % 991)
        runs: dict[str, list[dict[str, Any]]] = {"lakefmt": [], "deltalake": []}
        for rep in range(reps):
            order = ["lakefmt", "deltalake"] if rep % 2 == 0 else ["deltalake", "lakefmt"]
            for side in order:
                if side == "lakefmt":
                    runs[side].append(lakefmt_upsert(lake[n_base], base / "work-lakefmt", tab))
                elif with_delta:
                    runs[side].append(delta_merge(delta[n_base], base / "work-delta", path))
        out = {side: min(r, key=lambda x: x["wall"]) for side, r in runs.items() if r}
        out["runs"] = runs
        log(f"upsert {n:,} into {n_base:,}: " + ", ".join(
            f"{s} {out[s]['wall']:.2f} s" for s in ("lakefmt", "deltalake") if s in out))
        return out

    # 1. upsert 1M into 10M against deltalake's merge, and 100k into 1M against pyiceberg's upsert
    m = compare_upsert(sz["merge_base"], sz["merge_rows"], sz["big_reps"], peer)
    metrics["merge"] = m
    label = f"upsert {_n(sz['merge_rows'])} (half new) into {_n(sz['merge_base'])}"
    if peer:
        d = m["deltalake"]
        result.comparisons += [
            Comparison(f"{label}, vs deltalake merge", m["lakefmt"]["wall"], d["wall"], "s",
                       m["lakefmt"]["wall"] / d["wall"], TARGETS["merge"], "ratio<="),
            Comparison(f"{label}, CPU time vs deltalake merge", m["lakefmt"]["cpu"], d["cpu"], "s",
                       m["lakefmt"]["cpu"] / d["cpu"]),
        ]
        tab, path = updates_file(sz["iceberg_base"], sz["iceberg_rows"], seed=7)
        lk = [lakefmt_upsert(lake[sz["iceberg_base"]], base / "work-lakefmt", tab) for _ in range(sz["reps"])]
        try:
            ice = _peer("iceberg", timeout=1800, root=base / "iceberg", source=sources[sz["iceberg_base"]],
                        updates=path, reps=1)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            ice = None
            result.notes.append(f"pyiceberg's upsert did not complete: {str(exc)[:300]}")
        drop_tree(base / "iceberg")
        best = min(lk, key=lambda x: x["wall"])
        metrics["iceberg"] = {"lakefmt": best, "lakefmt_runs": lk, "pyiceberg": ice}
        if ice is not None:
            w, c = min(ice["seconds"]), min(ice["cpu"])
            result.comparisons += [
                Comparison(f"upsert {_n(sz['iceberg_rows'])} into {_n(sz['iceberg_base'])}, vs pyiceberg upsert",
                           best["wall"], w, "s", best["wall"] / w),
                Comparison(f"upsert {_n(sz['iceberg_rows'])} into {_n(sz['iceberg_base'])}, CPU vs pyiceberg",
                           best["cpu"], c, "s", best["cpu"] / c),
            ]
            log(f"pyiceberg upsert {w:.2f} s, lakefmt {best['wall']:.2f} s")
    else:
        result.notes.append(f"deltalake and pyiceberg are not set up ({SETUP_HINT}): the peer comparisons are left out")

    # 2. upsert 100k into 1M, 10M, 50M
    scaling = {str(nb): compare_upsert(nb, sz["scaling_rows"], sz["reps"] if nb < max(sz["scaling_bases"])
                                       else sz["big_reps"], peer) for nb in sz["scaling_bases"]}
    metrics["scaling"] = scaling
    small, large = (str(x) for x in (sz["scaling_bases"][0], sz["scaling_bases"][-1]))
    lab = f"upsert {_n(sz['scaling_rows'])}: into {_n(int(large))} vs into {_n(int(small))}"
    result.comparisons.append(Comparison(
        f"{lab}, lakefmt", scaling[large]["lakefmt"]["wall"], scaling[small]["lakefmt"]["wall"], "s",
        scaling[large]["lakefmt"]["wall"] / scaling[small]["lakefmt"]["wall"], TARGETS["scaling"], "ratio<="))
    if peer:
        result.comparisons.append(Comparison(
            f"{lab}, deltalake merge", scaling[large]["deltalake"]["wall"], scaling[small]["deltalake"]["wall"], "s",
            scaling[large]["deltalake"]["wall"] / scaling[small]["deltalake"]["wall"]))
        result.comparisons.append(Comparison(
            f"upsert {_n(sz['scaling_rows'])} into {_n(int(large))}, vs deltalake merge",
            scaling[large]["lakefmt"]["wall"], scaling[large]["deltalake"]["wall"], "s",
            scaling[large]["lakefmt"]["wall"] / scaling[large]["deltalake"]["wall"]))

    # 2b. the same with string keys (hashed key index files), 1M and 10M
    metrics["string_keys"] = string_key_scaling(base, sz, sources, result, log)

    # 3. peak RSS of the 1M upsert into 50M, in a fresh process
    tab, path = updates_file(sz["rss_base"], sz["rss_rows"], seed=11)
    folder = copy_table(lake[sz["rss_base"]], base / "work-rss")
    rss = run_child(f"benchmarks.{NAME}", ["upsert", "--root", str(folder), "--updates", str(path)])
    drop_tree(folder)
    metrics["rss"] = {"lakefmt": rss}
    lab = f"peak RSS, upsert {_n(sz['rss_rows'])} into {_n(sz['rss_base'])}"
    result.comparisons.append(Comparison(f"{lab}, vs 2 GiB budget", rss["maxrss"], TARGETS["rss"], "B",
                                         rss["maxrss"] / TARGETS["rss"], 1.0, "ratio<="))
    if peer:
        d = delta_merge(delta[sz["rss_base"]], base / "work-delta", path)
        metrics["rss"]["deltalake"] = d
        result.comparisons.append(Comparison(f"{lab}, vs deltalake merge", rss["maxrss"], d["maxrss"], "B",
                                             rss["maxrss"] / d["maxrss"]))
    log(f"peak RSS {rss['maxrss'] / GIB:.2f} GiB ({rss['seconds']:.2f} s)")

    # 4. full read after 100 upsert commits of 1% each, against the same live rows written at once
    metrics["read"] = read_after_commits(base, sz, result, log)

    # 5. Paimon's TableWriterBenchmark shape, one core
    write = run_child(f"benchmarks.{NAME}", ["write", "--root", str(base / "write"), "--rows", str(sz["write_rows"])])
    drop_tree(base / "write")
    metrics["write"] = write
    rate = write["rows"] / write["seconds"]
    result.comparisons.append(Comparison(
        f"write {_n(write['rows'])} rows (int key + 20 strings), 1 bucket, 1 core: rows/s vs 100k/s",
        rate, TARGETS["write"], "rows/s", rate / TARGETS["write"], 1.0, "ratio>="))
    log(f"write {rate:,.0f} rows/s")

    # 6. delete 1% by key: deletion vectors against copy-on-write
    metrics["delete"] = delete_by_key(base, sz, lake[sz["delete_base"]], sources[sz["delete_base"]], result, log)

    result.metrics = metrics
    result.notes.append(
        "lakefmt's upserts and deletes include opening the table, finding the live rows of the keys (through the "
        "key index files beside the data files of each touched bucket; the process's cache of keys is cleared "
        "before each run), writing the rows and deletion vectors, and the commit; deltalake's merge includes "
        "opening its table.")
    drop_tree(base)
    return result


def read_after_commits(base: Path, sz: dict[str, Any], result: Result, log: Callable[[str], None]) -> dict[str, Any]:
    import duckdb

    n, commits = sz["read_base"], sz["read_commits"]
    step = max(1, n // 100)
    many = key_table(base / "read-many", write_source(base / f"source-{n}.parquet", n))
    commit_s = 0.0
    last = 10  # the reads after each of the last commits: where commit 100 falls in the compaction cycle
    by_commit: list[tuple[int, float, int, int]] = []  # (commit, best to_arrow wall, files, rows on disk)
    for k in range(commits):
        rng = np.random.default_rng(5000 + k)
        t0 = time.perf_counter()
        many.upsert(rows(rng.choice(n, step, replace=False), seed=6000 + k))
        commit_s += time.perf_counter() - t0
        if k >= commits - last:  # read as a reader would: a table opened apart from the writer's
            reader = lakefmt.open_table(str(base / "read-many"))
            files = reader.files()
            best = min(timed_once(lambda reader=reader: reader.scan().to_arrow())[0] for _ in range(5))
            by_commit.append((k + 1, best, len(files), sum(f.row_count for f in files)))
    many = lakefmt.open_table(str(base / "read-many"))
    live = many.scan().to_arrow()
    if live.num_rows != n:
        raise RuntimeError(f"{live.num_rows} live rows after the upserts, expected {n}")
    once = key_table(base / "read-once")
    once.append(live)
    once = lakefmt.open_table(str(base / "read-once"))
    del live
    con = duckdb.connect()

    def arrow(t: lakefmt.Table) -> Any:
        return t.scan().to_arrow().num_rows

    def duck(t: lakefmt.Table) -> Any:
        return t.scan().to_duckdb(con).aggregate("count(*), sum(v), max(s)").fetchall()

    def polars(t: lakefmt.Table) -> Any:
        import polars as pl

        return t.scan().to_polars().select(pl.len(), pl.col("v").sum(), pl.col("s").max()).collect().rows()

    # the floor: each engine's own read of the upserted table's files, no mask (rows on disk, deleted ones too)
    paths = [f.full_path for f in many.files()]
    on_disk = sum(f.row_count for f in many.files())

    def arrow_files() -> Any:
        return ds.dataset(paths, format="parquet").to_table().num_rows

    def duck_files() -> Any:
        return con.read_parquet(paths).aggregate("count(*), sum(v), max(s)").fetchall()

    def polars_files() -> Any:
        import polars as pl

        return pl.scan_parquet(paths).select(pl.len(), pl.col("v").sum(), pl.col("s").max()).collect().rows()

    engines = {"to_arrow": arrow, "duckdb": duck, "polars": polars}
    floors = {"to_arrow": arrow_files, "duckdb": duck_files, "polars": polars_files}
    times: dict[str, dict[str, list[tuple[float, float]]]] = {e: {"many": [], "once": [], "files": []}
                                                             for e in engines}
    reps = 2 if sz["reps"] == 1 else 5
    wrong: dict[str, int] = {}
    for engine, fn in engines.items():  # engine by engine (another engine's threads and memory in between are
        for rep in range(reps):  # noise); the sides take turns going first
            sides: list[tuple[str, Callable[[], Any], int]] = [
                ("many", lambda fn=fn: fn(many), n), ("once", lambda fn=fn: fn(once), n),
                ("files", floors[engine], on_disk)]
            for side, call, expected in sides[rep % 3:] + sides[:rep % 3]:
                wall, cpu, out = timed_once(call)
                times[engine][side].append((wall, cpu))
                counted = out if engine == "to_arrow" else out[0][0]
                if counted != expected:  # a wrong answer is reported with its time, not hidden
                    wrong.setdefault(f"{engine} ({side})", counted)
    files = {side: len(t.files()) for side, t in (("many", many), ("once", once))}
    once_arrow = min(w for w, _ in times["to_arrow"]["once"])
    cycle = [{"commit": c, "wall": w, "ratio": w / once_arrow, "files": f, "rows": r} for c, w, f, r in by_commit]
    out: dict[str, Any] = {"commit_s": commit_s, "files": files, "runs": times, "best": {}, "wrong_counts": wrong,
                           "to_arrow_after_each_of_the_last_commits": cycle}
    if cycle:
        ratios = [c["ratio"] for c in cycle]
        log(f"read to_arrow after each of commits {cycle[0]['commit']}-{cycle[-1]['commit']}: ratio mean "
            f"{np.mean(ratios):.2f}, max {max(ratios):.2f} (files {min(c['files'] for c in cycle)}-"
            f"{max(c['files'] for c in cycle)})")
    if wrong:
        result.notes.append(f"read after upserts: rows counted differ from the {n} live rows: {wrong}")
    for engine in engines:
        many_best = min(times[engine]["many"])
        once_best = min(times[engine]["once"])
        files_best = min(times[engine]["files"])
        out["best"][engine] = {"many": {"wall": many_best[0], "cpu": many_best[1]},
                               "once": {"wall": once_best[0], "cpu": once_best[1]},
                               "files": {"wall": files_best[0], "cpu": files_best[1]}}
        bad = [k for k in wrong if k.startswith(engine)]
        result.comparisons.append(Comparison(
            f"read {_n(n)} live rows after {commits} upserts of 1% vs written at once, {engine}"
            + (" (WRONG ROW COUNT)" if bad else ""),
            many_best[0], once_best[0], "s", many_best[0] / once_best[0], TARGETS["read"], "ratio<="))
        result.comparisons.append(Comparison(
            f"read after {commits} upserts: the same files read by {engine} without the mask, vs written at once",
            files_best[0], once_best[0], "s", files_best[0] / once_best[0], None, None))
        log(f"read {engine}: {many_best[0] * 1e3:.0f} ms vs {once_best[0] * 1e3:.0f} ms (the files alone, no "
            f"mask: {files_best[0] * 1e3:.0f} ms)")
    drop_tree(base / "read-many")
    drop_tree(base / "read-once")
    return out


def string_table(path: Path, source: Path) -> None:
    """A key table of string keys (``string_keyed``) holding the rows of ``source``, in one append."""
    table = lakefmt.create_table(str(path), STRING_SCHEMA, primary_key=["id"], options={"bucket": str(BUCKETS)})

    def batches() -> Any:
        for batch in read_source(source):
            yield from string_keyed(pa.Table.from_batches([batch])).to_batches()

    table.append(pa.RecordBatchReader.from_batches(STRING_SCHEMA, batches()))


def string_key_scaling(base: Path, sz: dict[str, Any], sources: dict[int, Path], result: Result,
                       log: Callable[[str], None]) -> dict[str, Any]:
    small, large = sz["scaling_bases"][0], sz["scaling_bases"][1]
    n = sz["scaling_rows"]
    out: dict[str, Any] = {}
    for n_base in (small, large):
        master = base / f"strings-{n_base}"
        build_s = timed_once(lambda master=master, n_base=n_base: string_table(master, sources[n_base]))[0]
        updates = string_keyed(upsert_batch(n_base, n, seed=n_base % 997 + 13))
        runs = [lakefmt_upsert(master, base / "work-strings", updates) for _ in range(sz["reps"])]
        # without key index files: the writer reads and hashes the key columns of the touched buckets' files
        bare = copy_table(master, base / "strings-bare")
        for index in bare.rglob("*.keyindex"):
            index.unlink()
        plain = [lakefmt_upsert(bare, base / "work-strings", updates) for _ in range(sz["big_reps"])]
        drop_tree(bare)
        drop_tree(master)
        best, best_plain = min(runs, key=lambda r: r["wall"]), min(plain, key=lambda r: r["wall"])
        out[str(n_base)] = {"build_s": build_s, "indexed": best, "indexed_runs": runs, "no_index": best_plain,
                            "no_index_runs": plain}
        log(f"string keys: upsert {n:,} into {n_base:,}: {best['wall']:.2f} s (without key index files "
            f"{best_plain['wall']:.2f} s); built in {build_s:.1f} s")
    lo, hi = out[str(small)]["indexed"]["wall"], out[str(large)]["indexed"]["wall"]
    lab = f"string keys, upsert {_n(n)}: into {_n(large)} vs into {_n(small)}"
    result.comparisons.append(Comparison(lab, hi, lo, "s", hi / lo, TARGETS["scaling"], "ratio<="))
    plain_hi = out[str(large)]["no_index"]["wall"]
    result.comparisons.append(Comparison(
        f"string keys, upsert {_n(n)} into {_n(large)}: key index files vs none", hi, plain_hi, "s", hi / plain_hi))
    return out


def delete_by_key(base: Path, sz: dict[str, Any], key_master: Path, source: Path, result: Result,
                  log: Callable[[str], None]) -> dict[str, Any]:
    n = sz["delete_base"]
    cow_master = base / f"cow-{n}"
    cow = lakefmt.create_table(str(cow_master), SCHEMA)
    cow.append(read_source(source))
    rng = np.random.default_rng(99)
    ids = pa.array(np.sort(rng.choice(n, max(1, int(n * sz["delete_fraction"])), replace=False)))
    keys = pa.table({"id": ids})
    flt = pc.field("id").isin(ids)
    deleted: dict[str, int] = {}

    def dv() -> None:
        folder = copy_table(key_master, base / "work-dv")
        key_cache_clear()
        wall, cpu, snap = timed_once(lambda: lakefmt.open_table(str(folder)).delete_keys(keys))
        deleted["dv"] = -snap.delta_record_count
        runs["deletion vectors"].append((wall, cpu))
        drop_tree(folder)

    def rewrite() -> None:
        folder = copy_table(cow_master, base / "work-cow")
        wall, cpu, snap = timed_once(lambda: lakefmt.open_table(str(folder)).delete(flt))
        deleted["cow"] = -snap.delta_record_count
        runs["copy-on-write"].append((wall, cpu))
        drop_tree(folder)

    runs: dict[str, list[tuple[float, float]]] = {"deletion vectors": [], "copy-on-write": []}
    for rep in range(sz["big_reps"]):
        for side in (dv, rewrite) if rep % 2 == 0 else (rewrite, dv):
            side()
    if deleted["dv"] != len(ids) or deleted["cow"] != len(ids):
        raise RuntimeError(f"deleted {deleted}, expected {len(ids)} rows each")
    files = len(cow.files())
    drop_tree(cow_master)
    a, b = min(runs["deletion vectors"]), min(runs["copy-on-write"])
    lab = f"delete {_n(len(ids))} keys (1%) of {_n(n)}"
    result.comparisons += [
        Comparison(f"{lab}, deletion vectors vs copy-on-write", a[0], b[0], "s", a[0] / b[0], TARGETS["delete"],
                   "ratio<="),
        Comparison(f"{lab}, CPU time, deletion vectors vs copy-on-write", a[1], b[1], "s", a[1] / b[1]),
    ]
    log(f"delete by key: {a[0]:.2f} s vs copy-on-write {b[0]:.2f} s ({files} files rewritten)")
    return {"runs": runs, "best": {"deletion vectors": {"wall": a[0], "cpu": a[1]},
                                   "copy-on-write": {"wall": b[0], "cpu": b[1]}},
            "rows_deleted": len(ids), "cow_files": files}


def _n(x: int | float) -> str:
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if x >= div:
            return f"{x / div:g}{suffix}"
    return f"{x:g}"


def _logger() -> Callable[[str], None]:
    t0 = time.perf_counter()

    def log(text: str) -> None:
        print(f"[{NAME}] {time.perf_counter() - t0:6.1f} s  {text}", flush=True)

    return log


# -- child processes --------------------------------------------------------------------------------------------
def _maxrss() -> int:
    """This process's peak RSS in bytes: VmHWM (ru_maxrss would carry the parent's peak over fork and exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child_upsert(args: argparse.Namespace) -> dict[str, Any]:
    updates = pq.read_table(args.updates)
    wall, cpu, _ = timed_once(lambda: lakefmt.open_table(args.root).upsert(updates))
    return {"seconds": wall, "cpu": cpu, "maxrss": _maxrss(), "rows": updates.num_rows}


def paimon_rows(n: int, seed: int = 1) -> pa.Table:
    """Paimon's TableWriterBenchmark rows: an int key and 20 strings of 10 random characters."""
    rng = np.random.default_rng(seed)
    offsets = pa.py_buffer(np.arange(0, 10 * (n + 1), 10, dtype=np.int32))
    cols: dict[str, Any] = {"k": pa.array(rng.permutation(n).astype(np.int32))}
    for i in range(20):
        data = pa.py_buffer(rng.integers(97, 123, size=10 * n, dtype=np.uint8))
        cols[f"f{i}"] = pa.Array.from_buffers(pa.string(), n, [None, offsets, data])
    strings = [pa.field(f"f{i}", pa.string()) for i in range(20)]
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), *strings])
    return pa.table(cols, schema=schema)


def _child_write(args: argparse.Namespace) -> dict[str, Any]:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pa.set_cpu_count(1)
    data = paimon_rows(args.rows)
    table = lakefmt.create_table(args.root, data.schema, primary_key=["k"], options={"bucket": "1"})
    wall, cpu, _ = timed_once(lambda: table.append(data))
    written = sum(f.file_size for f in table.files())
    return {"seconds": wall, "cpu": cpu, "rows": data.num_rows, "bytes_written": written, "maxrss": _maxrss(),
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}


def _child(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME} --child")
    ap.add_argument("action", choices=("upsert", "write"))
    ap.add_argument("--root", required=True)
    ap.add_argument("--updates")
    ap.add_argument("--rows", type=int, default=3_000_000)
    args = ap.parse_args(argv)
    out = _child_upsert(args) if args.action == "upsert" else _child_write(args)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--child"]:
        sys.exit(f"usage: python -m benchmarks.{NAME} --child upsert|write ...")
    sys.exit(_child(sys.argv[2:]))
