"""Adversarial tests of issue 15 (compaction and row-level delete), each written from a finding: a delete removes
exactly the rows its filter is true for, as pyarrow evaluates that filter on the rows themselves."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt

ZEROS = pa.schema([("id", pa.int64()), ("f", pa.float64())])


@pytest.mark.parametrize(
    ("files", "literal"),
    [([[0.0, 0.0]], -0.0), ([[-0.0], [0.0]], 0.0), ([[-0.0], [0.0]], -0.0)],
    ids=["zeros-isin-minus-zero", "isin-zero", "isin-minus-zero"],
)
def test_a_delete_by_isin_tells_zero_from_minus_zero_as_pyarrow_does(
    tmp_path: Path, files: list[list[float]], literal: float
) -> None:
    """Found by attack: Parquet writes a column of zeros with min -0.0 and max +0.0 (its rule for signed zeros), so
    min == max and the proof took the file as ``f == -0.0``; ``is_in`` tells 0.0 from -0.0, so a file of 0.0 was
    dropped unread by ``f.isin([-0.0])`` (rows lost), and one of 0.0 skipped by ``f.isin([0.0])`` (rows left)."""
    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    n = 0
    for values in files:
        t.append(pa.table({"id": list(range(n, n + len(values))), "f": values}, schema=ZEROS))
        n += len(values)
    flt = pc.field("f").isin([literal])
    want = sorted(t.to_arrow().filter(~flt | flt.is_null()).column("id").to_pylist())
    t.delete(flt)
    assert sorted(t.to_arrow().column("id").to_pylist()) == want


@pytest.mark.parametrize("sort_by", [5, [1], ["id", None], {"id": 1}.values()])
def test_compaction_refuses_a_sort_by_that_names_no_columns(tmp_path: Path, sort_by: object) -> None:
    """Found by attack: ``sort_by=5`` failed with "'int' object is not iterable" from deep inside planning."""
    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    for i in range(3):
        t.append(pa.table({"id": [i], "f": [0.5]}, schema=ZEROS))
    latest = t.latest_snapshot()
    with pytest.raises(TypeError, match="sort_by must be a column name or a list of column names"):
        t.compact(min_files=2, sort_by=sort_by)  # type: ignore[arg-type]
    assert t.latest_snapshot() == latest
