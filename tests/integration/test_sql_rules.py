"""SQL text against the pyarrow expression docs/filters.md says it means (issue 36: ``IN``, ``OR`` chains and ``=``
disagreed on -0.0 and NaN; literals of another type were converted in units that depended on the column).

The property test draws rows with -0.0, NaN, ±inf, nulls, decimals, dates and timestamps of every unit (with and
without a zone), and a predicate over them: comparisons, ``IN`` lists, ``OR``/``AND`` chains, ``BETWEEN``, ``NOT``,
``isnan``, with literals of every accepted form and of wrong types. The oracle builds the documented meaning
as a pyarrow expression on its own (numbers compared exactly as decimals for integer and decimal columns, as
doubles for floating-point ones; timestamps in nanoseconds; ``IN`` as an ``OR`` of ``=``), or expects a refusal.
The text must select the oracle's rows in ``scan``, ``count``, DuckDB and Polars, remove them in ``delete`` and
match them in a MERGE condition.
"""

from __future__ import annotations

import datetime
import math
import uuid
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt
from lakefmt.errors import InvalidPredicateError

DEC = pa.decimal128(10, 2)
#: the oracle compares numbers with integer and decimal columns in a type that holds every literal exactly
WIDE = pa.decimal256(76, 35)
BIG = 12345678901234567890123456789012345678  # 38 digits: Python's default decimal context keeps 28
COLUMNS: dict[str, pa.DataType] = {
    "i": pa.int64(), "i8": pa.int8(), "f": pa.float64(), "g": pa.float32(), "d": DEC, "s": pa.string(),
    "w": pa.decimal128(38, 0),
    "b": pa.bool_(), "dt": pa.date32(), "ts": pa.timestamp("s"), "tm": pa.timestamp("ms"),
    "tu": pa.timestamp("us"), "tn": pa.timestamp("ns"), "tz": pa.timestamp("us", "UTC"),
}
SCHEMA = pa.schema([*COLUMNS.items(), ("rid", pa.int64())])
NS = 1_704_067_200 * 10**9  # 2024-01-01 00:00:00
STAMPS = [NS, NS + 500_000_000, NS + 1_000_000_000, NS - 86_400 * 10**9, NS + 123_456_789]
POOLS: dict[str, list[Any]] = {
    "i": [-3, 0, 1, 2, 3, 7], "i8": [-128, 0, 2, 127], "f": [-0.0, 0.0, 1.0, -1.5, math.nan, math.inf, -math.inf],
    "g": [-0.0, 0.0, 0.5, 0.1, math.nan, 2.0], "d": [Decimal("1.00"), Decimal("1.01"), Decimal("-0.50"),
                                                     Decimal("0.00")],
    "w": [Decimal(BIG), Decimal(12345678901234567890123456790000000000), Decimal(-BIG), Decimal(1)],
    "s": ["", "a", "it's", "b%", "ab"], "b": [True, False],
    "dt": [datetime.date(2024, 1, 1), datetime.date(2023, 12, 31), datetime.date(2024, 1, 2)],
}
for _c in ("ts", "tm", "tu", "tn", "tz"):
    _k = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[COLUMNS[_c].unit]
    POOLS[_c] = sorted({n // _k for n in STAMPS})

#: literals as (SQL text, kind, exact value): value a Fraction for numbers, else the Python value
NUMBERS = [("0", 0), ("-0.0", 0), ("2", 2), ("2.5", Fraction(5, 2)), ("1.005", Fraction(201, 200)),
           ("1e0", 1), ("-1.5", Fraction(-3, 2)), ("3.0", 3), ("127", 127), ("128", 128), ("1 + 1", 2),
           ("10 / 4", Fraction(5, 2)), ("CAST('7' AS INT)", 7), ("0.1", Fraction(1, 10)), ("-0e0", 0),
           ("1704067200", 1704067200), (str(BIG), BIG), (f"-{BIG}", -BIG), (f"{BIG} - 1", BIG - 1),
           ("12345678901234567890123456790000000000", 12345678901234567890123456790000000000),
           ("1.000000000000000000000000000001 + 0", 1 + Fraction(1, 10**30)),
           ("1234567890.1234567890123456789012345", Fraction(12345678901234567890123456789012345, 10**25))]
#: the literals a 38-digit decimal column is compared with (more often than the others: beyond 28 digits)
WIDE_NUMBERS = [n for n, v in NUMBERS if abs(v) > 10**30 or Fraction(v).denominator > 10**20] + ["1", "2.5"]
#: integer literals (an integer without an exact double is refused against a floating-point column)
INTEGERS = {n for n, v in NUMBERS if Fraction(v).denominator == 1 and not any(c in n for c in "./eE")}
TEXTS = ["''", "'a'", "'it''s'", "'b%'", "'nan'", "'2024-01-01'", "'5'"]
DATES = ["DATE '2024-01-01'", "DATE '2023-12-31'", "date_add(DATE '2023-12-31', 1)", "CAST('2024-01-02' AS DATE)"]
STAMP_TEXTS = ["TIMESTAMP '2024-01-01 00:00:00'", "TIMESTAMP '2024-01-01 00:00:00.5'",
               "TIMESTAMP '2024-01-01 00:00:00.123456789'", "TIMESTAMP '2024-01-01T00:00:01Z'",
               "TIMESTAMP '2024-01-01 01:00:00+01:00'", "TIMESTAMP_NTZ '2023-12-31 00:00:00'"]
OTHER = ["TRUE", "FALSE", "CAST('NaN' AS DOUBLE)", "CAST('inf' AS DOUBLE)"]


class Refused(Exception):
    """The oracle expects the text to be refused."""


def _stamp(text: str) -> tuple[int, bool]:
    body = text.split("'")[1]
    zoned = body.endswith("Z") or "+" in body
    day, _, clock = body.replace("T", " ").rstrip("Z").partition(" ")
    offset = 0
    if "+" in clock:
        clock, zone = clock.split("+")
        offset = int(zone[:2]) * 3600
    hms, _, frac = clock.partition(".")
    h, m, s = (int(x) for x in (hms or "0:0:0").split(":"))
    days = (datetime.date.fromisoformat(day) - datetime.date(1970, 1, 1)).days
    return ((days * 86400 + h * 3600 + m * 60 + s - offset) * 10**9 + int(frac.ljust(9, "0") or 0)), zoned


def meaning(col: str, op: str, lit: str) -> pc.Expression:
    """``col op lit`` as docs/filters.md defines it, built without lakefmt; :class:`Refused` where it refuses."""
    t, c = COLUMNS[col], pc.field(col)
    number = dict(NUMBERS).get(lit)
    if lit == "CAST('inf' AS DOUBLE)" and pa.types.is_floating(t):
        return _op(c.cast(pa.float64()), op, pa.scalar(math.inf))
    if number is not None:
        if pa.types.is_floating(t):
            if lit in INTEGERS and float(number) != number:
                raise Refused  # no exact double
            return _op(c.cast(pa.float64()), op, pa.scalar(float(Fraction(number))))
        if pa.types.is_integer(t) or pa.types.is_decimal(t):
            most = {"i8": 128, "i": 2**63, "d": 10**8, "w": 10**38}[col]
            if not (-most <= math.floor(number) and math.ceil(number) < most):
                raise Refused
            with localcontext(prec=100):
                exact = Decimal(Fraction(number).numerator) / Decimal(Fraction(number).denominator)
                return _op(c.cast(WIDE), op, pa.scalar(exact.quantize(Decimal(1).scaleb(-35)), WIDE))
        raise Refused
    if lit in TEXTS:
        value = lit[1:-1].replace("''", "'")
        if pa.types.is_string(t):
            return _op(c, op, pa.scalar(value))
        if value == "5" and pa.types.is_floating(t):  # text of a number is that number
            return _op(c.cast(pa.float64()), op, pa.scalar(5.0))
        if value == "5" and (pa.types.is_integer(t) or pa.types.is_decimal(t)):
            return _op(c.cast(WIDE), op, pa.scalar(Decimal(5), WIDE))
        if pa.types.is_date(t) and value == "2024-01-01":
            return _op(c, op, pa.scalar(datetime.date(2024, 1, 1)))
        if pa.types.is_timestamp(t) and t.tz is None and value == "2024-01-01":
            return _op(c.cast(pa.timestamp("ns")), op, pa.scalar(NS, pa.timestamp("ns")))
        raise Refused
    if lit in DATES:
        day = {"DATE '2023-12-31'": datetime.date(2023, 12, 31), "CAST('2024-01-02' AS DATE)":
               datetime.date(2024, 1, 2)}.get(lit, datetime.date(2024, 1, 1))
        if pa.types.is_date(t):
            return _op(c, op, pa.scalar(day))
        if pa.types.is_timestamp(t) and t.tz is None:
            ns = (day - datetime.date(1970, 1, 1)).days * 86400 * 10**9
            return _op(c.cast(pa.timestamp("ns")), op, pa.scalar(ns, pa.timestamp("ns")))
        raise Refused
    if lit in STAMP_TEXTS:
        ns, zoned = _stamp(lit)
        if pa.types.is_timestamp(t) and (t.tz is not None) == zoned:
            nt = pa.timestamp("ns", t.tz)
            return _op(c.cast(nt), op, pa.scalar(ns, nt))
        raise Refused
    if lit in ("TRUE", "FALSE") and pa.types.is_boolean(t):
        return _op(c, op, pa.scalar(lit == "TRUE"))
    raise Refused


def _op(c: pc.Expression, op: str, s: pa.Scalar) -> pc.Expression:
    v = pc.scalar(s)
    return {"=": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v, ">=": c >= v}[op]


@st.composite
def leaves(draw: Any) -> tuple[str, Any]:
    """A test as (SQL text, the pyarrow expression it means, or :class:`Refused`)."""
    col = draw(st.sampled_from([*COLUMNS, "w", "w"]))  # the wide decimal more often: its literals are the subtle ones
    t = COLUMNS[col]
    numeric = pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_floating(t)
    fits = (WIDE_NUMBERS if col == "w" else [n for n, _ in NUMBERS] if numeric
            else TEXTS if col == "s" else ["TRUE", "FALSE"] if col == "b" else [*DATES, "'2024-01-01'"]
            if col == "dt" else [*STAMP_TEXTS, *DATES, "'2024-01-01'"])
    everything = [n for n, _ in NUMBERS] + TEXTS + DATES + STAMP_TEXTS + OTHER
    lits = st.sampled_from(everything) if draw(st.integers(0, 9)) == 0 else st.sampled_from(fits)
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "or", "and", "between", "null", "isnan", "bool"]))
    if kind == "null":
        return f"{col} IS NULL", pc.field(col).is_null()
    if kind == "isnan":
        return f"isnan({col})", pc.is_nan(pc.field(col).cast(pa.float64())) if col in ("f", "g") else Refused
    if kind == "bool":
        return col, pc.field("b") if col == "b" else Refused
    text = ""
    try:
        if kind == "cmp":
            op, lit = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])), draw(lits)
            op = "!=" if op == "<>" else op
            if draw(st.booleans()):
                flip = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
                text = f"{lit} {op} {col}"
                return text, meaning(col, flip, lit)
            text = f"{col} {op} {lit}"
            return text, meaning(col, op, lit)
        values = draw(st.lists(lits, min_size=1, max_size=4))
        if kind == "between":
            lo, hi = values[0], values[-1]
            text = f"{col} BETWEEN {lo} AND {hi}"
            return text, meaning(col, ">=", lo) & meaning(col, "<=", hi)
        negate = draw(st.booleans())
        text = {"in": f"{col} {'NOT ' if negate else ''}IN ({', '.join(values)})",
                "or": " OR ".join(f"{col} = {v}" for v in values),
                "and": " AND ".join(f"{col} != {v}" for v in values)}[kind]
        anyof = meaning(col, "=", values[0])
        for v in values[1:]:
            anyof = anyof | meaning(col, "=", v)
        return text, ~anyof if kind == "and" or (kind == "in" and negate) else anyof
    except Refused:
        return text, Refused


