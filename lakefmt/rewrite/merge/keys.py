"""A MERGE's join keys, made to mean what the ON condition's ``=`` means.

The equalities of the ON condition (``t.k = s.k``) are evaluated as a hash join (``pyarrow.Table.join``), which
matches keys by their hash and bytes. SQL ``=`` as lakefmt evaluates it (pyarrow's ``equal``, IEEE 754 for
floating point) differs from byte equality in a few places, so each key pair is first brought to one form in
which byte equality is ``=``:

* both sides are cast to one common type (pyarrow's permissive promotion: ``int32`` and ``int64`` to ``int64``,
  an integer and a float to ``float64``, ``decimal(10, 2)`` and ``decimal(12, 3)`` to ``decimal(12, 3)``,
  ``string`` and ``large_string`` to ``large_string``; a dictionary column to its values; an integer and a
  decimal to a decimal that holds every value of both, ``decimal256`` beyond 38 digits; ``float16`` keys as
  ``float32``, exactly), so that values equal under ``=`` have the same bytes whatever the column types;
* two timestamps with time zones are compared as instants (both in UTC, in the finer unit), as ``=`` compares
  them; a timestamp with a zone against one without is refused (:class:`MergeError`), as ``=`` refuses it;
* floating point: ``-0.0`` becomes ``0.0`` (``-0.0 = 0.0`` is true) and NaN becomes null (``NaN = x`` is false
  for every ``x``, NaN included);
* a null key never matches (the join's rule, and SQL's).

Only the join's key columns are changed: the rows the merge writes keep their values (a ``-0.0`` stays ``-0.0``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import MergeError

__all__ = ["join_keys"]

_UNITS = ("s", "ms", "us", "ns")


def join_keys(source: pa.ChunkedArray, target: pa.ChunkedArray, *, what: str) -> tuple[pa.ChunkedArray,
                                                                                       pa.ChunkedArray]:
    """``source`` and ``target`` key columns in one type and form, in which two values are equal bytes exactly when
    ``=`` is true for them (see the module docstring). ``what`` names the pair in messages."""
    source, target = _decoded(source), _decoded(target)
    common = _common_type(source.type, target.type, what)
    out = []
    for side, col in (("source", source), ("target", target)):
        try:
            col = col if col.type == common else col.cast(common)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise MergeError(f"{what}: the {side} column ({col.type}) cannot be compared as {common}: {exc}") from None
        out.append(_canonical(col))
    return out[0], out[1]


def _decoded(col: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(col.type):
        return col.cast(col.type.value_type)
    return col


def _common_type(a: pa.DataType, b: pa.DataType, what: str) -> pa.DataType:
    """The type both key columns are compared in."""
    if pa.types.is_float16(a) and pa.types.is_float16(b):
        return pa.float32()  # pyarrow computes nothing on half floats; float32 holds each exactly
    if a == b:
        return a
    for x, y in ((a, b), (b, a)):
        if pa.types.is_integer(x) and pa.types.is_decimal(y):
            return _decimal_for(x, y)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        if (a.tz is None) != (b.tz is None):
            raise MergeError(
                f"{what}: a timestamp with a time zone ({a if a.tz else b}) and one without ({b if a.tz else a}) "
                "cannot be compared: an instant and a wall-clock time are not the same kind of value"
            )
        unit = max(a.unit, b.unit, key=_UNITS.index)
        return pa.timestamp(unit, "UTC" if a.tz is not None else None)
    try:
        merged = pa.unify_schemas([pa.schema([("k", a)]), pa.schema([("k", b)])], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise MergeError(f"{what}: a {a} column cannot be joined with a {b} column ({exc})") from None
    common = merged.field("k").type
    return pa.float32() if pa.types.is_float16(common) else common


#: the decimal digits of each integer type's largest value
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def _decimal_for(integer: pa.DataType, decimal: pa.DataType) -> pa.DataType:
    """A decimal holding every value of ``integer`` and of ``decimal`` exactly (pyarrow's promotion gives one
    too narrow for an int64)."""
    digits = _INT_DIGITS[integer.bit_width]
    scale = decimal.scale
    precision = max(decimal.precision - scale, digits) + scale
    if precision <= 38 and not pa.types.is_decimal256(decimal):
        return pa.decimal128(precision, scale)
    return pa.decimal256(min(precision, 76), scale)


def _canonical(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floating point keys with ``-0.0`` as ``0.0`` and NaN as null; other keys as they are."""
    if not pa.types.is_floating(col.type):
        return col
    zero = pa.scalar(0, col.type)
    # -0.0 + 0.0 is +0.0 in IEEE 754 (round to nearest); every other value, NaN and the infinities stay themselves
    plus = pc.add(col, zero)
    return pc.if_else(pc.is_nan(plus), pa.scalar(None, col.type), plus)
