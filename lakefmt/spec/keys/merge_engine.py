"""The merge engines of key tables (Paimon's ``merge-engine``): the options that say how the rows written for one key
combine, resolved per column and checked against the schema.

* ``deduplicate`` (the default): the last row written for a key wins (or the largest ``sequence.field``);
* ``partial-update``: a new row's non-null fields replace the old row's; its nulls keep the old values;
* ``aggregation``: each non-key column is folded by its ``fields.<f>.aggregate-function`` (default
  ``fields.default-aggregate-function``, else ``last_non_null_value``, as in Paimon);
* ``first-row``: the first row written for a key stays; later rows for it are ignored.

How the rows are folded: :mod:`lakefmt.rewrite.keys.engines`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lakefmt.errors import InvalidOptionError
from lakefmt.options import TableOptions
from lakefmt.spec.schema import TableSchema

__all__ = ["DEDUPLICATE", "check_merge_engine", "column_functions"]

DEDUPLICATE = "deduplicate"
_DEFAULT = "last_non_null_value"


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def _orderable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


def column_functions(schema: TableSchema) -> dict[str, str]:
    """Per non-key column of ``schema``, the function its values of one key are folded with under the table's merge
    engine: ``aggregation``: its ``fields.<f>.aggregate-function``, the default one or ``last_non_null_value``;
    ``partial-update``: ``last_non_null_value``; ``deduplicate``: ``last_value``; ``first-row``: ``first_value``.
    The ``sequence.field`` of a ``partial-update`` or ``aggregation`` table folds with ``max``."""
    options = schema.table_options
    engine = options.merge_engine
    given = dict(options.aggregate_functions)
    default = {
        "aggregation": options.default_aggregate_function or _DEFAULT,
        "partial-update": _DEFAULT,
        "first-row": "first_value",
    }.get(engine, "last_value")
    out: dict[str, str] = {}
    for name in schema.arrow_schema.names:
        if name in schema.primary_keys:
            continue
        out[name] = given.get(name, default) if engine == "aggregation" else default
    seq = options.sequence_field
    if seq is not None and seq in out and engine in ("aggregation", "partial-update"):
        out[seq] = "max"
    return out


def check_merge_engine(arrow_schema: pa.Schema, primary_keys: Sequence[str], options: TableOptions) -> None:
    """Refuse a merge engine the table cannot have (:class:`InvalidOptionError`, naming the option and why): one
    other than ``deduplicate`` on a table without a primary key, an aggregate function without
    ``merge-engine=aggregation``, on a column that does not exist, on a key column or on the ``sequence.field``,
    ``sum`` on a column that is not a number, ``count`` on one that is not an integer, ``min``/``max`` on a
    nested column, and ``sequence.field`` with ``first-row`` (the first row written stays, whatever its
    sequence value)."""
    engine = options.merge_engine
    given = dict(options.aggregate_functions)
    if not primary_keys:
        if engine != DEDUPLICATE or given or options.default_aggregate_function is not None:
            raise InvalidOptionError(
                f"option merge-engine={engine} and aggregate functions are for key tables: pass primary_key=[...] "
                "as well"
            )
        return
    if engine != "aggregation" and (given or options.default_aggregate_function is not None):
        named = [f"fields.{f}.aggregate-function" for f in sorted(given)] or ["fields.default-aggregate-function"]
        raise InvalidOptionError(
            f"option {named[0]} needs merge-engine=aggregation (the table's merge engine is {engine})"
        )
    if engine == "first-row" and options.sequence_field is not None:
        raise InvalidOptionError(
            "option sequence.field cannot be used with merge-engine=first-row: the first row written for a key "
            "stays, whatever its sequence value"
        )
    names = arrow_schema.names
    for column in sorted(given):
        key = f"fields.{column}.aggregate-function"
        if column not in names:
            raise InvalidOptionError(
                f"option {key} names {column!r}, which is not a column (columns: {', '.join(names)})"
            )
        if column in primary_keys:
            raise InvalidOptionError(f"option {key}: {column!r} is a primary-key column, which is never aggregated")
        if column == options.sequence_field:
            raise InvalidOptionError(
                f"option {key}: {column!r} is the table's sequence.field, which orders the rows and keeps its "
                "largest value; it takes no aggregate function"
            )
    if engine != "aggregation":
        return
    functions = {
        c: given.get(c, options.default_aggregate_function or _DEFAULT)
        for c in names
        if c not in primary_keys and c != options.sequence_field
    }
    for column, function in functions.items():
        t = arrow_schema.field(column).type
        key = f"fields.{column}.aggregate-function" if column in given else "fields.default-aggregate-function"
        if function == "sum" and not _numeric(t):
            raise InvalidOptionError(f"option {key}: sum needs a numeric column; {column!r} is of type {t}")
        if function == "count" and not pa.types.is_integer(t):
            raise InvalidOptionError(f"option {key}: count needs an integer column; {column!r} is of type {t}")
        if function in ("min", "max") and not _orderable(t):
            raise InvalidOptionError(f"option {key}: {function} needs an ordered column; {column!r} is of type {t}")