@st.composite
def predicates(draw: Any, depth: int = 2) -> tuple[str, Any]:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(leaves())
    kind = draw(st.sampled_from(["and", "or", "not"]))
    a_text, a = draw(predicates(depth - 1))
    if kind == "not":
        return f"NOT ({a_text})", Refused if a is Refused else ~a
    b_text, b = draw(predicates(depth - 1))
    if a is Refused or b is Refused:
        return f"({a_text}) AND ({b_text})", Refused
    return f"({a_text}) {kind.upper()} ({b_text})", (a & b) if kind == "and" else (a | b)


@st.composite
def tables(draw: Any) -> pa.Table:
    n = draw(st.integers(1, 8))
    cols = {c: [draw(st.one_of(st.none(), st.sampled_from(POOLS[c]))) for _ in range(n)] for c in COLUMNS}
    cols["rid"] = list(range(n))
    return pa.table({c: pa.array(v, SCHEMA.field(c).type) for c, v in cols.items()}, schema=SCHEMA)


def _rids(t: pa.Table) -> list[int]:
    return sorted(t.column("rid").to_pylist())


@settings(max_examples=25, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=tables(), preds=st.lists(predicates(), min_size=6, max_size=10))
def test_sql_text_means_its_documented_pyarrow_expression(tmp_path_factory: Any, data: pa.Table,
                                                          preds: list[Any]) -> None:
    uri = str(tmp_path_factory.mktemp("t") / uuid.uuid4().hex)
    t = lakefmt.create_table(uri, SCHEMA)
    t.append(data)
    accepted = []
    for text, expr in preds:
        if expr is Refused:
            with pytest.raises(InvalidPredicateError):
                t.scan(filter=text)
            continue
        want = _rids(data.filter(expr))
        accepted.append((text, want))
        scan = t.scan(filter=text)
        assert _rids(scan.to_arrow()) == want, text
        assert scan.count() == len(want), text
        assert _rids(scan.to_duckdb().arrow().read_all()) == want, text
        assert _rids(scan.to_polars().collect().to_arrow()) == want, text
    refused = [text for text, expr in preds if expr is Refused]
    if refused:
        with pytest.raises(InvalidPredicateError):
            t.delete(refused[0])
        assert t.to_arrow().num_rows == data.num_rows
    if not accepted:
        return
    text, want = accepted[0]
    t.delete(text)
    assert _rids(t.to_arrow()) == sorted(set(range(data.num_rows)) - set(want)), text
    text, want = accepted[-1]
    m = lakefmt.create_table(uri + "m", SCHEMA)
    m.append(data)
    report = (m.merge(data.select(["rid"]), f"t.rid = s.rid AND ({text})", source_alias="s", target_alias="t")
              .when_matched_delete().execute())
    assert _rids(m.to_arrow()) == sorted(set(range(data.num_rows)) - set(want)), (text, report)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("f = 0", [0, 1]), ("f IN (0, 1)", [0, 1, 2]), ("f = 0 OR f = 1", [0, 1, 2]), ("f = -0.0", [0, 1]),
        ("f != 0 AND f != 1", [3]), ("f NOT IN (0, 1)", [3]), ("isnan(f)", [3]), ("NOT isnan(f)", [0, 1, 2]),
    ],
)
def test_in_or_and_equality_agree_on_signed_zero_and_nan(tmp_path: Any, text: str, want: list[int]) -> None:
    """Issue 36's rows: ``IN`` and ``OR`` dropped the -0.0 row that ``=`` selects, and ``!= AND !=`` deleted it."""
    data = pa.table({"f": [-0.0, 0.0, 1.0, math.nan], "rid": [0, 1, 2, 3]})
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema)
    t.append(data)
    assert _rids(t.to_arrow(filter=text)) == want
    t.delete(text)
    assert _rids(t.to_arrow()) == sorted(set(range(4)) - set(want))


