"""Checking incoming data against the table schema, with errors that name the offending columns.

Two kinds of type difference are accepted and cast:

* representation only (:func:`_castable`): string/large_string, binary/large_binary, list/large_list, a
  timestamp's time zone name, nested fields' nullability;
* value-checked coercions (:func:`_coercible`): a view type or dictionary-encoded column into its plain type, a
  narrower integer into a wider one, a column of nulls only, and any other cast within one family of types
  (numbers, strings, binaries, timestamps, dates, times) that Arrow's ``safe=True`` cast accepts for every value
  written and that the table's type holds exactly (an int64 column of small values into an int32 column, ``2.0``
  into an integer column, ``0.5`` into a float32 column); a value that does not fit (``2**40`` into int32,
  ``1.5`` into an integer, ``0.1`` into float32: Arrow's cast would round it silently) is refused with
  :class:`SchemaMismatchError` naming the column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import SchemaMismatchError

__all__ = ["conform", "fill_missing", "repeated_names"]


def _nested(src: pa.DataType, dst: pa.DataType, inner: Callable[[pa.DataType, pa.DataType], bool]) -> bool | None:
    """For two list (or large list), map or struct types: whether their parts pair up (a struct's fields by name, in
    order) and each pair passes ``inner``; None when ``src`` and ``dst`` are not two nested types of one kind."""
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (
        pa.types.is_list(dst) or pa.types.is_large_list(dst)
    ):
        return inner(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return inner(src.key_type, dst.key_type) and inner(src.item_type, dst.item_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        if [src.field(i).name for i in range(src.num_fields)] != [dst.field(i).name for i in range(dst.num_fields)]:
            return False
        return all(inner(src.field(i).type, dst.field(i).type) for i in range(src.num_fields))
    return None


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
    return _nested(src, dst, _castable) or False


def _family(t: pa.DataType) -> str | None:
    """The family of values a type holds, for value-checked coercions."""
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    checks = {
        "string": (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view),
        "binary": (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view),
        "timestamp": (pa.types.is_timestamp,),
        "date": (pa.types.is_date,),
        "time": (pa.types.is_time,),
        "boolean": (pa.types.is_boolean,),
    }
    return next((name for name, tests in checks.items() if any(test(t) for test in tests)), None)


def _coercible(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether data of type ``src`` may be cast to ``dst`` with Arrow's ``safe=True`` cast deciding per value
    (see the module docstring). Floats never narrow and numbers never cross between floats and decimals: Arrow
    calls those casts safe although they round."""
    if _castable(src, dst) or pa.types.is_null(src):  # an all-null column (a frame's column of Nones)
        return True
    if pa.types.is_dictionary(src):
        return _coercible(src.value_type, dst)
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return True  # a narrower float: every value is checked to come back unchanged (see _rounded)
    if (pa.types.is_floating(src) and pa.types.is_decimal(dst)) or (
        pa.types.is_decimal(src) and pa.types.is_floating(dst)
    ):
        return False
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return (src.tz is None) == (dst.tz is None)  # naive and zoned instants mean different things
    nested = _nested(src, dst, _coercible)
    if nested is not None:
        return nested
    family = _family(src)
    return family is not None and family == _family(dst)


