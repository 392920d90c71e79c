"""Column statistics of manifest entries, as the current schema sees them: matched by field id.

Every use of a file's min/max (pruning a read, proving that a delete covers a whole file) goes through
:func:`column_bounds`, because the statistics of an entry are keyed by what its own schema called the column:

* an entry written under a format-version-1 schema keeps them in ``stats``, keyed by column *name* (that
  schema's names; its field ids are the implied ones, 1, 2, ... in column order);
* an entry written under a version-2 schema keeps them in ``field_stats``, keyed by field *id*.

So after a rename the old files' statistics still prune (same id), and after a column is dropped and another
is added under the same name, the old column's statistics are never taken for the new one (other id). Bounds
written under an older, narrower type are cast to the current type: every allowed type change is a lossless
widening, so the cast bounds hold for the widened values (a filter beyond the old type's range is compared in
the new type, never overflowed into the old one).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.meta.entries import FIELD_STATS, ROW_COUNT, SCHEMA_ID, STATS
from lakefmt.spec import TableSchema
from lakefmt.spec.manifest import is_stats_type

__all__ = ["SchemaLookup", "column_bounds"]

#: schema id -> that schema (``MetaStore.schema``); None when only the current schema is known
SchemaLookup = Callable[[int], TableSchema]


def column_bounds(
    entries: pa.Table, column: str, schema: TableSchema, schemas: SchemaLookup | None = None
) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """Per entry: the min, max (in the current type of ``column``) and null count that its statistics give for
    the current column ``column`` of ``schema``, null where unknown (no statistics, a column the file's schema
    did not have, a schema ``schemas`` cannot give). None when the column's type gets no statistics."""
    t = schema.arrow_schema.field(column).type
    if not is_stats_type(t):
        return None
    n = entries.num_rows
    fid = schema.column_ids[column]
    if SCHEMA_ID not in entries.column_names or n == 0:
        return _group_bounds(entries, fid, t, schema)
    sids = entries.column(SCHEMA_ID).combine_chunks()
    distinct = pc.unique(sids).to_pylist()
    if len(distinct) == 1:
        return _group_bounds(entries, fid, t, _schema(distinct[0], schema, schemas))
    parts: list[tuple[pa.Array, pa.Array, pa.Array]] = []
    order: list[pa.Array] = []
    for sid in distinct:
        idx = pc.indices_nonzero(pc.equal(sids, sid))
        order.append(idx)
        parts.append(_group_bounds(entries.take(idx), fid, t, _schema(sid, schema, schemas)))
    # rows were regrouped by schema id: put each row's bounds back at its own position
    where = pc.sort_indices(pa.concat_arrays([pc.cast(i, pa.int64()) for i in order]))
    lo, hi, nulls = (pa.concat_arrays([p[k] for p in parts]).take(where) for k in range(3))
    return lo, hi, nulls


def _schema(sid: int | None, schema: TableSchema, schemas: SchemaLookup | None) -> TableSchema | None:
    if sid is None or sid == schema.id:
        return schema
    return None if schemas is None else schemas(sid)


def _group_bounds(
    entries: pa.Table, fid: int, t: pa.DataType, old: TableSchema | None
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The bounds of field ``fid`` for entries that share one schema (``old``)."""
    n = entries.num_rows
    unknown = (pa.nulls(n, t), pa.nulls(n, t), pa.nulls(n, pa.int64()))
    if old is None:
        return unknown
    found = old.by_id.get(fid)
    if found is None:  # the column came after the file: it reads as null in every row of it
        return pa.nulls(n, t), pa.nulls(n, t), entries.column(ROW_COUNT).combine_chunks().cast(pa.int64())
    if len(found[0]) != 1:
        return unknown
    column, key = (FIELD_STATS, str(fid)) if old.format_version >= 2 else (STATS, found[1].name)
    if column not in entries.column_names:
        return unknown
    stats = entries.column(column).combine_chunks()
    names = [stats.type.field(i).name for i in range(stats.type.num_fields)]
    if key not in names:
        return unknown
    child = stats.flatten()[names.index(key)]  # flatten: a null stats value makes its children null too
    lo, hi, nulls = child.flatten()
    try:
        lo, hi = lo.cast(t, safe=True), hi.cast(t, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not a widening: never prune on such bounds
        return unknown
    return lo, hi, nulls.cast(pa.int64())
