"""Filters as SQL text: every API that takes a filter accepts the predicate text ``overwrite(where=)`` takes, and
selects exactly the rows SQL selects.

The property test draws a small table (int, text, float with NaN, date, bool columns, with nulls) over a few
appends and a predicate tree, renders the tree as SQL text and evaluates it per row in plain Python under SQL's
three-valued logic (the oracle: a row is selected only where the predicate is true). ``scan(filter=text)``,
``to_arrow(filter=text)``, ``changes(filter=text)``, ``read_files(filter=text)`` and DuckDB/Polars through the
scan must return exactly those rows, and ``delete(text)`` must leave exactly the others.
"""

from __future__ import annotations

import datetime
import math
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt
from lakefmt.errors import InvalidPredicateError

SCHEMA = pa.schema([
    ("i", pa.int64()), ("s", pa.string()), ("f", pa.float64()), ("d", pa.date32()), ("b", pa.bool_()),
    ("rid", pa.int64()),
])
INTS = [-3, 0, 1, 2, 7, 100]
TEXTS = ["", "a", "b", "it's", "Z", "ab"]
FLOATS = [-1.5, 0.0, 0.5, 2.25, math.nan, math.inf]
DATES = [datetime.date(2026, 1, 1), datetime.date(2026, 11, 30), datetime.date(1999, 12, 31)]
VALUES: dict[str, list[Any]] = {"i": INTS, "s": TEXTS, "f": FLOATS, "d": DATES, "b": [True, False]}


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    return repr(value)


_PY_OPS = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _leaf(draw: Any) -> tuple[str, Any]:
    """A test as (SQL text, row -> True/False/None)."""
    col = draw(st.sampled_from(list(VALUES)))
    finite = [v for v in VALUES[col] if not (isinstance(v, float) and not math.isfinite(v))]
    kind = draw(st.sampled_from(["cmp", "in", "null", "between"]))
    if kind == "null":
        negate = draw(st.booleans())
        return f"{col} IS {'NOT ' if negate else ''}NULL", lambda r: (r[col] is not None) == negate
    if kind == "in":
        values = draw(st.lists(st.sampled_from(finite), min_size=1, max_size=4))
        negate = draw(st.booleans())
        text = f"{col} {'NOT ' if negate else ''}IN ({', '.join(_literal(v) for v in values)})"

        def in_list(r: dict[str, Any]) -> bool | None:
            if r[col] is None:
                return None
            return (r[col] in values) != negate

        return text, in_list
    if kind == "between":
        lo, hi = sorted(draw(st.lists(st.sampled_from(finite), min_size=2, max_size=2)))
        return f"{col} BETWEEN {_literal(lo)} AND {_literal(hi)}", lambda r: _and(_cmp(r[col], ">=", lo),
                                                                                _cmp(r[col], "<=", hi))
    op = draw(st.sampled_from([*_PY_OPS, "<>"]))
    value = draw(st.sampled_from(finite))
    py_op = "!=" if op == "<>" else op
    if draw(st.booleans()):  # literal first: the operator flips
        flipped = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[py_op]
        return f"{_literal(value)} {op} {col}", lambda r: _cmp(r[col], flipped, value)
    return f"{col} {op} {_literal(value)}", lambda r: _cmp(r[col], py_op, value)


def _cmp(a: Any, op: str, b: Any) -> bool | None:
    if a is None:
        return None
    if isinstance(a, str):  # SQL compares text by code point, as UTF-8 bytes order
        a, b = a.encode(), b.encode()
    return bool(_PY_OPS[op](a, b))


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


@st.composite
def predicates(draw: Any, depth: int = 2) -> tuple[str, Any]:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return _leaf(draw)
    kind = draw(st.sampled_from(["and", "or", "not"]))
    left_text, left = draw(predicates(depth - 1))
    if kind == "not":
        return f"NOT ({left_text})", lambda r: None if left(r) is None else not left(r)
    right_text, right = draw(predicates(depth - 1))
    combine = _and if kind == "and" else _or
    return f"({left_text}) {kind.upper()} ({right_text})", lambda r: combine(left(r), right(r))


@st.composite
def tables(draw: Any) -> list[pa.Table]:
    parts = []
    rid = 0
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 6))
        cols: dict[str, list[Any]] = {
            c: [draw(st.one_of(st.none(), st.sampled_from(vs))) for _ in range(n)] for c, vs in VALUES.items()
        }
        cols["rid"] = list(range(rid, rid + n))
        rid += n
        parts.append(pa.table(cols, schema=SCHEMA))
    return parts


