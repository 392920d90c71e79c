"""MERGE on a float column (issue 36): a table's ``-0.0`` matches a source's ``0.0`` (no second row is inserted),
NaN and null match nothing, and over random columns of -0.0, 0.0, NaN, ±inf and nulls the target rows a MERGE
matches, and the source rows it inserts, are exactly those pyarrow's ``equal`` says, on copy-on-write tables and
tables with deletion vectors."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt

SCHEMA = pa.schema([("k", pa.float64()), ("id", pa.int64())])
VALUES = [-0.0, 0.0, math.nan, math.inf, -math.inf, 1.5, None]
_fresh = itertools.count()


def make(root: Path, mode: str) -> lakefmt.Table:
    opts = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"} if mode == "dv" else {}
    return lakefmt.create_table(str(root / f"t{next(_fresh)}"), SCHEMA, options=opts)


def test_minus_zero_matches_zero(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    t.append(pa.table({"k": [-0.0, math.nan, None], "id": [1, 2, 3]}, schema=SCHEMA))
    source = pa.table({"k": [0.0, math.nan, None], "id": [10, 20, 30]}, schema=SCHEMA)
    report = (t.merge(source, "t.k = s.k", source_alias="s", target_alias="t")
              .when_matched_update(updates={"id": "s.id"}).when_not_matched_insert_all().execute())
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (1, 2)
    ids = sorted(t.to_arrow().column("id").to_pylist())
    assert ids == [2, 3, 10, 20, 30]  # -0.0's row updated in place; NaN and null matched nothing


@pytest.mark.parametrize("mode", ["cow", "dv"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_matched_rows_are_the_pairs_equal_says(tmp_path: Path, mode: str, data: Any) -> None:
    target = data.draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=8), label="target")
    source = data.draw(st.lists(st.sampled_from(VALUES), max_size=8, unique_by=repr), label="source")
    t = make(tmp_path, mode)  # a new table per example, so the shared tmp_path is harmless
    t.append(pa.table({"k": target, "id": list(range(len(target)))}, schema=SCHEMA))
    src = pa.table({"k": source, "id": [100 + i for i in range(len(source))]}, schema=SCHEMA)
    report = (t.merge(src, "t.k = s.k", source_alias="s", target_alias="t")
              .when_matched_delete().when_not_matched_insert_all().execute())
    tk, sk = pa.array(target, pa.float64()), pa.array(source, pa.float64())
    hit_t = {j for j in range(len(target)) if any(pc.equal(sk, tk[j]).fill_null(False).to_pylist())}
    hit_s = {i for i in range(len(source)) if any(pc.equal(tk, sk[i]).fill_null(False).to_pylist())}
    want = sorted([j for j in range(len(target)) if j not in hit_t] +
                  [100 + i for i in range(len(source)) if i not in hit_s])
    assert sorted(t.to_arrow().column("id").to_pylist()) == want
    assert report.num_target_rows_deleted == len(hit_t)
    assert report.num_target_rows_inserted == len(source) - len(hit_s)