def repeated_names(names: Sequence[str]) -> list[str]:
    """The names that appear more than once in ``names``, sorted (Arrow lets a table name two columns alike)."""
    if len(set(names)) == len(names):
        return []
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    return sorted(twice)


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``data`` with exactly the table's columns, order and types, or raise SchemaMismatchError.

    Columns are matched by name (order may differ). A nullable column (or struct field) the data lacks is written
    as nulls (a producer that predates a column added by schema evolution); one that is not nullable is refused,
    named. Representation-only type differences are cast, and so are values that fit the table's type exactly
    (see the module docstring); anything else (an extra or mistyped column, a value that does not fit, nulls in a
    non-nullable column) is refused.
    """
    twice = repeated_names(data.column_names)
    if twice:  # a column must be named once, or which of them is the column?
        raise SchemaMismatchError(
            f"data does not match the table schema: column(s) {', '.join(map(repr, twice))} appear more than once; "
            "a column must be named once"
        )
    if data.schema.equals(schema, check_metadata=False):
        # Arrow lets a table declare a column not null and still hold nulls in it
        nulls = [p for f in schema for p in _null_problems(f, data.column(f.name))]
        nulls += [p for f in schema for p in _unstorable(f.name, data.column(f.name))]
        if nulls:
            raise SchemaMismatchError("data does not match the table schema: " + "; ".join(nulls))
        return data
    data = fill_missing(data, schema)
    have = set(data.column_names)
    want = set(schema.names)
    problems = []
    missing = [n for n in schema.names if n not in have]
    extra = [n for n in data.column_names if n not in want]
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)} (not nullable: every row must have a value)")
    if extra:
        problems.append(f"extra column(s) {', '.join(extra)} not in the table")
    folded = {n.casefold(): n for n in missing + [n for n in schema.names if n in have]}
    problems += [  # Spark SQL resolves names case-insensitively; lakefmt matches them exactly
        f"the data's column {n!r} differs from the table's column {folded[n.casefold()]!r} only in case (column "
        "names are matched exactly)"
        for n in extra if n.casefold() in folded
    ]
    if len(set(data.column_names)) != data.num_columns:
        problems.append("duplicate column names in the data")
    columns = []
    for f in schema:
        if f.name not in have or f.name in extra:
            continue
        col = _plain_dictionary(data.column(f.name))
        if not _castable(col.type, f.type):
            if not _coercible(col.type, f.type):
                problems.append(f"column {f.name!r} has type {col.type}, the table expects {f.type}")
                continue
            try:  # a value-checked coercion: Arrow's safe cast refuses any value the table's type cannot hold
                cast = pc.cast(col, f.type, safe=True)
                rounded = _rounded(col, cast)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                problems.append(
                    f"column {f.name!r} has type {col.type} and values the table's {f.type} cannot hold ({exc})"
                )
                continue
            if rounded:
                problems.append(
                    f"column {f.name!r} has type {col.type} and values the table's {f.type} cannot hold "
                    f"({rounded} value(s) would be rounded, such as {_first_rounded(col, cast)})"
                )
                continue
            col = cast
        nulls = _null_problems(f, col)  # before the cast, which fails on them or, for some types, lets them by
        if nulls:
            problems += nulls
            continue
        if col.type != f.type:
            col = pc.cast(col, f.type, safe=True)
        problems += _unstorable(f.name, col)
        columns.append(col)
    if problems:
        raise SchemaMismatchError("data does not match the table schema: " + "; ".join(problems))
    return pa.Table.from_arrays(columns, schema=schema)


def fill_missing(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with a column of nulls for each nullable column of ``schema`` it lacks, and a child of nulls for
    each nullable field a struct column (at any depth) lacks (a merge-mode write, as Delta's mergeSchema: the
    data's rows read those as null). Columns and fields that are not nullable are left missing, for
    :func:`conform` to refuse."""
    have = set(data.column_names)
    for f in schema:
        if f.name not in have and f.nullable:
            data = data.append_column(f, pa.nulls(data.num_rows, f.type))
        elif f.name in have and _nests(f.type) and data.column_names.count(f.name) == 1:
            i = data.column_names.index(f.name)
            col = data.column(i)
            chunks = [_fill_struct(c, f.type) for c in col.chunks]
            if any(a is not b for a, b in zip(chunks, col.chunks, strict=True)):
                filled = pa.chunked_array(chunks, chunks[0].type) if chunks else col
                data = data.set_column(i, data.schema.field(i).with_type(filled.type), filled)
    return data


