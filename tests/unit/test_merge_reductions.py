"""The merge engines' reductions (rewrite.keys.engines) and their options (:mod:`lakefmt.spec.keys.merge_engine`):
each function over several rows of a key, nulls, the order of rows and of ``sequence.field``, the combination with
the live row, and the options refused."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakefmt.errors import InvalidOptionError, KeyTableError, UnknownOptionError
from lakefmt.meta.location import first_schema
from lakefmt.rewrite.keys.engines import merge_with_live, reduce_batch
from lakefmt.spec import TableSchema
from lakefmt.spec.keys.merge_engine import column_functions

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("s", pa.int32()),
        ("lo", pa.float64()),
        ("hi", pa.string()),
        ("c", pa.int64()),
        ("lv", pa.string()),
        ("lnn", pa.string()),
        ("plain", pa.string()),
    ]
)
AGG = {
    "merge-engine": "aggregation",
    "fields.s.aggregate-function": "sum",
    "fields.lo.aggregate-function": "min",
    "fields.hi.aggregate-function": "max",
    "fields.c.aggregate-function": "count",
    "fields.lv.aggregate-function": "last_value",
    "fields.lnn.aggregate-function": "last_non_null_value",
}


def schema_of(options: dict[str, str], schema: pa.Schema = SCHEMA, keys: tuple[str, ...] = ("id",)) -> TableSchema:
    return first_schema(schema, None, options, list(keys))


def rows(schema: pa.Schema = SCHEMA, **columns: list[Any]) -> pa.Table:
    n = len(next(iter(columns.values())))
    return pa.table({f.name: columns.get(f.name, [None] * n) for f in schema}, schema=schema)


def by_id(table: pa.Table) -> dict[Any, dict[str, Any]]:
    out = {r["id"]: r for r in table.to_pylist()}
    assert len(out) == table.num_rows, "one row per key"
    return out


def test_each_function_over_several_rows_of_a_key_with_nulls() -> None:
    ts = schema_of(AGG)
    batch = rows(
        id=[2, 1, 2, 2, 3],
        s=[1, None, 2, 3, None],
        lo=[1.5, 2.0, None, 0.5, None],
        hi=["a", "b", "c", None, None],
        c=[5, None, 7, None, None],
        lv=["x", "y", None, "z", None],
        lnn=["p", None, "q", None, None],
        plain=["one", None, None, "two", None],
    )
    out = reduce_batch(batch, ts)
    assert out.schema == ts.arrow_schema
    got = by_id(out)
    assert [r["id"] for r in out.to_pylist()] == [2, 1, 3]  # in the order of each key's first row
    assert got[2] == {"id": 2, "s": 6, "lo": 0.5, "hi": "c", "c": 2, "lv": "z", "lnn": "q", "plain": "two"}
    # a key whose values are all null: sum, min and max null, count 0, last values null
    assert got[3] == {"id": 3, "s": None, "lo": None, "hi": None, "c": 0, "lv": None, "lnn": None, "plain": None}
    assert got[1] == {"id": 1, "s": None, "lo": 2.0, "hi": "b", "c": 0, "lv": "y", "lnn": None, "plain": None}


def test_last_value_keeps_a_trailing_null_last_non_null_does_not() -> None:
    ts = schema_of(AGG)
    got = by_id(reduce_batch(rows(id=[1, 1], lv=["a", None], lnn=["a", None]), ts))
    assert got[1]["lv"] is None and got[1]["lnn"] == "a"


def test_merge_with_live_combines_each_function() -> None:
    ts = schema_of(AGG)
    reduced = reduce_batch(
        rows(
            id=[1, 2, 3],
            s=[1, None, 4],
            lo=[5.0, None, 1.0],
            hi=["m", None, "a"],
            c=[9, None, 1],
            lv=[None, "n", "n"],
            lnn=[None, "n", "n"],
        ),
        ts,
    )
    live = rows(
        id=[1, 2, 9],
        s=[10, 20, 30],
        lo=[2.0, 3.0, 0.0],
        hi=["z", "b", "q"],
        c=[3, 4, 5],
        lv=["L", "L", "L"],
        lnn=["L", "L", "L"],
        plain=["old", "old", "old"],
    )
    out = merge_with_live(live, reduced, ts)
    got = by_id(out)
    assert sorted(got) == [1, 2, 3]  # the live key 9 is not touched
    assert got[1] == {"id": 1, "s": 11, "lo": 2.0, "hi": "z", "c": 4, "lv": None, "lnn": "L", "plain": "old"}
    assert got[2] == {"id": 2, "s": 20, "lo": 3.0, "hi": "b", "c": 4, "lv": "n", "lnn": "n", "plain": "old"}
    assert got[3] == {"id": 3, "s": 4, "lo": 1.0, "hi": "a", "c": 1, "lv": "n", "lnn": "n", "plain": None}


def test_rows_across_batches_sum_and_count_as_one_batch() -> None:
    ts = schema_of(AGG)
    first = reduce_batch(rows(id=[1, 1, 2], s=[1, 2, 3], c=[0, 0, None]), ts)
    second = reduce_batch(rows(id=[1, 2, 2], s=[4, None, 5], c=[0, 0, 0]), ts)
    both = merge_with_live(first, second, ts)
    once = reduce_batch(rows(id=[1, 1, 2, 1, 2, 2], s=[1, 2, 3, 4, None, 5], c=[0, 0, None, 0, 0, 0]), ts)
    assert by_id(both) == by_id(once)
    assert by_id(both)[1]["s"] == 7 and by_id(both)[1]["c"] == 3 and by_id(both)[2]["c"] == 2


def test_partial_update_fills_non_null_fields() -> None:
    ts = schema_of({"merge-engine": "partial-update"})
    assert set(column_functions(ts).values()) == {"last_non_null_value"}
    reduced = reduce_batch(rows(id=[1, 1, 2], s=[None, 5, 1], hi=["b", None, None], lv=[None, None, "x"]), ts)
    live = rows(id=[1], s=[1], hi=["a"], lv=["keep"], plain=["p"])
    got = by_id(merge_with_live(live, reduced, ts))
    assert got[1] == {"id": 1, "s": 5, "lo": None, "hi": "b", "c": None, "lv": "keep", "lnn": None, "plain": "p"}
    assert got[2]["s"] == 1 and got[2]["lv"] == "x"


def test_first_row_keeps_the_first_row_and_the_live_row() -> None:
    ts = schema_of({"merge-engine": "first-row"})
    reduced = reduce_batch(rows(id=[1, 1, 2], s=[1, 2, 3], hi=[None, "later", "b"]), ts)
    assert by_id(reduced)[1]["s"] == 1 and by_id(reduced)[1]["hi"] is None  # the whole first row, nulls too
    got = by_id(merge_with_live(rows(id=[2], s=[9]), reduced, ts))
    assert got[2]["s"] == 9 and got[2]["hi"] is None and got[1]["s"] == 1


def test_deduplicate_is_the_last_row() -> None:
    ts = schema_of({})
    got = by_id(reduce_batch(rows(id=[1, 1], s=[1, None], hi=["a", "b"]), ts))
    assert got[1]["s"] is None and got[1]["hi"] == "b"


def test_sequence_field_orders_the_rows_and_keeps_its_largest_value() -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("seq", pa.int64()), ("v", pa.string()), ("t", pa.int64())]
    )
    ts = schema_of({"merge-engine": "partial-update", "sequence.field": "seq"}, schema)
    batch = rows(schema, id=[1, 1, 1], seq=[3, 1, None], v=["c", "a", "n"], t=[None, 10, 20])
    got = by_id(reduce_batch(batch, ts))
    assert got[1] == {"id": 1, "seq": 3, "v": "c", "t": 10}  # order: null, 1, 3
    agg = schema_of(
        {"merge-engine": "aggregation", "sequence.field": "seq", "fields.t.aggregate-function": "sum"}, schema
    )
    live = rows(schema, id=[1], seq=[7], v=["live"], t=[1])
    merged = by_id(merge_with_live(live, reduce_batch(batch, agg), agg))
    assert merged[1] == {"id": 1, "seq": 7, "v": "c", "t": 31}


def test_default_function_is_last_non_null_value_or_the_one_given() -> None:
    ts = schema_of({"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"})
    funcs = column_functions(ts)
    assert funcs["s"] == "sum" and funcs["plain"] == "last_non_null_value" and "id" not in funcs
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int64()), ("b", pa.float32())])
    ts = schema_of(
        {
            "merge-engine": "aggregation",
            "fields.default-aggregate-function": "max",
            "fields.b.aggregate-function": "sum",
        },
        schema,
    )
    assert column_functions(ts) == {"a": "max", "b": "sum"}
    got = by_id(reduce_batch(rows(schema, id=[1, 1], a=[5, 2], b=[0.5, 0.25]), ts))
    assert got[1] == {"id": 1, "a": 5, "b": 0.75}


def test_a_composite_key_and_empty_input() -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("k", pa.string(), nullable=False), ("s", pa.int64())]
    )
    ts = schema_of({"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"}, schema, ("id", "k"))
    got = reduce_batch(rows(schema, id=[1, 1, 1], k=["a", "b", "a"], s=[1, 2, 3]), ts).to_pylist()
    assert got == [{"id": 1, "k": "a", "s": 4}, {"id": 1, "k": "b", "s": 2}]
    assert reduce_batch(schema.empty_table(), ts).num_rows == 0
    assert merge_with_live(schema.empty_table(), schema.empty_table(), ts).num_rows == 0


def test_sum_keeps_the_column_type_and_refuses_an_overflow() -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.int8())])
    ts = schema_of({"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"}, schema)
    out = reduce_batch(rows(schema, id=[1, 1], s=[100, 20]), ts)
    assert out.schema.field("s").type == pa.int8() and out.column("s").to_pylist() == [120]
    with pytest.raises(KeyTableError, match="the sum of column 's' for a key does not fit its type int8"):
        reduce_batch(rows(schema, id=[1, 1], s=[100, 100]), ts)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"merge-engine": "replace"}, "unknown merge engine 'replace'"),
        ({"merge-engine": "aggregation", "fields.s.aggregate-function": "avg"}, "unknown aggregate function 'avg'"),
        ({"merge-engine": "aggregation", "fields.id.aggregate-function": "sum"}, "'id' is a primary-key column"),
        ({"merge-engine": "aggregation", "fields.hi.aggregate-function": "sum"}, "sum needs a numeric column"),
        ({"merge-engine": "aggregation", "fields.lo.aggregate-function": "count"}, "count needs an integer column"),
        ({"merge-engine": "aggregation", "fields.nope.aggregate-function": "sum"}, "'nope', which is not a column"),
        ({"merge-engine": "aggregation", "fields.default-aggregate-function": "sum"}, "sum needs a numeric column"),
        ({"fields.s.aggregate-function": "sum"}, "needs merge-engine=aggregation"),
        ({"merge-engine": "partial-update", "fields.s.aggregate-function": "sum"}, "needs merge-engine=aggregation"),
        ({"merge-engine": "first-row", "sequence.field": "c"}, "sequence.field cannot be used with"),
        (
            {"merge-engine": "aggregation", "sequence.field": "c", "fields.c.aggregate-function": "sum"},
            "is the table's sequence.field",
        ),
    ],
)
def test_options_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        schema_of(options)


def test_merge_engine_needs_a_key_table() -> None:
    with pytest.raises(InvalidOptionError, match="for key tables"):
        first_schema(SCHEMA, None, {"merge-engine": "aggregation"}, None)
    first_schema(SCHEMA, None, {"merge-engine": "deduplicate"}, None)  # the default, said aloud


def test_an_unknown_field_option_is_still_refused() -> None:
    with pytest.raises(UnknownOptionError):
        schema_of({"merge-engine": "aggregation", "fields.s.ignore-retract": "true"})
