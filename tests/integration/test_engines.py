"""Reading a scan from DuckDB, Polars, pandas and any Arrow PyCapsule consumer: each returns the rows of
``to_arrow()`` (a partition filter, a data filter, a projection, a filter on a floating-point column) and never
opens a file the scan pruned. The proof of the last: every file the scan pruned is overwritten with garbage
before the engine reads, so an engine that opened one would fail."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Callable
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt import MissingDependencyError, UnsupportedFilterError
from lakefmt.read.engines import native_paths

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("f", pa.float64()), ("name", pa.string())])
F = [float("nan"), -math.inf, 1.5, -2.0, float("nan"), 0.0, 3.25, -math.inf, 7.0, float("nan")]

#: label -> scan arguments; a partition filter, a data filter (pruned by column statistics), a projection, and a
#: filter on a floating-point column (which no Parquet statistics may decide: NaN is left out of them)
CASES: dict[str, dict[str, Any]] = {
    "partition": {"filter": pc.field("dt") == "a"},
    "data": {"filter": pc.field("id") < 15, "columns": ["name", "id"]},
    "projection": {"columns": ["id", "f"]},
    "float": {"filter": (pc.field("f") != -math.inf) & (pc.field("dt") == "b"), "columns": ["id", "f"]},
}


def _table(uri: str, nan: bool = True) -> lakefmt.Table:
    """Four files: ids 0-9 and 10-19 in partition a, 20-29 and 30-39 in partition b; f holds NaN (unless not
    ``nan``: then 0.5 in its place) and -inf."""
    t = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    f = F if nan else [0.5 if v != v else v for v in F]
    for i in range(4):
        ids = range(i * 10, i * 10 + 10)
        t.append(pa.table({"id": ids, "dt": ["a" if i < 2 else "b"] * 10, "f": f, "name": [f"n{j}" for j in ids]}))
    return t


def _rows(data: Any) -> list[tuple[Any, ...]]:
    """Rows of an Arrow table, a Polars or pandas frame or a DuckDB relation, sorted, NaN made comparable."""
    if isinstance(data, duckdb.DuckDBPyRelation):
        data = data.to_arrow_table()
    elif isinstance(data, pl.DataFrame):
        data = data.to_arrow()
    if isinstance(data, pd.DataFrame):  # NaN stays NaN (pyarrow's from_pandas would make it null)
        cols, records = list(data.columns), data.to_dict("records")
    else:
        cols, records = data.column_names, data.to_pylist()
    rows = [tuple(_value(v) for v in r.values()) for r in records]
    return [tuple(cols), *sorted(rows, key=repr)]


def _value(v: Any) -> Any:
    v = v.item() if hasattr(v, "item") else v  # a numpy scalar from pandas
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def _prune_and_poison(t: lakefmt.Table, scan: lakefmt.Scan) -> list[str]:
    """Overwrite every live file the scan does not read with bytes no reader can parse; the paths poisoned."""
    kept = {f.path for f in scan.files()}
    pruned = [f.path for f in t.files() if f.path not in kept]
    for path in pruned:
        t.io.write(path, b"not a parquet file: opened by a reader that should have pruned it")
    return pruned


def _each_case(tmp_path: Any, *readers: Callable[[lakefmt.Scan], Any]) -> None:
    """For each case: a fresh table, the expected rows, the pruned files poisoned, then each ``read(scan)`` must
    give the rows of ``to_arrow()``."""
    pruned: dict[str, list[str]] = {}
    for case, kwargs in CASES.items():
        t = _table(str(tmp_path / case))
        scan = t.scan(**kwargs)
        expected = _rows(scan.to_arrow())
        assert len(expected) > 1
        pruned[case] = _prune_and_poison(t, scan)
        for read in readers:
            assert _rows(read(scan)) == expected, (case, read)
    assert [len(pruned[case]) for case in CASES] == [2, 2, 0, 2]


def test_duckdb(tmp_path: Any) -> None:
    con = duckdb.connect()
    _each_case(tmp_path, lambda scan: scan.to_duckdb(con))
    # the paths: DuckDB's own Parquet reader where the scan's filter needs no row dropped and no file may hold a
    # NaN (its reader skips row groups by Parquet min/max, which leave NaN out), else lakefmt's
    assert native_paths(_table(str(tmp_path / "nan")).scan(**CASES["partition"])) is None
    t = _table(str(tmp_path / "paths"), nan=False)
    assert native_paths(t.scan(**CASES["partition"])) is not None
    assert native_paths(t.scan(**CASES["data"])) is None and native_paths(t.scan(**CASES["float"])) is None
    # DuckDB's own filter and projection go into the read: its plan shows them in the scan
    for case in ("partition", "data"):
        rel = t.scan(**CASES[case]).to_duckdb(con)  # noqa: F841 (DuckDB finds the variable by its name)
        plan = con.sql("explain select id from rel where id > 5 and id < 12").fetchall()[0][1]
        scan_node = plan[plan.index("PARQUET_SCAN" if case == "partition" else "ARROW_SCAN") :]
        assert "Filters:" in scan_node and "id>5" in scan_node.replace(" ", "").replace('"', ""), plan
        got = con.sql("select id from rel where id > 5 and id < 12 order by id").fetchall()
        assert [r[0] for r in got] == [6, 7, 8, 9, 10, 11]
    # a view by name (on the default connection by default), the scan itself as a replacement scan, and a
    # relation over a stream (a float filter) that reads again on each query
    t.scan(**CASES["partition"]).to_duckdb(name="events_a")
    assert duckdb.sql("select count(*) from events_a").fetchall() == [(20,)]
    t.scan(**CASES["float"]).to_duckdb(con, name="events_f")
    for _ in range(2):
        assert con.sql("select count(*) from events_f").fetchall() == [(16,)]
    s = t.scan(filter=pc.field("id") >= 35)  # noqa: F841 (a replacement scan: DuckDB finds it by name)
    assert sorted(r[0] for r in duckdb.sql("select id from s").fetchall()) == [35, 36, 37, 38, 39]


def test_polars(tmp_path: Any) -> None:
    _each_case(tmp_path, lambda scan: scan.to_polars().collect())
    t = _table(str(tmp_path / "pushdown"))
    lazy = t.scan().to_polars()
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect_schema() == pl.Schema({"id": pl.Int64, "dt": pl.String, "f": pl.Float64, "name": pl.String})
    # Polars' predicate prunes the scan's files (the other partition and the files whose ids cannot match are
    # poisoned), its projection and row limit reach the read, and the rows are Polars' own answer
    query = lazy.filter((pl.col("dt") == "b") & (pl.col("id") >= 33)).select("id", "name")
    plan = query.explain()
    assert "PYTHON[lakefmt] SCAN" in plan and "SELECTION:" in plan and "3/4 COLUMNS" in plan, plan
    expected = _rows(t.scan(filter=(pc.field("dt") == "b") & (pc.field("id") >= 33), columns=["id", "name"]).to_arrow())
    poisoned = _prune_and_poison(t, t.scan(filter=(pc.field("dt") == "b") & (pc.field("id") >= 30)))
    assert len(poisoned) == 3
    assert _rows(query.collect()) == expected
    assert lazy.filter(pl.col("id") >= 33).select(pl.len()).collect().item() == 7
    assert query.head(2).collect().height == 2
    # a predicate on a floating-point column is Polars' to apply (NaN sorts above every number in Polars)
    nan_rows = lazy.filter((pl.col("id") >= 30) & (pl.col("f") > 5)).select("id").collect()
    assert sorted(nan_rows["id"].to_list()) == [30, 34, 38, 39]


def test_pandas(tmp_path: Any) -> None:
    _each_case(tmp_path, lambda scan: scan.to_pandas())


def test_pycapsule_stream(tmp_path: Any) -> None:
    """``pyarrow.table(scan)`` and ``RecordBatchReader.from_stream(scan)`` read through ``__arrow_c_stream__``;
    so do ``polars.DataFrame(scan)`` and DuckDB's replacement scan of a variable."""
    _each_case(tmp_path, pa.table, lambda scan: pa.RecordBatchReader.from_stream(scan).read_all(), pl.DataFrame)
    t = _table(str(tmp_path / "schema"))
    reader = pa.RecordBatchReader.from_stream(t.scan(columns=["name", "id"]))
    assert reader.schema == pa.schema([("name", pa.string()), ("id", pa.int64())])
    # a table is a stream of its latest snapshot
    everything = _rows(t.scan().to_arrow())
    assert _rows(pa.table(t)) == _rows(pl.DataFrame(t)) == _rows(duckdb.sql("select * from t")) == everything


