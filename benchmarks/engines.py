"""Engines over a lakefmt scan against the same engine over the same Parquet files listed by hand (the limit).

The table: 10M event rows (quick mode: 500,000) in 10 daily partitions (``dt``), written by 10 appends of a
tenth each, so 100 files of 100,000 rows. Two filtered aggregates, each run by DuckDB and by Polars:

* ``all days``: ``dt, count(*), sum(amount) ... where amount < 100 group by dt`` over the whole table: the
  lakefmt side is ``lakefmt.open_table(uri).scan().to_duckdb()`` / ``.to_polars()`` (planning included in the
  time) and the engine's own ``where``; the limit is ``read_parquet([the 100 files])`` /
  ``pl.scan_parquet([the 100 files])`` with the same query;
* ``3 days``: the same aggregate over the last 3 days: lakefmt plans with ``scan(filter=dt >= day 7)`` (DuckDB)
  or gets the engine's ``filter(dt >= day 7)`` pushed down (Polars); the limit reads the 30 files of those
  days, listed by hand.

Informative: DuckDB over a scan whose filter is on a data column (``scan(filter=user < 'user-001000')``), which
lakefmt cannot leave to DuckDB's Parquet reader (no file is wholly inside the filter), so DuckDB reads a
``pyarrow.dataset`` that carries the filter; against ``read_parquet`` with the same ``where``.

Each side runs 7 times (3 in quick mode), interleaved in rotating order, in this process; the best wall time
of each side is compared (target: lakefmt within 1.15x of the limit), and the best CPU time is reported.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.compute as pc

import lakefmt
from benchmarks.common import Comparison, Result, day_name, drop_tree, events, interleaved

NAME = "engines"
TARGET_RATIO = 1.15
REPS = 7
DAYS = 10
#: a filter on a string column that keeps about a tenth of the rows and prunes no file (users are drawn at random)
USER = "user-001000"
#: the limit's source: the files as they are (DuckDB would otherwise read dt from the folder names, as a date)
FILES = "read_parquet($files, hive_partitioning = false)"
SQL = "select dt, count(*) as n, sum(amount) as total from {src} where amount < 100 {more} group by dt order by dt"


def _build(uri: str, rows: int) -> lakefmt.Table:
    table = lakefmt.create_table(uri, events(1).schema, partition_by=["dt"])
    per_append = rows // 10
    for k in range(10):
        table.append(events(per_append, seed=k + 1, days=DAYS, first_id=k * per_append))
    return table


def _same(mine: list[tuple[Any, ...]], limit: list[tuple[Any, ...]], what: str) -> None:
    """The same groups and counts, and sums equal but for the order of float additions."""
    assert [r[:2] for r in mine] == [r[:2] for r in limit], what
    assert all(math.isclose(a[2], b[2], rel_tol=1e-9) for a, b in zip(mine, limit, strict=True)), what


def run(quick: bool, workdir: Path) -> Result:
    rows = 500_000 if quick else 10_000_000
    reps = 3 if quick else REPS
    drop_tree(workdir)
    workdir.mkdir(parents=True)
    uri = str(workdir / "events")
    print(f"[{NAME}] writing {rows:,} rows", flush=True)
    table = _build(uri, rows)
    files = table.files()
    every = [f.full_path for f in files]
    first_day = day_name(DAYS - 3)
    last3 = [f.full_path for f in files if f.partition["dt"] >= first_day]
    con = duckdb.connect()
    con.execute("set enable_progress_bar = false")
    answers: dict[str, Any] = {}

    def keep(name: str, value: Any) -> None:
        answers.setdefault(name, value)

    def polars_query(lazy: pl.LazyFrame, days: bool) -> list[tuple[Any, ...]]:
        if days:
            lazy = lazy.filter(pl.col("dt") >= first_day)
        out = (
            lazy.filter(pl.col("amount") < 100)
            .group_by("dt")
            .agg(pl.len().alias("n"), pl.col("amount").sum().alias("total"))
            .sort("dt")
            .collect()
        )
        return out.rows()

    def duckdb_lakefmt(_rep: int) -> None:
        rel = lakefmt.open_table(uri).scan().to_duckdb(con)  # noqa: F841 (the query names it)
        keep("duckdb all days: lakefmt", con.sql(SQL.format(src="rel", more="")).fetchall())

    def duckdb_files(_rep: int) -> None:
        query = SQL.format(src=FILES, more="")
        keep("duckdb all days: files", con.execute(query, {"files": every}).fetchall())

    def duckdb_lakefmt_days(_rep: int) -> None:
        rel = lakefmt.open_table(uri).scan(filter=pc.field("dt") >= first_day).to_duckdb(con)  # noqa: F841
        keep("duckdb 3 days: lakefmt", con.sql(SQL.format(src="rel", more="")).fetchall())

    def duckdb_files_days(_rep: int) -> None:
        query = SQL.format(src=FILES, more="")
        keep("duckdb 3 days: files", con.execute(query, {"files": last3}).fetchall())

    def duckdb_dataset(_rep: int) -> None:
        scan = lakefmt.open_table(uri).scan(filter=pc.field("user") < USER)
        rel = scan.to_duckdb(con)  # noqa: F841
        keep("duckdb dataset", con.sql(SQL.format(src="rel", more="")).fetchall())

    def duckdb_files_user(_rep: int) -> None:
        query = SQL.format(src=FILES, more=f"and user < '{USER}'")
        keep("duckdb user: files", con.execute(query, {"files": every}).fetchall())

    def polars_lakefmt(_rep: int) -> None:
        keep("polars all days: lakefmt", polars_query(lakefmt.open_table(uri).scan().to_polars(), False))

    def polars_files(_rep: int) -> None:
        keep("polars all days: files", polars_query(pl.scan_parquet(every), False))

    def polars_lakefmt_days(_rep: int) -> None:
        keep("polars 3 days: lakefmt", polars_query(lakefmt.open_table(uri).scan().to_polars(), True))

    def polars_files_days(_rep: int) -> None:
        keep("polars 3 days: files", polars_query(pl.scan_parquet(last3), True))

    sides = {
        "duckdb_lakefmt": duckdb_lakefmt, "duckdb_files": duckdb_files,
        "duckdb_lakefmt_days": duckdb_lakefmt_days, "duckdb_files_days": duckdb_files_days,
        "duckdb_dataset": duckdb_dataset, "duckdb_files_user": duckdb_files_user,
        "polars_lakefmt": polars_lakefmt, "polars_files": polars_files,
        "polars_lakefmt_days": polars_lakefmt_days, "polars_files_days": polars_files_days,
    }
    print(f"[{NAME}] {len(sides)} sides x {reps}", flush=True)
    times = interleaved(sides, reps)
    for engine in ("duckdb", "polars"):  # every side of an engine gave the same answer as its limit
        for span in ("all days", "3 days"):
            _same(answers[f"{engine} {span}: lakefmt"], answers[f"{engine} {span}: files"], f"{engine} {span}")
    _same(answers["duckdb dataset"], answers["duckdb user: files"], "duckdb dataset")
    best = {k: min(v["wall"]) for k, v in times.items()}
    cpu = {k: min(v["cpu"]) for k, v in times.items()}
    result = Result(NAME, "quick" if quick else "full", {
        "rows": rows, "files": len(every), "bytes": sum(f.file_size for f in files), "partitions": DAYS,
        "query": SQL.format(src="<source>", more=""), "reps": reps, "statistic": "best of reps",
        "duckdb": duckdb.__version__, "polars": pl.__version__,
    })
    for engine, label in (("duckdb", "DuckDB"), ("polars", "Polars")):
        for suffix, span in (("", f"all {DAYS} days"), ("_days", "3 days")):
            mine, limit = best[f"{engine}_lakefmt{suffix}"], best[f"{engine}_files{suffix}"]
            result.comparisons.append(Comparison(
                f"{label}: filtered aggregate, {span}, lakefmt scan vs the files listed by hand", mine, limit, "s",
                mine / limit, TARGET_RATIO, "ratio<=",
            ))
    for engine, label in (("duckdb", "DuckDB"), ("polars", "Polars")):  # less sensitive to other processes
        mine, limit = cpu[f"{engine}_lakefmt"], cpu[f"{engine}_files"]
        result.comparisons.append(Comparison(
            f"{label}: filtered aggregate, all {DAYS} days, CPU time, lakefmt scan vs the files listed by hand",
            mine, limit, "s", mine / limit,
        ))
    result.comparisons.append(Comparison(
        "DuckDB over a scan filtered on a data column (a pyarrow dataset) vs the files listed by hand",
        best["duckdb_dataset"], best["duckdb_files_user"], "s", best["duckdb_dataset"] / best["duckdb_files_user"],
    ))
    result.metrics = {
        "best_wall_s": best,
        "best_cpu_s": cpu,
        "runs": times,
        "answer_rows": {k: len(v) for k, v in answers.items()},
    }
    result.notes += [
        "the lakefmt sides open the table and plan the scan inside the timing; the limit's file list is made "
        "beforehand",
        "lakefmt hands the planned files to the engine's own Parquet reader (local disk, one schema, a filter "
        "that needs no row dropped): the engine then pushes its projection and filter into that reader",
        "duckdb_dataset is informative: a scan filtered on a data column is read through a pyarrow dataset that "
        "carries the filter",
    ]
    drop_tree(workdir)
    return result
