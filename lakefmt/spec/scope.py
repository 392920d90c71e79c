"""What an overwrite replaces: its scope, bound to a table schema.

* the whole table;
* a partition, given by values of some or all partition keys (``{"dt": "2026-11-01"}``);
* the partitions matching a predicate on partition columns (``where="dt >= '2026-11-01' AND dt < '2026-12-01'"``,
  the SQL subset of :mod:`lakefmt.spec.sql.predicate`, or a pyarrow expression);
* dynamic: exactly the partitions the written rows fall in.

Every scope is decided by partition values alone (files are replaced whole, by metadata), so a written row
outside a partition or predicate scope is an error (:meth:`OverwriteScope.check_rows`), checked before any file
is written and again at commit on the written files' partition values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPartitionError, InvalidPredicateError
from lakefmt.spec.filters import referenced_columns
from lakefmt.spec.schema import TableSchema
from lakefmt.spec.sql.predicate import bind_predicate, columns, parse_predicate

__all__ = ["OverwriteScope", "ScopeKind", "names_data_columns"]

ScopeKind = Literal["table", "partition", "where", "dynamic"]
_INDEX = "__lakefmt_row__"


@dataclass(frozen=True)
class OverwriteScope:
    """An overwrite's scope, checked against and bound to a table schema (build it with :meth:`bind`).
    Picklable: a Spark task receives it to check its rows before it writes."""

    kind: ScopeKind
    partition_keys: tuple[str, ...]
    #: ``partition`` scope: the values, cast to the columns' types
    partition: dict[str, Any] = field(default_factory=dict)
    #: ``where`` scope: the predicate as given (text, or a pyarrow expression's text)
    where: str | None = None
    #: the partitions replaced, as an expression over the partition columns (None: every partition, unless
    #: ``written`` is set)
    expression: pc.Expression | None = None
    #: a dynamic scope bound to the written files (:meth:`for_written`): their partitions' values, in key order
    written: frozenset[tuple[Any, ...]] | None = None

    @classmethod
    def bind(
        cls,
        schema: TableSchema,
        *,
        partition: Mapping[str, Any] | None = None,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
    ) -> OverwriteScope:
        """The scope of an overwrite of ``schema``'s table: the whole table when nothing is given, else exactly
        one of ``partition``, ``where`` and ``dynamic``. Refuses a key or column that is not a partition key
        (:class:`InvalidPartitionError`) and a predicate outside the SQL subset (:class:`InvalidPredicateError`)."""
        asked = (("partition", bool(partition)), ("where", where is not None), ("dynamic", dynamic))
        given = [name for name, v in asked if v]
        if len(given) > 1:
            raise InvalidPartitionError(f"an overwrite takes one scope, got {' and '.join(given)}")
        keys = tuple(schema.partition_keys)
        if partition:
            values = normalize_partition(partition, schema)
            return cls("partition", keys, partition=values, expression=_equals(values, schema.partition_schema))
        if where is not None and not (isinstance(where, str) and not where.strip()):
            text, expr = _bind_where(where, schema)
            if constant_condition(expr, schema.partition_schema, text) is None:
                return cls("where", keys, where=text, expression=expr)
            return cls("table", keys)  # TRUE, NOT FALSE: the whole table
        if where is not None:
            raise InvalidPredicateError("an empty predicate; leave where out to overwrite the whole table")
        return cls("dynamic" if dynamic else "table", keys)

    def describe(self) -> str:
        """For messages: ``the table``, ``partition {'dt': 'a'}``, ``the partitions where dt = 'a'``..."""
        if self.kind == "partition":
            return f"partition {self.partition}"
        if self.kind == "where":
            return f"the partitions where {self.where}"
        return "the partitions written" if self.kind == "dynamic" else "the table"

    # -- rows --------------------------------------------------------------------------------------------------
    def check_rows(self, data: pa.Table | pa.RecordBatch) -> None:
        """Refuse rows outside a ``partition`` or ``where`` scope (:class:`InvalidPartitionError`, naming how
        many and the first one's partition values). Rows with a partition column missing are left to the
        schema check."""
        keys = self.partition_keys
        if self.expression is None or data.num_rows == 0 or any(k not in data.schema.names for k in keys):
            return
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        outside = table.select(list(self.partition_keys)).filter(~pc.coalesce(self.expression, pc.scalar(False)))
        if outside.num_rows:
            first = outside.slice(0, 1).to_pylist()[0]
            raise InvalidPartitionError(
                f"the data to overwrite {self.describe()} has {outside.num_rows} row(s) outside it (the first in "
                f"partition {first}); nothing was committed"
            )

    # -- files -------------------------------------------------------------------------------------------------
    def matching(self, partitions: pa.StructArray | pa.ChunkedArray) -> pa.Array:
        """Indices of the files (one partition-values struct each) this scope replaces."""
        n = len(partitions)
        if self.written is not None:
            keys = self.partition_keys
            hits = [i for i, p in enumerate(partitions.to_pylist()) if tuple(p[k] for k in keys) in self.written]
            return pa.array(hits, pa.int64())
        if self.expression is None:
            return pa.array(range(n), pa.int64())
        if isinstance(partitions, pa.ChunkedArray):
            partitions = partitions.combine_chunks() if partitions.num_chunks else pa.array([], partitions.type)
        assert isinstance(partitions, pa.StructArray)
        table = pa.Table.from_arrays(
            [partitions.field(k) for k in self.partition_keys] + [pa.array(range(n), pa.int64())],
            names=[*self.partition_keys, _INDEX],
        )
        return table.filter(self.expression).column(_INDEX).combine_chunks()

    def for_written(self, partitions: pa.StructArray | pa.ChunkedArray) -> OverwriteScope:
        """A dynamic scope bound to the partitions of the written files: exactly those are replaced. (No file
        written: nothing is replaced; an unpartitioned table has one partition, the whole table.)"""
        if self.kind != "dynamic":
            return self
        if isinstance(partitions, pa.ChunkedArray):
            partitions = partitions.combine_chunks() if partitions.num_chunks else pa.array([], partitions.type)
        if len(partitions) == 0:
            return OverwriteScope("dynamic", self.partition_keys, expression=pc.scalar(False))
        if not self.partition_keys:
            return self
        # a set, not an expression: one test per partition, for a backfill of thousands, overflows Arrow's stack
        written = frozenset(tuple(p[k] for k in self.partition_keys) for p in partitions.to_pylist())
        return OverwriteScope("dynamic", self.partition_keys, written=written)


def check_partition_given(partition: Mapping[str, Any] | None) -> None:
    """Refuse a ``partition`` given empty (``{}``, say a dict filtered down to nothing): it names no partition, and
    taken for "nothing given" it would replace the whole table."""
    if partition is not None and not partition:
        raise InvalidPartitionError(
            "an empty partition names no partition; leave partition out to overwrite the whole table"
        )


def normalize_partition(partition: Mapping[str, Any], schema: TableSchema) -> dict[str, Any]:
    """Partition values cast to their columns' types; a key that is not a partition key is refused."""
    out: dict[str, Any] = {}
    for key, value in partition.items():
        if key not in schema.partition_keys:
            raise InvalidPartitionError(
                f"{key!r} is not a partition key of this table "
                f"(partition keys: {list(schema.partition_keys) or 'none'})"
            )
        t = schema.arrow_schema.field(key).type
        if value is None:
            out[key] = None
            continue
        try:
            out[key] = pa.array([value]).cast(t)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidPartitionError(f"partition value {value!r} for {key!r} cannot be read as {t}: {exc}") from exc
    return out


def _equals(values: Mapping[str, Any], partition_schema: pa.Schema) -> pc.Expression:
    """``k1 == v1 AND k2 IS NULL ...``: a partition, null-safe."""
    expr: pc.Expression = pc.scalar(True)
    for key, value in values.items():
        col = pc.field(key)
        test = col.is_null() if value is None else col == pa.scalar(value, partition_schema.field(key).type)
        expr = expr & test
    return expr


def constant_condition(expr: pc.Expression, schema: pa.Schema, text: str) -> bool | None:
    """An overwrite's condition that names no column (``TRUE``, ``NOT FALSE``): True; one that is never true
    (``FALSE``) is an :class:`InvalidPartitionError`, since it replaces no row and admits none of the new rows;
    None for a condition on columns."""
    if referenced_columns(expr, schema):
        return None
    if pa.table({"row": [0]}).filter(expr).num_rows:
        return True
    raise InvalidPartitionError(
        f"overwrite where {text}: the condition is not true for any row, so it would replace no row and admit none "
        "of the new rows (each must satisfy it); nothing was committed. Leave where out to replace the whole table, "
        "or append the rows"
    )


def _bind_where(where: str | pc.Expression, schema: TableSchema) -> tuple[str, pc.Expression]:
    keys = list(schema.partition_keys)
    if isinstance(where, pc.Expression):
        try:
            schema.partition_schema.empty_table().filter(where)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidPredicateError(
                f"where {where}: not a boolean expression over the partition columns "
                f"({', '.join(keys) or 'none: the table is not partitioned'}): {exc}"
            ) from None
        return str(where), where
    if not isinstance(where, str):
        raise TypeError(f"where must be a string or a pyarrow expression, got {type(where).__name__}")
    pred = parse_predicate(where)
    resolved = {c: _resolve_name(c, schema, where) for c in columns(pred)}
    others = sorted(c for c, name in resolved.items() if name not in keys)
    if others:
        raise InvalidPredicateError(
            f"{where!r} refers to {', '.join(others)}, which {'is' if len(others) == 1 else 'are'} not a partition "
            f"column (partition columns: {', '.join(keys) or 'none, the table is not partitioned'}); a committer's "
            "overwrite replaces whole files by their partition. To replace the rows that match a data column "
            "(row-level deletes and the new rows in one commit), use Table.overwrite(data, where=...) or "
            "write_table(..., mode='overwrite', predicate=...)"
        )
    return where, bind_predicate(pred, schema.partition_schema, where)


def names_data_columns(where: str | pc.Expression, schema: TableSchema) -> bool:
    """Whether an overwrite's ``where`` (SQL text or a pyarrow expression) refers to a column that is not a partition
    key: then it selects rows, not partitions (:meth:`lakefmt.Table.overwrite` replaces them by a row-level delete).
    Text naming an unknown column is an :class:`InvalidPredicateError`."""
    keys = set(schema.partition_keys)
    if isinstance(where, pc.Expression):
        return any(c not in keys for c in referenced_columns(where, schema.arrow_schema))
    if not isinstance(where, str):
        raise TypeError(f"where must be a string or a pyarrow expression, got {type(where).__name__}")
    if not where.strip():
        return False
    pred = parse_predicate(where)
    return any(_resolve_name(c, schema, where) not in keys for c in columns(pred))


def _resolve_name(name: str, schema: TableSchema, text: str) -> str:
    names: list[str] = list(schema.arrow_schema.names)
    if name in names:
        return name
    matches = [n for n in names if n.lower() == name.lower()]
    if len(matches) != 1:
        raise InvalidPredicateError(f"{text!r}: no column {name!r}; columns: {', '.join(names)}")
    return matches[0]
