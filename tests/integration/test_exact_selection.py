"""Issue 22, "Exact row selection": the defects reproduced on the landed code, as regression tests. Each selects rows
by a filter through statistics (pruning, delete's "every row matches" proof, the engines' "filter decided" shortcut)
and compares with plain pyarrow over the same rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import InvalidPredicateError, LakefmtError, UnsupportedFilterError
from lakefmt.read.bounds import column_bounds
from lakefmt.rewrite.delete import commit_delete, delete_in_files, plan_delete


def _oracle_delete(data: pa.Table, filter: pc.Expression) -> pa.Table:
    return data.filter(~filter | filter.is_null())


def _sorted(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


def test_timestamp_seconds_bounds_beyond_year_9999(tmp_path: Path) -> None:
    """``timestamp[s]`` is stored in Parquet as milliseconds; past year 9999 the bound was the raw millisecond
    count read as seconds (1000x off), and a delete matching nothing deleted both rows."""
    t_type = pa.timestamp("s")
    far = 300_000_000_000  # about year 11476
    data = pa.table({"ts": pa.array([far, far + 10], t_type), "id": [1, 2]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    stats = t.scan().entries()
    bounds = column_bounds(stats, "ts", t.table_schema())
    assert bounds is not None
    lo, hi, _ = bounds
    assert (lo[0].value, hi[0].value) == (far, far + 10)
    past = pc.field("ts") > pa.scalar(far + 10, t_type)
    assert t.scan(filter=past).to_arrow().num_rows == 0
    t.delete(past)
    assert t.to_arrow().num_rows == 2
    within = pc.field("ts") > pa.scalar(far + 5, t_type)
    assert t.scan(filter=within).to_arrow().column("id").to_pylist() == [2]
    assert t.scan(filter=within).to_duckdb().arrow().read_all().column("id").to_pylist() == [2]
    assert t.scan(filter=within).to_polars().collect()["id"].to_list() == [2]


def test_time64_nanosecond_bounds_are_not_truncated(tmp_path: Path) -> None:
    """``time64[ns]`` bounds were truncated to microseconds: a file of 1,000 ns and 1,999 ns looked like 1 µs..1 µs,
    and ``delete(t < 1500 ns)`` removed both rows."""
    t_type = pa.time64("ns")
    data = pa.table({"t": pa.array([1000, 1999], t_type), "id": [1, 2]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    f = pc.field("t") < pa.scalar(1500, t_type)
    assert t.scan(filter=f).to_arrow().column("id").to_pylist() == [1]
    assert t.scan(filter=~f).to_arrow().column("id").to_pylist() == [2]
    assert t.scan(filter=~f).to_polars().collect()["id"].to_list() == [2]
    assert t.scan(filter=~f).to_duckdb().arrow().read_all().column("id").to_pylist() == [2]
    t.delete(f)
    assert _sorted(t.to_arrow()) == _sorted(_oracle_delete(data, f))


def test_positional_references_are_refused_and_nothing_is_deleted(tmp_path: Path) -> None:
    """``pc.field(0)`` was invisible to the column search: a delete matching nothing evaluated it on its own helper
    column and removed a whole file, and a positional filter on a float column lost NaN rows in the Parquet scan."""
    data = pa.table({"id": [1, 2, 3], "f": [float("nan"), 1.0, 2.0]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    before = t.latest_snapshot()
    with pytest.raises(UnsupportedFilterError, match="by position"):
        t.delete(pc.field(0) < 1)
    with pytest.raises(UnsupportedFilterError, match=r"pc.field\('amount'\)"):
        t.scan(filter=pc.field(1).is_nan()).to_arrow()
    assert t.latest_snapshot() == before
    assert t.to_arrow().num_rows == 3


def test_duckdb_keeps_nan_rows(tmp_path: Path) -> None:
    """DuckDB's own Parquet reader skips row groups by Parquet min/max, which leave NaN out: ``where isnan(f)`` and
    ``where f > 3`` over ``to_duckdb()`` lost the NaN rows that the same query over the scan's rows keeps."""
    data = pa.table({"id": [1, 2, 3], "f": [float("nan"), 1.0, 2.0]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    con = duckdb.connect()
    over_rows = con.from_arrow(t.scan().to_arrow())
    for where in ("isnan(f)", "f > 3"):
        rel = t.scan().to_duckdb(con)
        got = sorted(r[0] for r in rel.filter(where).project("id").fetchall())
        want = sorted(r[0] for r in over_rows.filter(where).project("id").fetchall())
        assert got == want == [1], where
    assert pl.DataFrame(t.scan()).filter(pl.col("f").is_nan())["id"].to_list() == [1]


def test_filter_errors_are_lakefmt_errors(tmp_path: Path) -> None:
    """An unknown column and a decimal compared with an int literal were pyarrow's raw errors."""
    from decimal import Decimal

    data = pa.table({"id": [1], "d": pa.array([Decimal("1.50")], pa.decimal128(38, 2))})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    with pytest.raises(InvalidPredicateError, match="no column 'nope'"):
        t.scan(filter=pc.field("nope") > 1).to_arrow()
    with pytest.raises(InvalidPredicateError, match=r"decimal column 'd' \(decimal128\(38, 2\)\)"):
        t.scan(filter=pc.field("d") > 1).to_arrow()
    with pytest.raises(LakefmtError):
        t.delete(pc.field("d") > 1)
    ok = pc.field("d") > pa.scalar(Decimal("1.00"), pa.decimal128(38, 2))
    assert t.scan(filter=ok).to_arrow().num_rows == 1


def test_delete_pins_the_schema_it_planned_under(tmp_path: Path) -> None:
    """A distributed delete resolved its filter's names under the driver's schema, then again in each task under the
    schema it listed: a rename swap landing between the two deleted rows under both meanings."""
    data = pa.table({"a": [1, 2, 3, 4], "b": [4, 3, 2, 1]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    f = pc.field("a") < 2  # row a=1 (b=4)
    plan = plan_delete(t, f)
    with t.update_schema() as u:  # swap the names: a <-> b
        u.rename_column("a", "tmp")
    with t.update_schema() as u:
        u.rename_column("b", "a")
    with t.update_schema() as u:
        u.rename_column("tmp", "b")
    result = delete_in_files(t, plan.candidates, plan.filter, schema=plan.schema)
    assert result.deleted_rows == 1
    commit_delete(t, plan, [result])
    left = t.to_arrow()  # now named b (old a), a (old b)
    assert sorted(left.column("b").to_pylist()) == [2, 3, 4]


def test_values_a_data_file_cannot_hold_are_refused_clearly(tmp_path: Path) -> None:
    """Found by the property test: a ``timestamp[s]`` beyond int64 milliseconds (Parquet keeps seconds as
    milliseconds) failed the append with pyarrow's raw overflow; a date partition value outside years 1..9999 with
    Python's ``OverflowError``. Both are refused before anything is written, the table unchanged."""
    s = pa.schema([("c", pa.timestamp("s")), ("s", pa.struct([("t", pa.timestamp("s"))]))])
    t = lakefmt.create_table(str(tmp_path / "a"), s)
    far = pa.array([-(2**63)], pa.int64()).view(pa.timestamp("s"))
    ok = pa.array([0], pa.int64()).view(pa.timestamp("s"))
    with pytest.raises(lakefmt.SchemaMismatchError, match=r"column 'c' holds timestamp\[s\] values beyond"):
        t.append(pa.table({"c": far, "s": pa.StructArray.from_arrays([ok], ["t"])}, schema=s))
    with pytest.raises(lakefmt.SchemaMismatchError, match=r"column 's\.t' holds timestamp"):
        t.append(pa.table({"c": ok, "s": pa.StructArray.from_arrays([far], ["t"])}, schema=s))
    edge = pa.array([(2**63 - 1) // 1000], pa.int64()).view(pa.timestamp("s"))
    t.append(pa.table({"c": edge, "s": pa.StructArray.from_arrays([edge], ["t"])}, schema=s))
    assert t.to_arrow().column("c").equals(pa.chunked_array([edge]))
    d = pa.schema([("c", pa.date32()), ("v", pa.int64())])
    p = lakefmt.create_table(str(tmp_path / "p"), d, partition_by=["c"])
    for days in (-(2**31), 2**31 - 1):
        with pytest.raises(lakefmt.errors.InvalidPartitionError, match=r"outside years 1\.\.9999"):
            p.append(pa.table({"c": pa.array([days], pa.int32()).view(pa.date32()), "v": [1]}, schema=d))
    assert p.latest_snapshot() is None and t.latest_snapshot() is not None
    assert sorted(f.name for f in (tmp_path / "p").iterdir()) == ["schema"]
