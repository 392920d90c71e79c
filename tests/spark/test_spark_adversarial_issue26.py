"""A Spark SQL user's history is the one ``Table.history()`` and ``lakefmt history`` show: the same operation names
(Delta's ``WRITE``, ``DELETE``, ...), the same parameters and row counts, and ``limit`` for the latest ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt


def test_sql_history_is_the_tables_history(spark: Any, tmp_path: Path) -> None:
    import pyspark_lakefmt

    pyspark_lakefmt.register(spark)
    data = pa.table({"id": [1, 2, 3], "dt": ["a", "b", "a"]})
    t = lakefmt.write_table(str(tmp_path / "ev"), data, partition_by=["dt"])
    t.overwrite(pa.table({"id": [4], "dt": ["a"]}), where="dt = 'a'")
    t.delete("id = 2")
    t.restore(2)
    rows = spark.sql(f"SELECT * FROM lakefmt_history('{t.uri}') ORDER BY version").collect()
    want = t.history()[::-1]
    assert [(r.version, r.operation, dict(r.operation_parameters), r.rows_added, r.rows_removed) for r in rows] == [
        (h["version"], h["operation"], h["operation_parameters"], h["rows_added"], h["rows_removed"]) for h in want
    ]
    assert [r.operation for r in rows] == ["WRITE", "OVERWRITE", "DELETE", "RESTORE"]
    latest = spark.sql(f"SELECT version FROM lakefmt_history('{t.uri}', 2) ORDER BY version").collect()
    assert [r.version for r in latest] == [3, 4]
    with pytest.raises(Exception, match="limit must be a positive integer"):
        spark.sql(f"SELECT * FROM lakefmt_history('{t.uri}', 0)").collect()