@pytest.mark.parametrize(
    ("schema", "text", "match"),
    [
        (pa.schema([("created_ms", pa.int64())]), "created_ms < TIMESTAMP '2024-01-01 00:00:00'",
         r"cannot be compared with column created_ms of type int64: a timestamp, not a number"),
        (pa.schema([("ts", pa.timestamp("us"))]), "ts > 1704067200",
         r"cannot be compared with column ts of type timestamp\[us\]: a number, not a timestamp"),
        (pa.schema([("n", pa.int32())]), "n = DATE '2024-01-01'", r"a date, not a number"),
        (pa.schema([("n", pa.int32())]), "n = TRUE", r"TRUE cannot be compared with column n of type int32: a "
                                                      r"boolean, not a number$"),
        (pa.schema([("f", pa.float64())]), "f = 'nan'", r"select NaN rows with isnan\(f\)"),
        (pa.schema([("f", pa.float64())]), "f = CAST('NaN' AS DOUBLE)", r"NaN equals no value"),
    ],
)
def test_literals_with_a_unit_or_of_another_type_are_refused(tmp_path: Any, schema: pa.Schema, text: str,
                                                               match: str) -> None:
    """Issue 36: an int64 of milliseconds against a TIMESTAMP compared as microseconds, a number against a
    timestamp column as microseconds, and a delete removed every row."""
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({schema[0].name: pa.array([None], schema[0].type)}))
    with pytest.raises(InvalidPredicateError, match=match):
        t.delete(text)
    assert t.to_arrow().num_rows == 1


