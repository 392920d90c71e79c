"""Time travel after a schema change, in SQL and in the DataFrame API, against real Spark (the shared session): an
older snapshot reads under the table's current schema, matched by field id, so a column added since reads as nulls
and a renamed column under its new name."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt

FMT = "lakefmt"


def test_an_older_snapshot_reads_under_the_current_schema_in_sql_and_dataframes(spark: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("g", pa.string())]))
    first = t.append(pa.table({"id": [1, 2], "g": ["a", "b"]}))
    with t.update_schema() as u:
        u.add_column("n", pa.float64())
    second = t.append(pa.table({"id": [3], "g": ["c"], "n": [0.5]}))
    with t.update_schema() as u:
        u.rename_column("g", "grp")
    assert first is not None and second is not None and second.id > first.id + 1  # a schema change between
    both = [(1, "a", None), (2, "b", None)]
    name = f"tt_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} USING lakefmt LOCATION '{t.uri}'")
    try:
        for snapshot, expected in ((first.id, both), (second.id, [*both, (3, "c", 0.5)])):
            sql = spark.sql(f"SELECT * FROM {name} WITH ('snapshotId' = '{snapshot}') WHERE grp <= 'c'")
            assert sql.columns == ["id", "grp", "n"]
            assert sorted(tuple(r) for r in sql.collect()) == expected, snapshot
            df = spark.read.format(FMT).option("versionAsOf", snapshot).load(t.uri)
            assert df.columns == ["id", "grp", "n"]
            assert sorted(tuple(r) for r in df.collect()) == expected, snapshot
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    pushed = spark.read.format(FMT).option("snapshotId", first.id).option("pushFilters", "true").load(t.uri)
    assert [r.id for r in pushed.where("grp = 'b' OR n IS NOT NULL").collect()] == [2]  # new names, old snapshot
