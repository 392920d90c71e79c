"""Spark writes into key tables with a merge engine: the rows of one key arrive in several tasks of one write, and
the driver's commit folds them with the key's live row (``aggregation``: every task's increment counts;
``first-row``: the live row stays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("total", pa.int64()), ("hits", pa.int64()), ("top", pa.int64())])
AGG = {
    "merge-engine": "aggregation",
    "bucket": "2",
    "fields.total.aggregate-function": "sum",
    "fields.hits.aggregate-function": "count",
    "fields.top.aggregate-function": "max",
}


def _live(table: lakefmt.Table) -> dict[int, dict[str, Any]]:
    rows = table.to_arrow().to_pylist()
    out = {r["id"]: r for r in rows}
    assert len(out) == len(rows), "two live rows for one key"
    return out


def _frame(spark: Any, rows: list[tuple[Any, ...]], tasks: int) -> Any:
    """``rows`` in ``tasks`` partitions, in order (no shuffle): the rows of one key in every task."""
    return spark.createDataFrame(
        spark.sparkContext.parallelize(rows, tasks), "id long, total long, hits long, top long"
    )


def test_batch_write_aggregates_keys_spread_over_tasks(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "agg")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options=AGG)
    table.upsert(pa.table({"id": [1], "total": [1000], "hits": [0], "top": [50]}, schema=SCHEMA))
    rows = [(k, s, 1, s) for s in range(10) for k in range(6)]  # every key 10 times, over 4 tasks
    _frame(spark, rows, 4).write.format(FMT).mode("append").save(uri)
    live = _live(table)
    assert sorted(live) == list(range(6))
    for k in range(6):
        assert live[k]["total"] == 45 + (1000 if k == 1 else 0)
        assert live[k]["hits"] == 10 + (1 if k == 1 else 0)
        assert live[k]["top"] == (50 if k == 1 else 9)


def test_batch_write_first_row_keeps_the_live_row(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "first")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options={"merge-engine": "first-row"})
    table.upsert(pa.table({"id": [1], "total": [7], "hits": [None], "top": [None]}, schema=SCHEMA))
    rows = [(k, 100 + k, None, None) for k in range(4)] * 3
    _frame(spark, rows, 3).write.format(FMT).mode("append").save(uri)
    assert {k: r["total"] for k, r in _live(table).items()} == {0: 100, 1: 7, 2: 102, 3: 103}
