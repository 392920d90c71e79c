"""SQL predicate text as a row filter: the one place that turns ``"id > 3 AND dt = '2026-11-01'"`` into a pyarrow
expression over a table's columns, for every API that takes a filter (``scan``, ``to_arrow``, ``delete``,
``changes``, ``read_files``, the engine one-liners, the Spark delete). The grammar is that of
:mod:`lakefmt.spec.predicate` (what ``overwrite(where=)`` takes); the rows selected are exactly those the bound
expression selects in pyarrow, with SQL's rule that a row where the predicate is null is not selected.

A long ``IN`` list also gets its least and greatest value as a range beside it (``c >= lo AND c <= hi AND c IN
(...)``, the same rows under SQL's three-valued logic): pyarrow's simplifier rules files out by min/max against an
``IN`` list only up to about 50 values, against a range always.
"""

from __future__ import annotations

import contextlib
import datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.spec.predicate import And, Compare, InList, Not, Or, Predicate, bind_predicate, parse_predicate

__all__ = ["SIMPLIFIED_IN", "bind_text"]

#: pyarrow's expression simplifier rules files out by an ``IN`` list under min/max only up to about 50 values
SIMPLIFIED_IN = 50


def bind_text(text: str, schema: pa.Schema) -> pc.Expression:
    """The pyarrow expression of the SQL predicate ``text`` over the columns of ``schema`` (names resolved exactly,
    else case-insensitively; literals cast to their column's type). :class:`~lakefmt.errors.InvalidPredicateError`
    names what is wrong: a syntax error and its position, an unknown column and the table's columns, a literal of
    the wrong type."""
    pred = parse_predicate(text)
    with contextlib.suppress(RecursionError):  # thousands of tests chained: bound as they are
        pred = _ranged(pred, schema)
    return bind_predicate(pred, schema, text)


def _ranged(pred: Predicate, schema: pa.Schema) -> Predicate:
    """``pred`` with every ``IN`` list longer than :data:`SIMPLIFIED_IN` as ``c >= min AND c <= max AND c IN
    (...)``: the same rows under SQL's three-valued logic (a value in the list lies between its least and greatest
    value; a null is unknown either way), but min/max pruning now rules out the files outside that range. Only
    where the literals order as the column does (:func:`_orders_as_column`): the least of ``'9', '10'`` as text
    is not the least as numbers, nor that of ``'2026-01-01 05:00:00', '2026-01-01T01:00:00'`` as timestamps, and
    a range of the wrong ends would keep rows the list selects."""
    if isinstance(pred, InList) and len(pred.values) > SIMPLIFIED_IN and _orders_as_column(pred, schema):
        try:
            low, high = min(pred.values), max(pred.values)
        except TypeError:  # values of mixed kinds: binding names the problem
            return pred
        return And(Compare(pred.column, ">=", low), And(Compare(pred.column, "<=", high), pred))
    if isinstance(pred, Not):
        return Not(_ranged(pred.operand, schema))
    if isinstance(pred, And | Or):
        return type(pred)(_ranged(pred.left, schema), _ranged(pred.right, schema))
    return pred


def _orders_as_column(pred: InList, schema: pa.Schema) -> bool:
    """Whether Python orders the literals of ``pred`` as its column's type orders their bound values: numbers
    for a numeric column, dates (``DATE '...'``) for a date column, text for a text column (code points order
    as UTF-8 bytes). Text bound to a number, a date or a timestamp is parsed, and orders otherwise."""
    fields = [f for f in schema if f.name == pred.column] or [
        f for f in schema if f.name.lower() == pred.column.lower()
    ]
    if len(fields) != 1:  # unknown or ambiguous: binding names the problem
        return False
    t = fields[0].type
    values = pred.values
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return all(isinstance(v, str) for v in values)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in values)
    if pa.types.is_date(t):
        return all(isinstance(v, datetime.date) and not isinstance(v, datetime.datetime) for v in values)
    return False
