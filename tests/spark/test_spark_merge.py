"""MERGE from PySpark (issue 25): ``pyspark_lakefmt.merge(spark, uri, df, ...)`` collects the source DataFrame to
Arrow on the driver and returns lakefmt's builder; the merge lands as one commit that Spark then reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark_lakefmt
import pytest

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("tag", pa.string())])


def test_merge_a_dataframe(spark: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(
        str(tmp_path / "t"), SCHEMA, options={"write.delete.mode": "merge-on-read", "compaction.auto": "false"}
    )
    t.append(pa.table({"id": [1, 2, 3], "x": [10, 20, 30], "tag": ["a", "b", "c"]}, schema=SCHEMA))
    df = spark.createDataFrame([(2, 5, "B", False), (3, 0, "C", True), (4, 40, "D", False)],
                               "id long, x long, tag string, gone boolean")
    report = (
        pyspark_lakefmt.merge(spark, t.uri, df, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.gone")
        .when_matched_update(updates={"x": "t.x + s.x", "tag": "s.tag"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert report.to_dict()["num_target_rows_updated"] == 1
    assert (report.num_target_rows_inserted, report.num_target_rows_deleted, report.num_source_rows) == (1, 1, 3)
    got = spark.read.format("lakefmt").load(t.uri).orderBy("id").collect()
    assert [(r.id, r.x, r.tag) for r in got] == [(1, 10, "a"), (2, 25, "B"), (4, 40, "D")]
    snap = t.latest_snapshot()
    assert snap is not None and snap.properties["lakefmt.operation"] == "merge"


def test_merge_refuses_a_condition_without_an_equality(spark: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    df = spark.createDataFrame([(1, 1, "a")], "id long, x long, tag string")
    with pytest.raises(lakefmt.MergeError, match="equality"):
        pyspark_lakefmt.merge(spark, t.uri, df, "t.id > s.id", source_alias="s", target_alias="t")


TYPED = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("d", pa.decimal128(10, 2)),
                   ("day", pa.date32())])


def test_merge_a_dataframe_of_timestamps_decimals_and_dates(spark: Any, tmp_path: Path) -> None:
    import datetime as dt
    from decimal import Decimal

    utc = dt.UTC
    t = lakefmt.create_table(str(tmp_path / "t"), TYPED)
    t.append(pa.table({"id": [1], "ts": [dt.datetime(2026, 1, 1, 12, tzinfo=utc)], "d": [Decimal("1.50")],
                       "day": [dt.date(2026, 1, 1)]}, schema=TYPED))
    # Spark's timestamps are instants: the session's time zone must not shift them
    df = spark.createDataFrame(
        [(1, dt.datetime(2026, 2, 1, 8, tzinfo=utc), Decimal("2.25"), dt.date(2026, 2, 1)),
         (2, dt.datetime(2026, 3, 1, 23, 30, tzinfo=utc), Decimal("-0.01"), dt.date(2026, 3, 1))],
        "id long, ts timestamp, d decimal(12,2), day date")
    report = (pyspark_lakefmt.merge(spark, t.uri, df, "t.id = s.id", source_alias="s", target_alias="t")
              .when_matched_update({"ts": "s.ts", "d": "t.d + s.d"}).when_not_matched_insert_all().execute())
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (1, 1)
    assert t.to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "ts": dt.datetime(2026, 2, 1, 8, tzinfo=utc), "d": Decimal("3.75"), "day": dt.date(2026, 1, 1)},
        {"id": 2, "ts": dt.datetime(2026, 3, 1, 23, 30, tzinfo=utc), "d": Decimal("-0.01"),
         "day": dt.date(2026, 3, 1)},
    ]
    empty = spark.createDataFrame([], "id long, ts timestamp, d decimal(12,2), day date")
    report = (pyspark_lakefmt.merge(spark, t.uri, empty, "t.id = s.id", source_alias="s", target_alias="t")
              .when_matched_delete().when_not_matched_insert_all().execute())
    assert report.snapshot_id is None and t.to_arrow().num_rows == 2
