"""The differential property test of exact row selection (issue 22, tests/integration/test_selection_property.py) on
the Spark reader, on fewer cases: ``spark.read.format("lakefmt")`` with a filter expressed in Spark SQL (pushed
into the scan with ``pushFilters``, and without) returns exactly the rows the same Spark filter selects from the
same rows held as a plain DataFrame, and, where Spark's and pyarrow's semantics agree (no NaN), the rows pyarrow
selects."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, note
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location(
    "selection_property", Path(__file__).resolve().parent.parent / "integration" / "test_selection_property.py"
)
assert _spec is not None and _spec.loader is not None
prop = importlib.util.module_from_spec(_spec)
sys.modules["selection_property"] = prop
_spec.loader.exec_module(prop)

SPARK_EXAMPLES = int(os.environ.get("LAKEFMT_PROPERTY_EXAMPLES", "0") or 0) or 10
#: types Spark reads as they are (Spark has no unsigned integers, no time type)
SPARK_KINDS = [
    k
    for k in prop.KINDS
    if pa.types.is_signed_integer(k.type)
    or pa.types.is_floating(k.type)
    or k.type in (pa.string(), pa.bool_(), pa.decimal128(5, 2))
]


def _spark_literal(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v}BD" if not -(2**63) <= v < 2**63 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(v):
            return f"CAST('{'' if v > 0 else '-'}Infinity' AS DOUBLE)"
        return f"CAST({v!r} AS DOUBLE)"
    if isinstance(v, str) and "\x00" not in v and "\\" not in v:
        return "'" + v.replace("'", "\\'") + "'"
    if isinstance(v, prop.D):
        return f"{format(v, 'f')}BD"
    return None


def to_spark_sql(node: Any) -> str | None:
    if node.op in ("~", "&", "|"):
        parts = [to_spark_sql(a) for a in node.args]
        if any(p is None for p in parts):
            return None
        if node.op == "~":
            return f"(NOT ({parts[0]}))"
        return f"(({parts[0]}) {'AND' if node.op == '&' else 'OR'} ({parts[1]}))"
    ref = node.ref
    if len(ref.names) != 1:
        return None
    col = f"`{ref.names[0]}`"
    if node.op in ("is_null", "is_valid"):
        return f"({col} IS {'NOT ' if node.op == 'is_valid' else ''}NULL)"
    if node.op == "is_nan":
        return f"isnan({col})"
    if node.op == "is_in":
        vals = node.literal.to_pylist() if isinstance(node.literal, pa.Array) else node.literal
        lits = [_spark_literal(v) for v in vals]
        return None if any(x is None for x in lits) else f"({col} IN ({', '.join(lits)}))"  # type: ignore[arg-type]
    lit = _spark_literal(node.literal)
    return None if lit is None else f"({col} {'!=' if node.op == '!=' else '=' if node.op == '==' else node.op} {lit})"


@st.composite
def spark_cases(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    case = draw(prop.cases(pool=SPARK_KINDS))
    nodes = draw(st.lists(prop.filters(case.schema, case.kinds, case.oracle()), min_size=1, max_size=3))
    return case, nodes


def _spark_rows(df: Any) -> pa.Table:
    return df.toArrow()


@prop.settings(parent=prop._settings("reads"), max_examples=SPARK_EXAMPLES)
@given(spark_cases())
def test_spark_reader_selects_what_spark_selects_over_the_same_rows(spark: Any, drawn: tuple[Any, list[Any]]) -> None:
    case, nodes = drawn
    with prop.tempdir() as where:
        b = prop.build(case, where)
        plain = spark.createDataFrame(b.all_rows)
        for node in nodes:
            sql = to_spark_sql(node)
            if sql is None:
                continue
            note(f"Spark filter: {sql}")
            want = prop.engine(lambda: _spark_rows(plain.filter(sql)))  # noqa: B023
            if want is None:
                continue
            for push in ("true", "false"):
                reader = spark.read.format("lakefmt").option("pushFilters", push)
                got = prop.lake(f"spark_push_{push}", lambda: _spark_rows(reader.load(b.root).filter(sql)))  # noqa: B023
                if got is not prop.REFUSED:
                    prop.check_rows(f"spark_pushFilters_{push}", got, want)
            # Spark orders NaN (larger than any number), pyarrow does not: a float column or a NaN literal differs
            if "NaN" not in sql and not any(pa.types.is_floating(f.type) for f in case.schema):
                arrow_want = prop.oracle_filter(b.all_rows, node)
                if arrow_want is not None:
                    got_rids = sorted(want.column("rid").to_pylist())
                    if got_rids != sorted(arrow_want.column("rid").to_pylist()):
                        raise prop.mismatch("spark_vs_pyarrow")(f"{sql}: Spark {got_rids}, pyarrow differs")
