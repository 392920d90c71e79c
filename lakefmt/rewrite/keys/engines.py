"""The merge engines' reductions (``merge-engine``: :mod:`lakefmt.spec.keys.merge_engine`): how the rows written for one
key of a key table become one row. Pure functions on Arrow tables, no I/O.

Two steps, because a key's live row is not one more input but the result of every earlier write:

* :func:`reduce_batch` folds the rows one commit writes for each key, in the order written (with ``sequence.field``,
  ordered by it first: a null value first, ties in the order written), into one row per key;
* :func:`merge_with_live` combines each such row with the key's live row, the older one.

Per column, the functions (Paimon's names and semantics; a null input never changes a result but ``last_value``'s):

============================  ==============================================  =====================================
function                      one commit's rows of a key                      with the live row
============================  ==============================================  =====================================
``sum``                       the sum of the non-null values (null if none)   live + new (a null side is skipped)
``min`` / ``max``             the smallest / largest non-null value           the smaller / larger of the two
``count``                     how many of the values are non-null             live + new
``last_value``                the last value, null included                   the new value
``last_non_null_value``       the last non-null value                         the new value, or the live one if null
``first_value`` (first-row)   the first row's value                           the live value (the key's first row)
============================  ==============================================  =====================================

``partial-update`` is ``last_non_null_value`` on every column; ``deduplicate`` is ``last_value``; the
``sequence.field`` of a ``partial-update`` or ``aggregation`` table keeps its largest value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import KeyTableError
from lakefmt.spec import TableSchema
from lakefmt.spec.keys.merge_engine import column_functions

__all__ = ["fold", "merge_rows", "merge_with_live", "reduce_batch"]

_GID = "__lakefmt_group"
#: a function over a commit's rows -> the function that combines the live row's value with their result
_COMBINE = {"count": "sum"}
_HASHED = {"sum", "min", "max", "count"}


def reduce_batch(rows: pa.Table, schema: TableSchema) -> pa.Table:
    """One row per key of ``rows`` (rows of ``schema``'s columns, the rows one commit writes, in the order written):
    each non-key column folded by its function under the table's merge engine (see the module's table). With
    ``sequence.field`` (``partial-update``, ``aggregation``, ``deduplicate``) the rows of a key are taken in the
    order of their sequence values (a null value first; ties in the order written)."""
    options = schema.table_options
    seq = options.sequence_field
    rows = rows.select(schema.arrow_schema.names)
    if seq is not None and options.merge_engine != "first-row" and rows.num_rows > 1:
        valid = "__lakefmt_valid"  # a null sequence value first: sorted by validity, then by value (stable)
        ordered = pa.table({valid: pc.is_valid(rows.column(seq)), seq: rows.column(seq)})
        rows = rows.take(pc.sort_indices(ordered, sort_keys=[(valid, "ascending"), (seq, "ascending")]))
    return fold(rows, schema.primary_keys, column_functions(schema))


def merge_with_live(live: pa.Table, reduced: pa.Table, schema: TableSchema) -> pa.Table:
    """Each row of ``reduced`` (:func:`reduce_batch`'s result) combined with the live row of its key in ``live``
    (rows of ``schema``'s columns, at most one per key; a key without one keeps its reduced row): one row per key
    of ``reduced``, the keys of ``live`` that ``reduced`` lacks left out."""
    names = schema.arrow_schema.names
    reduced = reduced.select(names)
    if live.num_rows == 0:
        return reduced
    functions = {c: _COMBINE.get(f, f) for c, f in column_functions(schema).items()}
    stacked = pa.concat_tables([live.select(names).cast(reduced.schema), reduced])
    merged = fold(stacked, schema.primary_keys, functions)
    wanted = reduced.select(list(schema.primary_keys))
    order = wanted.append_column("__lakefmt_want", pa.array(np.arange(wanted.num_rows, dtype=np.int64)))
    joined = merged.join(order, list(schema.primary_keys), join_type="inner", use_threads=False)
    joined = joined.take(pc.sort_indices(joined.column("__lakefmt_want")))
    return joined.select(names).cast(reduced.schema)


def merge_rows(live: pa.Table, rows: pa.Table, schema: TableSchema) -> pa.Table:
    """One row per key of ``rows`` (the new rows one commit writes, in the order written): the key's live row in
    ``live`` (at most one per key; a key without one starts from nothing) and its new rows folded together, in
    one pass, as :func:`merge_with_live` of :func:`reduce_batch` but exact under ``sequence.field``: the live row
    takes its place among the new rows by its sequence value (a null first; on a tie it comes before the new
    rows, which are later), so a row that arrives late (an older sequence value than the live row's) does not
    override newer values, as under ``deduplicate`` (format.md §22.5). A ``count`` column counts the new rows'
    non-null values and adds the live row's count."""
    names = schema.arrow_schema.names
    functions = column_functions(schema)
    rows = rows.select(names)
    counted = [c for c, f in functions.items() if f == "count"]
    for c in counted:  # a new row counts 1 where it holds a value; the live row holds its count
        i = rows.schema.get_field_index(c)
        ones = pc.is_valid(rows.column(c)).cast(pa.int64()).cast(rows.schema.field(c).type)
        rows = rows.set_column(i, rows.schema.field(c), ones)
    live = live.select(names).cast(rows.schema)
    origin = "__lakefmt_origin"
    stacked = pa.concat_tables([live, rows]).append_column(
        origin, pa.array(np.arange(live.num_rows + rows.num_rows, dtype=np.int64))
    )
    seq = schema.table_options.sequence_field
    if seq is not None and stacked.num_rows > 1:
        valid = "__lakefmt_valid"
        ordered = stacked.append_column(valid, pc.is_valid(stacked.column(seq)))
        stacked = stacked.take(
            pc.sort_indices(ordered, sort_keys=[(valid, "ascending"), (seq, "ascending"), (origin, "ascending")])
        )
    functions = {c: _COMBINE.get(f, f) for c, f in functions.items()}
    merged = fold(stacked.drop_columns([origin]), schema.primary_keys, functions)
    keys = list(schema.primary_keys)
    # the keys of ``rows`` only (a live row without new rows is not this commit's), in the order of their first row
    return merged.join(rows.select(keys), keys, join_type="left semi", use_threads=False).select(names)


def fold(rows: pa.Table, keys: Sequence[str], functions: Mapping[str, str]) -> pa.Table:
    """One row per key of ``rows``, in the order of each key's first row: the key columns, and each column of
    ``functions`` folded over the key's rows in order by its function (``sum``, ``min``, ``max``, ``count``,
    ``last_value``, ``last_non_null_value``, ``first_value``); results keep the column's type."""
    keys = list(keys)
    n = rows.num_rows
    columns = [c for c in rows.column_names if c in keys or c in functions]
    if n == 0:
        return rows.select(columns)
    numbered = rows.select(keys).append_column(_GID, pa.array(np.arange(n, dtype=np.int64)))
    groups = numbered.group_by(keys, use_threads=False).aggregate([(_GID, "list")]).column(_GID + "_list")
    groups = groups.combine_chunks()
    lengths = pc.list_value_length(groups).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(groups).to_numpy(zero_copy_only=False)
    count = len(lengths)
    gid = np.empty(n, dtype=np.int64)
    gid[flat] = np.repeat(np.arange(count, dtype=np.int64), lengths)
    first = np.full(count, n, dtype=np.int64)
    np.minimum.at(first, gid, np.arange(n, dtype=np.int64))
    group_order = np.argsort(first, kind="stable")  # groups in the order of their first row
    rank = np.empty(count, dtype=np.int64)
    rank[group_order] = np.arange(count, dtype=np.int64)
    gid = rank[gid]
    first = first[group_order]
    out: dict[str, pa.Array] = {}
    hashed = [c for c in columns if c not in keys and functions[c] in _HASHED]
    sums = _hashed(rows, gid, count, {c: functions[c] for c in hashed}) if hashed else {}
    for name in columns:
        column = rows.column(name).combine_chunks()
        fn = "first_value" if name in keys else functions[name]
        if fn in _HASHED:
            out[name] = _back(sums[name], column.type, name, fn)
        elif fn == "first_value":
            out[name] = column.take(pa.array(first))
        else:
            valid = np.ones(n, dtype=bool) if fn == "last_value" else _valid(column)
            at = np.full(count, -1, dtype=np.int64)
            positions = np.arange(n, dtype=np.int64)
            np.maximum.at(at, gid[valid], positions[valid])
            out[name] = column.take(pa.array(at, mask=at < 0))
    return pa.table(out, schema=pa.schema([rows.schema.field(c) for c in columns]))


def _wide(t: pa.DataType) -> pa.DataType | None:
    """The type a ``sum`` over a column of type ``t`` is computed in, wide enough never to wrap around (pyarrow's
    integer sums wrap silently: ``2**62 + 2**62`` is ``-2**63``): 38 decimal digits hold the sum of 10**19 int64
    or uint64 values, 76 that of any number of 38-digit decimals a table holds. None: sum in ``t`` itself."""
    if pa.types.is_integer(t):
        return pa.decimal128(38, 0)
    if pa.types.is_decimal(t):
        return pa.decimal256(76, t.scale)
    return None


def _back(result: pa.Array, t: pa.DataType, name: str, fn: str) -> pa.Array:
    """``result`` (a column's ``sum``/``min``/``max``/``count`` per key) cast back to the column's type ``t``;
    :class:`KeyTableError` naming the column when a value does not fit (the commit then writes nothing)."""
    try:
        return result.cast(t)
    except (pa.ArrowInvalid, OverflowError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise KeyTableError(
            f"the {fn} of column {name!r} for a key does not fit its type {t} ({reason}): the commit is refused and "
            "the table is unchanged; widen the column (update_schema) to aggregate larger values"
        ) from None


def _valid(column: pa.Array) -> np.ndarray:
    valid: np.ndarray = pc.is_valid(column).to_numpy(zero_copy_only=False)
    return valid


def _hashed(rows: pa.Table, gid: np.ndarray, count: int, functions: Mapping[str, str]) -> dict[str, pa.Array]:
    """Per column, its ``sum``/``min``/``max``/``count`` over the rows of each group (index: ``gid``)."""
    columns = {}
    for c, fn in functions.items():
        wide = _wide(rows.schema.field(c).type) if fn == "sum" else None
        columns[c] = rows.column(c) if wide is None else rows.column(c).cast(wide)
    table = pa.table({_GID: pa.array(gid), **columns})
    aggregations: list[tuple[str, str, pc.FunctionOptions]] = []
    for name, fn in functions.items():
        if fn == "count":
            aggregations.append((name, "count", pc.CountOptions(mode="only_valid")))
        else:
            aggregations.append((name, fn, pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
    result = table.group_by(_GID, use_threads=False).aggregate(aggregations)
    at = np.empty(count, dtype=np.int64)
    at[result.column(_GID).to_numpy()] = np.arange(result.num_rows, dtype=np.int64)
    return {name: result.column(f"{name}_{fn}").combine_chunks().take(pa.array(at)) for name, fn in functions.items()}