def test_wide_decimal_literals_are_read_and_computed_exactly(tmp_path: Any) -> None:
    """Review: a literal of more than 28 digits was rounded by Python's default decimal context, so a delete
    removed the wrong row; a bound of 38 digits at scale 37 was a raw ArrowInvalid."""
    second = 12345678901234567890123456790000000000  # BIG rounded to 28 digits
    w = pa.decimal128(38, 0)
    schema = pa.schema([("w", w), ("e", pa.decimal128(38, 37)), ("x", pa.decimal128(38, 30)),
                        ("y", pa.decimal256(60, 0))])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({
        "w": pa.array([Decimal(BIG), Decimal(second)], w),
        "e": pa.array([Decimal(1), Decimal(2)], pa.decimal128(38, 37)),
        "x": pa.array([Decimal(1), Decimal("1.000000000000000000000000000001")], pa.decimal128(38, 30)),
        "y": pa.array([Decimal(10**59 + 1), Decimal(10**59)], pa.decimal256(60, 0)),
    }))
    assert t.to_arrow(filter=f"w = {BIG}").column("w").to_pylist() == [Decimal(BIG)]
    assert t.to_arrow(filter=f"y = {10**59 + 1}").column("w").to_pylist() == [Decimal(BIG)]
    assert t.to_arrow(filter="x = 1.000000000000000000000000000001 + 0").column("w").to_pylist() == [Decimal(second)]
    assert t.to_arrow(filter="e < 9.9999999999999999999999999999999999999").num_rows == 2
    t.delete(f"w = {BIG}")
    assert t.to_arrow().column("w").to_pylist() == [Decimal(second)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("s = CAST(DATE '2026-01-01' AS STRING)", [0]), ("s = CAST(TRUE AS STRING)", [1]),
        ("s = CAST(-0.0 AS STRING)", [2]), ("s = CAST(1.50 AS STRING)", [3]), ("s = CAST(12 AS VARCHAR(5))", [4]),
        ("g = CAST(0.1 AS FLOAT)", [0]), ("g = CAST(1e-1 AS FLOAT)", [0]), ("g = 0.1", []),
        ("d = CAST(1.01 AS DECIMAL(5, 2))", [1]), ("i = CAST(300 AS SMALLINT)", [0]),
    ],
)
def test_casts_give_sparks_value(tmp_path: Any, text: str, want: list[int]) -> None:
    """Review: CAST(... AS STRING) wrote ``DATE '2026-01-01`` and ``TRUE`` (Spark: ``2026-01-01``, ``true``); a
    CAST to FLOAT stayed a double, so ``g = CAST(0.1 AS FLOAT)`` matched no float32 0.1 (Spark matches it)."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("s", pa.string()), ("g", pa.float32()),
                                                             ("d", pa.decimal128(10, 3)), ("i", pa.int32()),
                                                             ("rid", pa.int64())]))
    t.append(pa.table({"s": ["2026-01-01", "true", "0.0", "1.50", "12"],
                       "g": pa.array([0.1, 0.5, 1, 2, 3], pa.float32()),
                       "d": pa.array([Decimal("1.005"), Decimal("1.010"), None, None, None], pa.decimal128(10, 3)),
                       "i": pa.array([300, 1, 2, 3, 4], pa.int32()), "rid": list(range(5))}))
    assert _rids(t.to_arrow(filter=text)) == want


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("s = CAST(1e20 AS STRING)", r"the text of a double"),
        ("s = CAST(TIMESTAMP '2026-01-01 00:00:00' AS STRING)", r"the text of a timestamp"),
        ("d = CAST(1.005 AS DECIMAL(5, 2))", r"more than 2 decimal places: the cast would round it"),
        ("d = CAST(123456 AS DECIMAL(5, 2))", r"does not fit DECIMAL\(5, 2\)"),
        ("i = CAST(300 AS TINYINT)", r"300 is outside the range of TINYINT"),
        ("i = CAST(2.5 AS INT)", r"not a whole number"),
        ("g = CAST(1e39 AS FLOAT)", r"beyond the range of a FLOAT"),
        ("g > 1" + "0" * 400, r"1000000000.* beyond the range of a double"),
        ("g > 1" + "0" * 400 + ".5", r"beyond the range of a double"),
        ("g > 1e0 + 1" + "0" * 400, r"1000000000.* is beyond the range of a double"),
        ("g > 1e400", r"the number 1e400 is beyond the range of a double"),
        ("g > '1e400'", r"the number 1e400 is beyond the range of a double"),
        ("g = 1e308 * 10", r"1e\+308 \* 10 is beyond the range of a double"),
        ("i = 1" + "0" * 5000, r"the number 1000.* \(5001 characters\) has more than 1000 digits"),
        ("d = 1.5" + "0" * 120 + "1 * 2", r"has more than 100 digits"),
        ("s ILIKE '\u03c3'", r"ILIKE takes an ASCII pattern"),
    ],
)
def test_casts_and_literals_that_would_change_are_refused(tmp_path: Any, text: str, match: str) -> None:
    """Review: casts that round or overflow were accepted (Spark rounds 1.005 to 1.01, fails 300 as TINYINT), and
    literals beyond a double's range or Python's digit limit were raw OverflowError and ValueError."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("s", pa.string()), ("g", pa.float32()),
                                                             ("d", pa.decimal128(10, 3)), ("i", pa.int32())]))
    with pytest.raises(InvalidPredicateError, match=match):
        t.to_arrow(filter=text)


