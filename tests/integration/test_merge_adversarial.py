"""MERGE under hostile input: NaN join keys (the ON condition's ``=`` as pyarrow evaluates it), and on key tables
rows the merge writes that would silently replace other rows (two written rows of one key, an update moving a row
onto a key another live row holds). Expected results are computed in plain Python."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt

FLOATS = pa.schema([("k", pa.float64()), ("v", pa.int64())])


def _opts(mode: str) -> dict[str, str]:
    return {"write.delete.mode": "merge-on-read"} if mode == "dv" else {}


def _rows(t: lakefmt.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in t.to_arrow().to_pylist()), key=repr)


@pytest.mark.parametrize("mode", ["cow", "dv"])
@pytest.mark.parametrize("on", ["t.k = s.k", "t.k = s.k and t.v + 0 = t.v"])
def test_nan_keys_match_as_pyarrow_equal_says(tmp_path: Path, mode: str, on: str) -> None:
    target = pa.table({"k": [math.nan, 1.0, 2.0], "v": [1, 2, 3]}, schema=FLOATS)
    source = pa.table({"k": [math.nan, 1.0], "v": [10, 20]}, schema=FLOATS)
    t = lakefmt.create_table(str(tmp_path / "t"), FLOATS, options=_opts(mode))
    t.append(target)
    # independent: a pair matches where pyarrow's equal is true (NaN equals nothing, itself included)
    tk, sk = target.column("k").to_pylist(), source.column("k").to_pylist()
    assert pc.equal(pa.array([math.nan]), pa.array([math.nan])).to_pylist() == [False]
    matched_t = {i for i, a in enumerate(tk) for b in sk if a == b}
    matched_s = {j for j, b in enumerate(sk) for a in tk if a == b}
    tv, sv = target.column("v").to_pylist(), source.column("v").to_pylist()
    expected = [(tk[i], sv[sk.index(tk[i])] if i in matched_t else tv[i]) for i in range(len(tk))]
    expected += [(sk[j], sv[j]) for j in range(len(sk)) if j not in matched_s]
    report = (t.merge(source, on, source_alias="s", target_alias="t")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    counts = (report.num_target_rows_updated, report.num_target_rows_inserted)
    assert counts == (len(matched_t), len(sk) - len(matched_s))
    assert repr(_rows(t)) == repr(sorted(expected, key=repr))  # repr: NaN == NaN is false