def _rids(table: pa.Table) -> list[int]:
    return sorted(table.column("rid").to_pylist())


@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(parts=tables(), pred=predicates())
def test_text_filters_select_what_sql_selects(tmp_path_factory: Any, parts: list[pa.Table], pred: Any) -> None:
    text, oracle = pred
    uri = str(tmp_path_factory.mktemp("t") / uuid.uuid4().hex)
    t = lakefmt.create_table(uri, SCHEMA)
    for p in parts:
        t.append(p)
    rows = [r for p in parts for r in p.to_pylist()]
    want = sorted(r["rid"] for r in rows if oracle(r) is True)
    assert _rids(t.scan(filter=text).to_arrow()) == want, text
    assert _rids(t.to_arrow(filter=text)) == want, text
    assert _rids(t.scan(filter=text).to_polars().collect().to_arrow()) == want, text
    assert _rids(pa.Table.from_batches(list(t.read_files(t.files(), filter=text)), SCHEMA)) == want, text
    changed = t.changes(0, filter=text)
    assert sorted(changed.column("rid").to_pylist()) == want, text
    before = t.latest_snapshot()
    t.delete(text)
    assert _rids(t.to_arrow()) == sorted(set(r["rid"] for r in rows) - set(want)), text
    if not want:
        assert t.latest_snapshot() == before


def test_text_and_expression_select_the_same_rows(local_store: Any) -> None:
    """A text filter, its pyarrow expression and a delete by text, on a partitioned table
    (partition pruning by text) and on a key table (a delete that marks deletion vectors)."""
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
    data = pa.table({"id": list(range(10)), "dt": ["2026-11-01"] * 5 + ["2026-11-02"] * 5,
                     "v": [0.5 * i for i in range(9)] + [None]}, schema=schema)
    t = lakefmt.create_table(local_store.uri(), schema, partition_by=["dt"])
    t.append(data)
    text = "dt = '2026-11-02' AND (v >= 3 OR id IN (5, 9))"
    expr = (pc.field("dt") == "2026-11-02") & ((pc.field("v") >= 3.0) | pc.field("id").isin([5, 9]))
    assert t.scan(filter=text).files() == [f for f in t.files() if f.partition == {"dt": "2026-11-02"}]
    assert t.to_arrow(filter=text).sort_by("id") == data.filter(expr).sort_by("id")
    assert t.delete("id > 7") is not None
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(8))

    keyed = lakefmt.create_table(local_store.uri(), schema, primary_key=["id"])
    keyed.append(data)
    keyed.delete("v < 1 OR v IS NULL")
    assert sorted(keyed.to_arrow().column("id").to_pylist()) == [2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("id >", r"the scan filter 'id >': expected a value"),
        ("nope = 1", r"no column 'nope'; columns: id, s"),
        ("s = 5", r"5 is not text, and column s is text: quote the value"),
        ("id = 'x'", r"'x' cannot be compared with column id of type int64"),
        ("id = NULL", r"NULL never matches in a comparison; use id IS NULL"),
        ("upper(s) = 'A'", r"the scan filter \"upper\(s\) = 'A'\": UPPER\(s\): functions are not supported"),
    ],
)
def test_bad_text_filters_name_the_problem(tmp_path: Any, text: str, match: str) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("s", pa.string())]))
    t.append(pa.table({"id": [1], "s": ["a"]}))
    with pytest.raises(InvalidPredicateError, match=match):
        t.scan(filter=text)
    with pytest.raises(InvalidPredicateError, match=match.replace("scan filter", "delete filter")):
        t.delete(text)
    assert t.latest_snapshot() is not None and t.latest_snapshot().id == 1  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="SQL predicate text"):
        t.scan(filter=5)  # type: ignore[arg-type]


def test_change_feed_filter_text_names_change_columns(tmp_path: Any) -> None:
    """A change feed filtered by text may name the change columns too."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2, 3]}))
    t.delete("id = 2")
    got = t.changes(0, filter="_change_type = 'delete' OR id = 3")
    assert Counter(zip(got.column("id").to_pylist(), got.column("_change_type").to_pylist(), strict=True)) == (
        Counter({(2, "delete"): 1, (3, "insert"): 1})
    )
