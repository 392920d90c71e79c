"""Checking incoming data against the table schema, with errors that name the offending columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import SchemaMismatchError

__all__ = ["conform"]


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Representation-only differences we accept and cast: string/large_string, binary/large_binary,
    list/large_list, a timestamp's time zone (same instants), and nested fields' nullability."""
    if src == dst:
        return True
    pairs = (
        (pa.types.is_string, pa.types.is_large_string),
        (pa.types.is_binary, pa.types.is_large_binary),
    )
    for a, b in pairs:
        if (a(src) or b(src)) and (a(dst) or b(dst)):
            return True
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return src.unit == dst.unit and (src.tz is None) == (dst.tz is None)
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (
        pa.types.is_list(dst) or pa.types.is_large_list(dst)
    ):
        return _castable(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _castable(src.key_type, dst.key_type) and _castable(src.item_type, dst.item_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        if [src.field(i).name for i in range(src.num_fields)] != [dst.field(i).name for i in range(dst.num_fields)]:
            return False
        return all(_castable(src.field(i).type, dst.field(i).type) for i in range(src.num_fields))
    return False


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``data`` with exactly the table's columns, order and types, or raise SchemaMismatchError.

    Columns are matched by name (order may differ). Representation-only type differences are cast; anything
    else (a missing, extra or mistyped column; nulls in a non-nullable column) is refused.
    """
    if data.schema.equals(schema, check_metadata=False):
        return data
    have = set(data.column_names)
    want = set(schema.names)
    problems = []
    missing = [n for n in schema.names if n not in have]
    extra = [n for n in data.column_names if n not in want]
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if extra:
        problems.append(f"extra column(s) {', '.join(extra)} not in the table")
    if len(set(data.column_names)) != data.num_columns:
        problems.append("duplicate column names in the data")
    columns = []
    for f in schema:
        if f.name not in have or f.name in extra:
            continue
        col = data.column(f.name)
        if not _castable(col.type, f.type):
            problems.append(f"column {f.name!r} has type {col.type}, the table expects {f.type}")
            continue
        if not f.nullable and col.null_count:
            problems.append(f"column {f.name!r} is not nullable but has {col.null_count} null(s)")
            continue
        if col.type != f.type:
            col = pc.cast(col, f.type, safe=True)
        columns.append(col)
    if problems:
        raise SchemaMismatchError("data does not match the table schema: " + "; ".join(problems))
    return pa.Table.from_arrays(columns, schema=schema)