def test_engines_off_local_disk() -> None:
    """On a filesystem the engines cannot open themselves (memory://), the rows come from lakefmt's reader."""
    t = _table(f"memory://engines-{uuid.uuid4().hex}")
    for kwargs in CASES.values():
        scan = t.scan(**kwargs)
        expected = _rows(scan.to_arrow())
        assert native_paths(scan) is None
        assert _rows(scan.to_duckdb(duckdb.connect())) == expected
        assert _rows(scan.to_polars().collect()) == expected
        assert _rows(pa.table(scan)) == expected


def test_to_dataset_never_returns_a_row_its_filter_excludes(tmp_path: Any) -> None:
    """``scan(filter=id < 10).to_dataset()`` used to return every row of the kept files (2,000 here, not 10)."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    for dt in ("a", "b"):
        ids = range(1000) if dt == "a" else range(1000, 2000)
        t.append(pa.table({"id": ids, "dt": [dt] * 1000, "f": [0.5] * 1000, "name": ["x"] * 1000}, schema=SCHEMA))
    scan = t.scan(filter=pc.field("id") < 10)
    dataset = scan.to_dataset()
    assert dataset.to_table().num_rows == dataset.count_rows() == 10 == scan.to_arrow().num_rows
    assert sorted(dataset.to_table(columns=["id"]).column("id").to_pylist()) == list(range(10))
    assert dataset.to_table(filter=pc.field("id") >= 5).num_rows == 5
    assert duckdb.connect().sql("select count(*) from dataset").fetchall() == [(10,)]
    assert t.scan().to_dataset().count_rows() == 2000
    with pytest.raises(UnsupportedFilterError, match=r"to_arrow\(\)"):
        t.scan(filter=pc.field("f") > 0).to_dataset()
    assert t.scan(filter=pc.field("f") > 0).count() == 2000


@pytest.mark.parametrize(
    ("module", "extra", "call"),
    [
        ("duckdb", "duckdb", lambda s: s.to_duckdb()),
        ("polars", "polars", lambda s: s.to_polars()),
        ("pandas", "pandas", lambda s: s.to_pandas()),
    ],
)
def test_missing_engine_names_its_extra(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, module: str, extra: str, call: Callable[[lakefmt.Scan], Any]
) -> None:
    scan = lakefmt.create_table(str(tmp_path / "t"), SCHEMA).scan()
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'lakefmt\[{extra}\]'") as caught:
        call(scan)
    assert isinstance(caught.value, ImportError)


def test_engines_read_files_written_under_an_older_schema(tmp_path: Any) -> None:
    """Files written before a rename and an added column are read by field id, whatever the engine: such a scan
    never goes to an engine's own Parquet reader, which would see the old column names."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int32()), ("dt", pa.string())]),
                             partition_by=["dt"])
    t.append(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "dt": ["a", "a", "b"]}))
    with t.update_schema() as update:
        update.add_column("x", pa.string())
        update.rename_column("id", "key")
    t = lakefmt.open_table(t.uri)
    t.append(pa.table({"key": pa.array([4, 5], pa.int32()), "dt": ["a", "b"], "x": ["p", "q"]}, schema=t.schema()))
    for kwargs in ({}, {"filter": pc.field("dt") == "a"}, {"filter": pc.field("key") > 2, "columns": ["key", "x"]}):
        scan = t.scan(**kwargs)
        expected = _rows(scan.to_arrow())
        assert native_paths(scan) is None
        assert _rows(scan.to_duckdb(duckdb.connect())) == expected
        assert _rows(scan.to_polars().collect()) == expected
        assert _rows(pa.table(scan)) == expected
    assert _rows(t.scan().to_polars().filter(pl.col("key") > 3).select("key", "x").collect()) == [
        ("key", "x"), (4, "p"), (5, "q")
    ]
