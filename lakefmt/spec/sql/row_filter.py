"""SQL predicate text as a row filter: the one place that turns ``"id > 3 AND dt = '2026-11-01'"`` into a pyarrow
expression over a table's columns, for every API that takes a filter (``scan``, ``to_arrow``, ``delete``,
``changes``, ``read_files``, the engine one-liners, the Spark delete). The language and its meaning are those of
:mod:`lakefmt.spec.sql.predicate` (``docs/filters.md``); the rows selected are exactly those the bound expression
selects in pyarrow, with SQL's rule that a row where the predicate is null is not selected.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.spec.sql.bind import SIMPLIFIED_IN
from lakefmt.spec.sql.predicate import bind_predicate, parse_predicate

__all__ = ["SIMPLIFIED_IN", "bind_text"]


def bind_text(text: str, schema: pa.Schema) -> pc.Expression:
    """The pyarrow expression of the SQL predicate ``text`` over the columns of ``schema`` (names resolved exactly,
    else case-insensitively; literals in their column's type). :class:`~lakefmt.errors.InvalidPredicateError`
    names what is wrong: a syntax error and its position, an unknown column and the table's columns, a literal of
    another type."""
    return bind_predicate(parse_predicate(text), schema, text)
