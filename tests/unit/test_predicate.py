"""The SQL predicate subset (an overwrite's ``where``, Spark's ``replaceWhere``): what parses, what binds to which
rows under SQL's null rules, and what is refused with the position named."""

from __future__ import annotations

import datetime
import pickle

import pyarrow as pa
import pytest

from lakefmt.errors import InvalidPartitionError, InvalidPredicateError
from lakefmt.spec import TableSchema
from lakefmt.spec.scope import OverwriteScope
from lakefmt.spec.sql.predicate import bind_predicate, columns, parse_predicate

SCHEMA = pa.schema([("dt", pa.string()), ("n", pa.int64()), ("day", pa.date32()), ("ok", pa.bool_())])
ROWS = pa.table(
    {
        "dt": ["a", "b", "c", None, "it's"],
        "n": [1, 2, 3, 4, None],
        "day": [datetime.date(2026, 11, d) for d in (1, 2, 3, 4, 5)],
        "ok": [True, False, None, True, False],
    },
    schema=SCHEMA,
)


def matching(text: str) -> list[int]:
    """Indices (0-4) of ROWS where ``text`` is true."""
    expr = bind_predicate(parse_predicate(text), SCHEMA, text)
    indexed = ROWS.append_column("i", pa.array(range(ROWS.num_rows)))
    return indexed.filter(expr).column("i").to_pylist()


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("dt = 'a'", [0]),
        ("dt == 'a'", [0]),
        ("'a' = dt", [0]),
        ("DT = 'a'", [0]),  # case-insensitive when unambiguous, as in Spark
        ("`dt` = \"b\"", [1]),
        ("dt != 'a'", [1, 2, 4]),  # null is unknown, not different
        ("dt <> 'a'", [1, 2, 4]),
        ("dt >= 'b' AND dt < 'c'", [1]),
        ("dt IN ('a', 'c')", [0, 2]),
        ("dt NOT IN ('a', 'c')", [1, 4]),  # SQL: NULL NOT IN (...) is unknown
        ("dt IS NULL", [3]),
        ("dt is not null and n > 1", [1, 2]),
        ("NOT (dt = 'a' OR dt = 'b')", [2, 4]),
        ("not dt = 'a'", [1, 2, 4]),
        ("n BETWEEN 2 AND 3", [1, 2]),
        ("n NOT BETWEEN 2 AND 3", [0, 3]),
        ("n >= -1 and n < 2e0", [0]),
        ("day = DATE '2026-11-02'", [1]),
        ("day >= '2026-11-04'", [3, 4]),  # a text literal cast to the column's type
        ("dt = 'it''s'", [4]),
        ("dt = 'it\\'s'", [4]),
        ("ok = true", [0, 3]),
        ("ok = FALSE or dt = 'c'", [1, 2, 4]),
        ("ok", [0, 3]),  # a boolean column alone is a condition
        ("NOT ok", [1, 4]),
        ("dt LIKE 'a%' OR dt ILIKE 'B'", [0, 1]),
        ("dt NOT LIKE '%''%'", [0, 1, 2]),
        ("n > 1.5", [1, 2, 3]),  # exact: n >= 2, never rounded
        ("n = 3.0", [2]),
        ("n = 2.5 OR n IN (1.5, 4)", [3]),  # 2.5 and 1.5 equal no integer
        ("day > date_sub(DATE '2026-11-03', 1)", [2, 3, 4]),
        ("day = CAST('2026-11-01' AS DATE) + 1", [1]),
        ("n < 2 * 2 - 1", [0, 1]),
        ("(dt = 'a' or dt = 'b') and (n = 2)", [1]),
        ("dt = 'a' or dt = 'b' and n = 3", [0]),  # AND binds tighter than OR
    ],
)
def test_predicates_match_the_rows_sql_would(text: str, rows: list[int]) -> None:
    assert matching(text) == rows


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "an empty predicate"),
        ("dt =", "expected a value, at '=' (position 4)"),
        ("dt = 'a' AND", "expected a value, at 'AND' (position 10)"),
        ("dt = 'a' dt = 'b'", "expected AND, OR or the end, at '=' (position 13)"),
        ("dt = n", "comparing two columns is not supported"),
        ("upper(dt) = 'A'", "UPPER(dt): functions are not supported, except isnan(c), current_date()"),
        ("n + 1 = 2", "arithmetic on a column (the + expression) is not supported in a filter"),
        ("dt = NULL", "NULL never matches in a comparison; use dt IS NULL"),
        ("dt IN ('a', NULL)", "use dt IS NULL"),
        ("dt IN ()", "an empty IN list"),
        ("(dt = 'a'", "Expecting ), at \"'a'\" (position 7)"),
        ("dt = 'a", "an unclosed quote"),
        ("day = DATE 'soon'", "expected a date as 'yyyy-mm-dd'"),
        ("dt IS 'a'", "only IS [NOT] NULL is supported"),
        ("dt = 'a'; DROP TABLE t", "one expression expected, found 2 statements"),
        ("dt = 'a' 'b'", "two text literals in a row at position 10 (Spark joins them): write one literal"),
        ("n", "n is of type int64, not a condition"),
        ("1 = 1", "compares two literals"),
    ],
)
def test_what_is_outside_the_subset_is_refused_with_the_position(text: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        bind_predicate(parse_predicate(text), SCHEMA, text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x = 1", "no column 'x'; columns: dt, n, day, ok"),
        ("n = 'many'", "'many' cannot be compared with column n of type int64"),
        ("ok = 1", "1 cannot be compared with column ok of type bool"),
        ("dt = true", "TRUE cannot be compared with column dt of type string"),
        ("n = TRUE", "TRUE cannot be compared with column n of type int64: a boolean, not a number"),
        ("day = 5", "5 cannot be compared with column day of type date32[day]: a number, not a date"),
        ("n = 99999999999999999999", "cannot be compared with column n of type int64"),
    ],
)
def test_binding_refuses_unknown_columns_and_mistyped_values(text: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        bind_predicate(parse_predicate(text), SCHEMA, text)
    assert message in str(info.value)


def test_columns_of_a_predicate() -> None:
    assert columns(parse_predicate("dt = 'a' AND (n > 1 OR NOT day IS NULL)")) == {"dt", "n", "day"}


# -- scopes ----------------------------------------------------------------------------------------------------
TABLE = TableSchema(0, pa.schema([("id", pa.int64()), ("dt", pa.string()), ("n", pa.int64())]), ("dt", "n"))


def test_a_scope_refuses_data_columns_and_two_scopes_at_once() -> None:
    with pytest.raises(InvalidPredicateError, match=r"'id > 3' refers to id, which is not a partition column "
                       r"\(partition columns: dt, n\).*row-level deletes"):
        OverwriteScope.bind(TABLE, where="id > 3")
    with pytest.raises(InvalidPartitionError, match="an overwrite takes one scope, got partition and where"):
        OverwriteScope.bind(TABLE, partition={"dt": "a"}, where="dt = 'a'")
    with pytest.raises(InvalidPartitionError, match="'id' is not a partition key"):
        OverwriteScope.bind(TABLE, partition={"id": 1})
    with pytest.raises(InvalidPredicateError, match="empty predicate"):
        OverwriteScope.bind(TABLE, where="  ")


def test_a_scope_checks_rows_and_travels_pickled() -> None:
    scope = pickle.loads(pickle.dumps(OverwriteScope.bind(TABLE, where="dt = 'a' AND n IN (1, 2)")))
    inside = pa.table({"id": [1, 2], "dt": ["a", "a"], "n": [1, 2]})
    scope.check_rows(inside)
    scope.check_rows(inside.to_batches()[0])
    outside = pa.table({"id": [1, 2, 3], "dt": ["a", "a", None], "n": [1, 3, 1]})
    with pytest.raises(InvalidPartitionError) as info:
        scope.check_rows(outside)
    assert str(info.value) == (
        "the data to overwrite the partitions where dt = 'a' AND n IN (1, 2) has 2 row(s) outside it "
        "(the first in partition {'dt': 'a', 'n': 3}); nothing was committed"
    )
    part = OverwriteScope.bind(TABLE, partition={"dt": "a"})
    with pytest.raises(InvalidPartitionError, match=r"partition \{'dt': 'a'\} has 1 row\(s\) outside it"):
        part.check_rows(outside)
    for whole in (OverwriteScope.bind(TABLE), OverwriteScope.bind(TABLE, dynamic=True)):
        whole.check_rows(outside)  # every row is inside the table, and inside the partitions it is in
