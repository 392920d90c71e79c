"""SQL predicate text over a table's columns (a filter, ``overwrite(where=)``, Spark's ``replaceWhere``): parsed by
:mod:`lakefmt.spec.sql.tree` (sqlglot, Spark's dialect) and bound by :mod:`lakefmt.spec.sql.bind`, whose rules
``docs/filters.md`` writes down. A predicate tests columns against literals: comparisons, ``[NOT] IN``,
``[NOT] BETWEEN``, ``[NOT] LIKE``, ``IS [NOT] NULL``, ``isnan(c)``, a boolean column alone, ``AND``, ``OR``,
``NOT``; literals may be computed (``date_sub(current_date(), 7)``, ``CAST('1.5' AS DECIMAL(3, 1))``, ``2 * 60``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPredicateError
from lakefmt.spec.sql.bind import MAX_TESTS, any_of, bind_sql
from lakefmt.spec.sql.tree import Expr, Ref, columns, parse_sql, short

__all__ = ["MAX_TESTS", "Predicate", "any_of", "bind_predicate", "columns", "parse_predicate", "resolve_field"]

#: a parsed predicate (the tree of :mod:`lakefmt.spec.sql.tree`)
Predicate = Expr


def parse_predicate(text: str) -> Predicate:
    """Parse ``text``; :class:`InvalidPredicateError` names what is wrong and where."""
    if not isinstance(text, str):
        raise TypeError(f"a predicate must be a string, got {type(text).__name__}")
    return parse_sql(text)


def resolve_field(name: str, schema: pa.Schema, text: str) -> pa.Field:
    """The field of ``schema`` that ``name`` names: matched exactly, else case-insensitively when unambiguous."""
    if name in schema.names and schema.names.count(name) == 1:
        return schema.field(name)
    matches = [f for f in schema if f.name.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    raise InvalidPredicateError(
        f"{short(text)}: no column {name!r}" + (" (ambiguous in case)" if matches else "")
        + f"; columns: {', '.join(schema.names) or 'none'}"
    )


def bind_predicate(pred: Predicate, schema: pa.Schema, text: str = "") -> pc.Expression:
    """A pyarrow expression of ``pred`` over the columns of ``schema``; :class:`InvalidPredicateError` for an
    unknown column, a literal of another type (see :mod:`lakefmt.spec.sql.bind`) or a form a filter cannot take."""

    def resolve(ref: Ref) -> tuple[pc.Expression, pa.DataType]:
        if ref.qualifier is not None:
            raise InvalidPredicateError(
                f"{short(text)}: no column {ref} (a filter names the table's columns without a qualifier; "
                f"columns: {', '.join(schema.names) or 'none'})"
            )
        f = resolve_field(ref.name, schema, text)
        return pc.field(f.name), f.type

    return bind_sql(pred, resolve, text)