def _nests(t: pa.DataType) -> bool:
    return bool(pa.types.is_struct(t) or _is_list(t) or pa.types.is_map(t))


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def _fill_struct(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """A struct array with the fields of struct type ``t`` in ``t``'s order, those it lacks that are nullable as
    nulls (its own fields keep their types, for :func:`conform` to check), also for the structs inside lists
    and the struct items of maps; ``arr`` itself when nothing needs filling, it holds a field ``t`` lacks, or
    lacks a field that is not nullable."""
    if _is_list(arr.type) and _is_list(t) and type(arr.type) is type(t):  # the elements of a list, a map's items
        values = _fill_struct(arr.values, t.value_type)
        if values is arr.values:
            return arr
        item = t.value_field.with_type(values.type)
        kind = pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
        return type(arr).from_arrays(arr.offsets, values, type=kind, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(arr.type) and pa.types.is_map(t):
        items = _fill_struct(arr.items, t.item_type)
        if items is arr.items:
            return arr
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, mask=arr.is_null() if arr.null_count else None)
    if not pa.types.is_struct(arr.type) or not pa.types.is_struct(t):
        return arr
    own = {arr.type.field(i).name: arr.type.field(i) for i in range(arr.type.num_fields)}
    wanted = [t.field(i) for i in range(t.num_fields)]
    names = {f.name for f in wanted}
    if len(own) != arr.type.num_fields or any(n not in names for n in own):
        return arr
    if any(f.name not in own and not f.nullable for f in wanted):
        return arr
    fields, children = [], []
    for f in wanted:
        if f.name in own:
            child = _fill_struct(arr.field(f.name), f.type)
            fields.append(own[f.name].with_type(child.type))
        else:
            child = pa.nulls(len(arr), f.type)
            fields.append(f)
        children.append(child)
    if [(f.name, f.type) for f in fields] == [(f.name, f.type) for f in own.values()]:
        return arr  # nothing lacked, nothing nested changed
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _plain_dictionary(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column of view values (Polars' Categorical and Enum: dictionary<string_view>) with plain values:
    Arrow cannot decode a dictionary of views (no ``take`` kernel for them), so its values are cast first."""
    t = col.type
    if pa.types.is_dictionary(t) and (pa.types.is_string_view(t.value_type) or pa.types.is_binary_view(t.value_type)):
        plain = pa.string() if pa.types.is_string_view(t.value_type) else pa.binary()
        return pc.cast(col, pa.dictionary(t.index_type, plain, t.ordered))
    return col


def _float_pairs(src: pa.Array, dst: pa.Array) -> list[tuple[pa.Array, pa.Array]]:
    """The (source, cast) leaf arrays where a float was narrowed (Arrow's safe cast rounds them silently)."""
    s, d = src.type, dst.type
    if pa.types.is_dictionary(s):
        return _float_pairs(src.dictionary_decode(), dst)
    if pa.types.is_floating(s) and pa.types.is_floating(d):
        return [(src, dst)] if s.bit_width > d.bit_width else []
    if pa.types.is_struct(s) and pa.types.is_struct(d):
        return [p for a, b in zip(src.flatten(), dst.flatten(), strict=True) for p in _float_pairs(a, b)]
    if _is_listlike(s) and _is_listlike(d):  # the cast keeps the offsets: the flattened values line up
        return _float_pairs(src.flatten(), dst.flatten())
    return []


def _is_listlike(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t))


def _rounded(col: pa.ChunkedArray, cast: pa.ChunkedArray) -> int:
    """How many float values the cast ``col`` -> ``cast`` changed (a narrower float: 0.1 is no float32)."""
    count = 0
    for a, b in _aligned(col, cast):
        for src, dst in _float_pairs(a, b):
            back = pc.cast(dst, src.type)
            same = pc.or_(pc.equal(back, src), pc.and_(pc.is_nan(back), pc.is_nan(src)))
            count += int(pc.sum(pc.invert(pc.fill_null(same, True))).as_py() or 0)
    return count


def _aligned(col: pa.ChunkedArray, cast: pa.ChunkedArray) -> list[tuple[pa.Array, pa.Array]]:
    """The chunks of ``col`` and of its cast, pair by pair (a cast may drop empty chunks: then both as one array)."""
    if len(col.chunks) == len(cast.chunks):
        return list(zip(col.chunks, cast.chunks, strict=True))
    return [(col.combine_chunks(), cast.combine_chunks())]


def _first_rounded(col: pa.ChunkedArray, cast: pa.ChunkedArray) -> object:
    for a, b in _aligned(col, cast):
        for src, dst in _float_pairs(a, b):
            back = pc.cast(dst, src.type)
            differs = pc.invert(
                pc.fill_null(pc.or_(pc.equal(back, src), pc.and_(pc.is_nan(back), pc.is_nan(src))), True)
            )
            if pc.any(differs).as_py():
                return src.filter(differs)[0].as_py()
    return None


def _has_required(t: pa.DataType) -> bool:
    """Whether ``t`` nests a field declared not null (a map's keys aside: Arrow never lets them be null)."""
    fields = [t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else []
    if pa.types.is_map(t):
        fields = [t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        fields = [t.value_field]
    return any(not f.nullable or _has_required(f.type) for f in fields)


def _count_nulls(path: str, field: pa.Field, arr: pa.Array, counts: dict[str, int]) -> None:
    """Add to ``counts`` the nulls that ``arr`` (data of a type :func:`_castable` to ``field``'s) holds where
    ``field`` declares a field not null, at any depth, as the Parquet writer sees them: a struct's children as
    stored (a null under a null parent counts), a list's items as referenced by its non-null lists."""
    if not field.nullable and arr.null_count:
        counts[path] = counts.get(path, 0) + arr.null_count
    t = field.type
    if not _has_required(t):
        return
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            child = t.field(i)
            _count_nulls(f"{path}.{child.name}", child, arr.field(i), counts)
    elif pa.types.is_map(t):
        own = arr.type  # the data's own map type: a cast to the table's would refuse the nulls looked for here
        entries = arr.cast(pa.list_(pa.struct([own.key_field, own.item_field]))).flatten()
        _count_nulls(f"{path}.{t.key_field.name}", t.key_field, entries.field(0), counts)
        _count_nulls(f"{path}.{t.item_field.name}", t.item_field, entries.field(1), counts)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field
        _count_nulls(f"{path}.{item.name}", item, arr.flatten(), counts)


def _null_problems(field: pa.Field, column: pa.ChunkedArray) -> list[str]:
    """One message per field declared not null (the column or a nested field) that holds nulls."""
    if field.nullable and not _has_required(field.type):
        return []
    counts: dict[str, int] = {}
    for chunk in column.chunks:
        _count_nulls(field.name, field, chunk, counts)
    return [f"column {path!r} is not nullable but has {n} null(s)" for path, n in counts.items()]


#: the seconds a Parquet file can hold: it stores ``timestamp[s]`` as int64 milliseconds
_SECONDS_LIMIT = (2**63 - 1) // 1000


def _unstorable(name: str, col: pa.ChunkedArray | pa.Array) -> list[str]:
    """Values of ``col`` that a Parquet data file cannot hold: ``timestamp[s]`` instants beyond int64 milliseconds
    (about 292 million years either side of 1970), at any depth of structs and lists."""
    t = col.type
    if not _holds_seconds(t):  # most columns: decided by the type alone, nothing read
        return []
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_timestamp(t) and t.unit == "s":
        bounds = pc.min_max(col.view(pa.int64()) if col.type.bit_width == 64 else col.cast(pa.int64()))
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if lo is not None and (lo < -_SECONDS_LIMIT or hi > _SECONDS_LIMIT):
            return [
                f"column {name!r} holds timestamp[s] values beyond what Parquet stores ({lo}..{hi} seconds since "
                f"1970; at most {_SECONDS_LIMIT} either side, as Parquet keeps seconds in int64 milliseconds)"
            ]
        return []
    if pa.types.is_struct(t):
        return [p for i in range(t.num_fields) for p in _unstorable(f"{name}.{t.field(i).name}", col.field(i))]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _unstorable(f"{name}[]", col.flatten())
    if pa.types.is_map(t):
        return _unstorable(f"{name}.key", col.keys) + _unstorable(f"{name}.value", col.items)
    return []


def _holds_seconds(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return bool(t.unit == "s")
    if pa.types.is_struct(t):
        return any(_holds_seconds(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _holds_seconds(t.key_type) or _holds_seconds(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _holds_seconds(t.value_type)
    return False
