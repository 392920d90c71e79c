"""MERGE under hostile input: NaN join keys (the ON condition's ``=`` as pyarrow evaluates it), and on key tables
rows the merge writes that would silently replace other rows (two written rows of one key, an update moving a row
onto a key another live row holds). Expected results are computed in plain Python."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import MergeError, SchemaMismatchError

FLOATS = pa.schema([("k", pa.float64()), ("v", pa.int64())])
SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int64())])


def _opts(mode: str) -> dict[str, str]:
    # no automatic compaction: the tests look at the merge's own snapshot
    return {"write.delete.mode": "merge-on-read", "compaction.auto": "false"} if mode == "dv" else {}


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


def _key_table(path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(path), SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.append(pa.table({"id": [1, 2, 3], "x": [10, 20, 30]}, schema=SCHEMA))
    return t


def test_key_table_two_written_rows_of_one_key_refused(tmp_path: Path) -> None:
    t = _key_table(tmp_path / "t")
    before, snap = _rows(t), t.latest_snapshot()
    with pytest.raises(MergeError, match="same key"):
        (t.merge(pa.table({"id": [7, 7], "x": [1, 2]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
                 target_alias="t").when_not_matched_insert_all().execute())
    with pytest.raises(MergeError, match="same key"):  # two updates onto one new key
        (t.merge(pa.table({"id": [1, 2], "x": [0, 0]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
                 target_alias="t").when_matched_update({"id": "9"}).execute())
    assert _rows(t) == before and t.latest_snapshot() == snap


@pytest.mark.parametrize("how", ["update", "insert"])
def test_key_table_write_onto_a_key_another_row_holds_refused(tmp_path: Path, how: str) -> None:
    t = _key_table(tmp_path / "t")
    before, snap = _rows(t), t.latest_snapshot()
    with pytest.raises(MergeError, match="holds"):
        if how == "update":  # row 1 moved onto key 2, which the merge leaves alone
            (t.merge(pa.table({"id": [1], "x": [0]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
                     target_alias="t").when_matched_update({"id": "t.id + 1"}).execute())
        else:  # matched on x, not on the key: the unmatched source row's key 3 is live
            (t.merge(pa.table({"id": [3], "x": [99]}, schema=SCHEMA), "t.x = s.x", source_alias="s",
                     target_alias="t").when_not_matched_insert_all().execute())
    assert _rows(t) == before and t.latest_snapshot() == snap


def test_key_table_swapping_keys_is_fine(tmp_path: Path) -> None:
    t = _key_table(tmp_path / "t")
    report = (t.merge(pa.table({"id": [1, 2], "x": [0, 0]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
                      target_alias="t").when_matched_update({"id": "3 - t.id"}).execute())
    assert report.num_target_rows_updated == 2
    assert _rows(t) == [(1, 20), (2, 10), (3, 30)]


DECIMALS = pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2)), ("n", pa.int64())])


@pytest.mark.parametrize(("updates", "compute"), [
    ({"d": "t.d * 2"}, lambda d, n, sd: d * 2),
    ({"d": "t.d + 1 - s.d"}, lambda d, n, sd: d + 1 - sd),
    ({"d": "t.n * t.d"}, lambda d, n, sd: n * d),
])
def test_decimal_arithmetic_with_integers(tmp_path: Path, updates: dict[str, str], compute: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), DECIMALS)
    d, n, sd = [Decimal("1.10"), Decimal("-3.25")], [3, -4], [Decimal("0.01"), Decimal("2.00")]
    t.append(pa.table({"id": [1, 2], "d": d, "n": n}, schema=DECIMALS))
    source = pa.table({"id": [1, 2], "d": sd, "n": [0, 0]}, schema=DECIMALS)
    report = t.merge(source, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update(updates).execute()
    assert report.num_target_rows_updated == 2
    assert _rows(t) == sorted([(i + 1, compute(d[i], n[i], sd[i]), n[i]) for i in range(2)], key=repr)


def test_decimal_overflow_refused_table_unchanged(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), DECIMALS)
    t.append(pa.table({"id": [1], "d": [Decimal("99999999.99")], "n": [1]}, schema=DECIMALS))
    before, snap = _rows(t), t.latest_snapshot()
    with pytest.raises(SchemaMismatchError, match="cannot hold"):
        (t.merge(pa.table({"id": [1]}), "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update({"d": "t.d * 2"}).execute())
    assert _rows(t) == before and t.latest_snapshot() == snap


def test_source_with_a_duplicated_column_name_refused(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.table({"id": [1], "x": [1]}, schema=SCHEMA))
    source = pa.table([pa.array([1]), pa.array([5]), pa.array([6])], names=["id", "x", "x"])
    with pytest.raises(SchemaMismatchError, match=r"'x'.*twice"):
        t.merge(source, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update({"x": "s.x"})
    assert _rows(t) == [(1, 1)]


@pytest.mark.parametrize("mode", ["cow", "dv", "key"])
def test_report_and_change_feed_against_plain_python(tmp_path: Path, mode: str) -> None:
    """The report's counts, the rows and the change feed of one merge, each computed independently: on a key
    table updates are pre/post images; without a key an update is a delete and an insert; no carried-over row.
    Target values are even and source values odd, so every update changes its row."""
    rng = random.Random(7)
    opts = {"bucket": "2"} if mode == "key" else _opts(mode)
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options=opts, primary_key=["id"] if mode == "key" else None)
    target = {i: 2 * rng.randint(-10, 10) for i in range(60)}
    t.append(pa.table({"id": list(target), "x": list(target.values())}, schema=SCHEMA))
    source = {i: 2 * rng.randint(-10, 10) + 1 for i in rng.sample(range(90), 40)}
    flag = {i: rng.random() < 0.2 for i in source}
    report = (
        t.merge(pa.table({"id": list(source), "x": list(source.values()), "flag": [flag[i] for i in source]}),
                "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.flag")
        .when_matched_update({"x": "s.x + t.x"}, "t.x > s.x")
        .when_matched_update_all()
        .when_not_matched_insert_all("s.x >= 0")
        .when_not_matched_by_source_delete("t.x < -14")
        .execute()
    )
    rows: dict[int, int] = {}
    updated: list[tuple[int, int, int]] = []
    deleted: list[tuple[int, int]] = []
    inserted: list[tuple[int, int]] = []
    for i, tx in target.items():
        if i in source:
            if flag[i]:
                deleted.append((i, tx))
                continue
            new = source[i] + tx if tx > source[i] else source[i]
            updated.append((i, tx, new))
            rows[i] = new
        elif tx < -14:
            deleted.append((i, tx))
        else:
            rows[i] = tx
    for i, sx in source.items():
        if i not in target and sx >= 0:
            inserted.append((i, sx))
            rows[i] = sx
    counts = (report.num_target_rows_updated, report.num_target_rows_inserted, report.num_target_rows_deleted)
    assert counts == (len(updated), len(inserted), len(deleted))
    assert report.num_source_rows == len(source)
    assert _rows(t) == sorted(rows.items(), key=repr)
    snap = t.latest_snapshot()
    assert snap is not None and snap.properties["lakefmt.operation"] == "merge"
    feed = t.changes(snap.id - 1, snap.id)
    got = sorted(zip(feed.column("_change_type").to_pylist(), feed.column("id").to_pylist(),
                     feed.column("x").to_pylist(), strict=True))
    want = [("delete", i, x) for i, x in deleted] + [("insert", i, x) for i, x in inserted]
    if mode == "key":
        want += [("update_preimage", i, old) for i, old, _ in updated]
        want += [("update_postimage", i, new) for i, _, new in updated]
    else:
        want += [("delete", i, old) for i, old, _ in updated] + [("insert", i, new) for i, _, new in updated]
    assert got == sorted(want)


@pytest.mark.parametrize("updates", [{"x": 5}, {"x": None}, {1: "s.x"}])
def test_update_values_that_are_not_sql_text_refused(tmp_path: Path, updates: dict[Any, Any]) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    merger = t.merge(pa.table({"id": [1], "x": [2]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
                     target_alias="t")
    with pytest.raises(MergeError, match="SQL text"):
        merger.when_matched_update(updates)
    with pytest.raises(MergeError, match="SQL text"):
        merger.when_not_matched_insert(updates)
