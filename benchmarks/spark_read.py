"""Spark batch reads: ``pyspark_lakefmt.read`` (lakefmt plans, Spark's Parquet reader reads) against
``spark.read.parquet(*files)`` over the same files, with ``format("lakefmt")`` (the Python data source) beside.

The table: ``rows`` rows x 14 columns (``id`` int64 ascending, ``dt`` string of 4 partitions, ``f0..f7`` doubles,
``s0..s3`` strings), one file per append (``files`` files). Queries: ``count()``, ``sum(f0)``, ``max(s0), sum(f7),
min(s3)``, and ``where id < rows/1000`` then ``sum(f1)`` (0.1% of rows by the sorted column). A key table after
``upserts`` upserts of 1% of its rows each is read whole (``count()`` and ``sum(f0)``), against a key table holding
the same live rows written at once. One SparkSession (``local[2]``) in a child process; each query runs ``reps``
times per side, interleaved; best wall time and the CPU of the process tree (JVM + Python workers) reported.

Targets: native >= 0.9x Spark's Parquet reader's speed (ratio of times <= 1/0.9) on every query; the key table
after upserts <= 1.3x the time of the same rows written at once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import lakefmt
from benchmarks.common import LOG4J, Comparison, Result, drop_tree, progress, run_spark_child, tree_cpu_s

NAME = "spark_read"
SPEED_TARGET = 1 / 0.9  # native time / parquet time
KEY_TARGET = 1.3
QUERIES = ("count", "sum", "agg3", "filter")


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"rows": 1_000_000, "files": 8, "reps": 2, "key_rows": 200_000, "upserts": 5}
    return {"rows": 10_000_000, "files": 32, "reps": 3, "key_rows": 1_000_000, "upserts": 100}


def _batch(first: int, n: int, dt: str, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {"id": np.arange(first, first + n, dtype=np.int64), "dt": [dt] * n}
    for i in range(8):
        cols[f"f{i}"] = rng.random(n)
    words = np.array([f"w{k:05d}" for k in range(5000)])
    for i in range(4):
        cols[f"s{i}"] = words[rng.integers(0, 5000, n)]
    return pa.table(cols)


def _build(root: Path, sizes: dict[str, int]) -> dict[str, str]:
    per = sizes["rows"] // sizes["files"]
    wide = lakefmt.create_table(str(root / "wide"), _batch(0, 1, "d0", 0).schema, partition_by=["dt"])
    for k in range(sizes["files"]):
        wide.append(_batch(k * per, per, f"d{k % 4}", k))
    n = sizes["key_rows"]
    schema = _batch(0, 1, "d0", 0).schema
    keyed = lakefmt.create_table(str(root / "upserted"), schema, primary_key=["id"])
    keyed.append(_batch(0, n, "d0", 1))
    rng = np.random.default_rng(7)
    for u in range(sizes["upserts"]):
        ids = np.sort(rng.choice(n, n // 100, replace=False))
        batch = _batch(0, len(ids), "d0", 100 + u).set_column(0, "id", pa.array(ids, pa.int64()))
        keyed.upsert(batch)
    live = keyed.to_arrow().sort_by("id")
    once = lakefmt.create_table(str(root / "once"), schema, primary_key=["id"])
    once.append(live)
    return {"wide": str(root / "wide"), "upserted": str(root / "upserted"), "once": str(root / "once")}


def run(quick: bool, workdir: Path) -> Result:
    sizes = _sizes(quick)
    result = Result(NAME, "quick" if quick else "full", {
        **sizes, "columns": "id int64 (sorted), dt string (4 partitions), f0..f7 double, s0..s3 string",
        "spark": "local[2], one SparkSession, spark.sql.shuffle.partitions=2",
        "statistic": "best of reps (wall); CPU of the process tree for the same run",
    })
    root = workdir / NAME
    drop_tree(root)
    root.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        tables = _build(root, sizes)
        print(f"[{NAME}] tables written ({time.perf_counter() - t0:.1f} s)", flush=True)
        (root / "log4j2.properties").write_text(LOG4J)
        child = run_spark_child(NAME, "benchmarks.spark_read", ["--child", str(root), json.dumps(
            {"sizes": sizes, "tables": tables})])
    finally:
        drop_tree(root)
    best = child["best"]
    for q in QUERIES:
        n, p, lf = best[q]["native"], best[q]["parquet"], best[q]["lakefmt"]
        result.comparisons.append(Comparison(f"{q}: native vs Spark's Parquet reader (wall)", n["wall"], p["wall"],
                                             "s", n["wall"] / p["wall"], SPEED_TARGET, "ratio<="))
        result.comparisons.append(Comparison(f"{q}: format('lakefmt') vs Spark's Parquet reader (wall)", lf["wall"],
                                             p["wall"], "s", lf["wall"] / p["wall"]))
        if n["cpu"] is not None and p["cpu"] is not None:
            result.comparisons.append(Comparison(f"{q}: native vs Spark's Parquet reader (CPU)", n["cpu"], p["cpu"],
                                                 "s", n["cpu"] / p["cpu"]))
    for q in ("key_count", "key_sum"):
        u, o = best[q]["upserted"], best[q]["once"]
        result.comparisons.append(Comparison(f"{q}: key table after upserts vs written at once (native, wall)",
                                             u["wall"], o["wall"], "s", u["wall"] / o["wall"], KEY_TARGET, "ratio<="))
    result.metrics = child
    result.notes.append("filter: files read natively vs by Spark's reader: " + json.dumps(child["files_read"]))
    return result


# -- the child process ----------------------------------------------------------------------------------
def _queries(df: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    return {
        "count": lambda: df.count(),
        "sum": lambda: df.agg(F.sum("f0")).collect(),
        "agg3": lambda: df.agg(F.max("s0"), F.sum("f7"), F.min("s3")).collect(),
        "filter": lambda: df.where(F.col("id") < F.lit(LIMIT[0])).agg(F.sum("f1")).collect(),
    }


LIMIT = [0]


def _time(fn: Any) -> dict[str, float | None]:
    c0, t0 = tree_cpu_s(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    c1 = tree_cpu_s()
    return {"wall": wall, "cpu": None if c0 is None or c1 is None else c1 - c0}


def _best(runs: list[dict[str, float | None]]) -> dict[str, float | None]:
    return min(runs, key=lambda r: r["wall"] or 0.0)


def child(root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    import pyspark
    import pyspark_lakefmt
    from pyspark_lakefmt.session import local_session

    sizes, tables = spec["sizes"], spec["tables"]
    LIMIT[0] = sizes["rows"] // 1000
    spark = local_session("lakefmt-bench-spark-read", log_config=root / "log4j2.properties")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        uri = tables["wide"]
        files = [f.full_path for f in lakefmt.open_table(uri).files()]
        spark.conf.set("spark.sql.parquet.fieldId.read.enabled", "true")
        sides = {
            "native": lambda: pyspark_lakefmt.read(spark, uri),
            "parquet": lambda: spark.read.parquet(*files),
            "lakefmt": lambda: spark.read.format("lakefmt").load(uri),
        }
        runs: dict[str, dict[str, list[dict[str, float | None]]]] = {q: {s: [] for s in sides} for q in QUERIES}
        for make in sides.values():  # warm-up: JVM code, Python workers
            make().count()
        for rep in range(sizes["reps"]):
            names = list(sides)
            k = rep % len(names)
            for side in names[k:] + names[:k]:
                for q in QUERIES:
                    # the DataFrame is made inside the timing: planning is part of a read
                    r = _time(lambda side=side, q=q: _queries(sides[side]())[q]())
                    runs[q][side].append(r)
                    progress(f"rep {rep + 1} {q} {side}: {r['wall']:.2f} s")
        files_read = {
            "native": len(pyspark_lakefmt.read(spark, uri, filter=f"id < {LIMIT[0]}").inputFiles()),
            "parquet": len(spark.read.parquet(*files).where(f"id < {LIMIT[0]}").inputFiles()),
        }
        key_sides = {"upserted": tables["upserted"], "once": tables["once"]}
        key_runs: dict[str, dict[str, list[dict[str, float | None]]]] = {
            "key_count": {s: [] for s in key_sides}, "key_sum": {s: [] for s in key_sides}}
        for kuri in key_sides.values():
            pyspark_lakefmt.read(spark, kuri).count()
        for rep in range(sizes["reps"]):
            for side, kuri in list(key_sides.items())[rep % 2:] + list(key_sides.items())[:rep % 2]:
                key_runs["key_count"][side].append(_time(lambda u=kuri: pyspark_lakefmt.read(spark, u).count()))
                key_runs["key_sum"][side].append(_time(
                    lambda u=kuri: _queries(pyspark_lakefmt.read(spark, u))["sum"]()))
    finally:
        spark.stop()
    all_runs = {**runs, **key_runs}
    return {
        "best": {q: {s: _best(rs) for s, rs in by.items()} for q, by in all_runs.items()},
        "runs": all_runs,
        "files_read": files_read,
        "table_files": len(files),
        "versions": {"pyspark": pyspark.__version__, "pyarrow": pa.__version__},
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]), json.loads(sys.argv[3]))))
    else:
        sys.exit("usage: python -m benchmarks --only spark_read (this module's entry point is for its child process)")