@pytest.mark.parametrize(
    ("text", "want"),
    [("s ILIKE 'abc'", [0, 1]), ("s ILIKE 'i'", [2]), ("s ILIKE 'k'", [4]), ("s ILIKE '_'", [2, 3, 4, 5]),
     ("s NOT ILIKE 'ABC'", [2, 3, 4, 5])],
)
def test_ilike_folds_ascii_letters_only(tmp_path: Any, text: str, want: list[int]) -> None:
    """Review: pyarrow's ignore_case folds Unicode (sigma matched final sigma; the Kelvin sign matched k), while dotted
    capital I did not match 'i': ILIKE folds A-Z only, every other character matches itself."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("s", pa.string()), ("rid", pa.int64())]))
    t.append(pa.table({"s": ["abc", "ABC", "i", "\u0130", "k", "\u212a"], "rid": list(range(6))}))
    assert _rids(t.to_arrow(filter=text)) == want


def test_merge_sets_the_text_spark_casts(tmp_path: Any) -> None:
    """Review: ``updates={"s": "CAST(DATE '2026-01-02' AS STRING)"}`` wrote ``DATE '2026-01-02``."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("rid", pa.int64()), ("s", pa.string())]))
    t.append(pa.table({"rid": [1, 2], "s": ["a", "b"]}))
    (t.merge(pa.table({"rid": [1, 2]}), "t.rid = s.rid", source_alias="s", target_alias="t")
     .when_matched_update({"s": "CAST(DATE '2026-01-02' AS STRING)"}, "t.rid = 1")
     .when_matched_update({"s": "CAST(FALSE AS STRING)"}).execute())
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["rid"]) == [{"rid": 1, "s": "2026-01-02"},
                                                                        {"rid": 2, "s": "false"}]
