"""What a row filter (a ``pyarrow.compute.Expression``) touches, found from the expression itself.

Every path that picks rows by a filter asks this module the same questions: which columns does the filter read
(pruning by statistics, the columns a delete or a projected scan must read), does it hold a NaN literal (pyarrow's
simplifier orders NaN above every number, so a NaN literal proves nothing), and may pyarrow evaluate it inside its
Parquet scan (:func:`pushdown_safe`). The answers come from the expression's tree, never from its printed text:
pyarrow serializes an expression (the form it pickles with) as an Arrow IPC file whose schema metadata lists the
tree in prefix order (``call``, ``field_ref``, ``nested_field_ref``, ``literal``, ``options``, ``end``) and whose
one-row record batch holds the literals and the options of calls. That metadata keeps repeated keys in order,
which pyarrow's ``Schema.metadata`` (a dict) does not, so it is read through the Arrow C data interface.

A field reference by position (``pc.field(0)``) cannot be serialized, and its meaning changes with the columns a
reader happens to read: such filters are refused (:class:`~lakefmt.errors.UnsupportedFilterError`) with the fix
(name the column).
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPredicateError, UnsupportedFilterError
from lakefmt.spec.sql.row_filter import bind_text

__all__ = ["FilterInfo", "all_of", "analyze", "check_filter", "evaluating", "has_float", "pushdown_safe", "show"]


@dataclass(frozen=True)
class FilterInfo:
    """What one filter references: ``columns``, the top-level columns in order of first reference; ``paths``,
    every field reference as a path of names (``("s", "x")`` for ``pc.field("s", "x")``); ``has_nan``, whether a
    literal or a value set holds a floating-point NaN."""

    columns: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    has_nan: bool


class _ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface (only its top level is read here)."""


_ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.c_void_p),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowSchema))),
    ("private_data", ctypes.c_void_p),
]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """The schema's metadata as ordered (key, value) pairs, repeated keys kept (the C data interface encodes it
    as an int32 count, then per pair an int32 length and the key's bytes, an int32 length and the value's)."""
    c_schema = _ArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        if not c_schema.metadata:
            return []
        base = c_schema.metadata

        def int32(at: int) -> int:
            return int(struct.unpack("=i", ctypes.string_at(base + at, 4))[0])

        pairs = []
        at = 4
        for _ in range(int32(0)):
            texts = []
            for _ in range(2):
                size = int32(at)
                texts.append(ctypes.string_at(base + at + 4, size).decode("utf-8", "surrogateescape"))
                at += 4 + size
            pairs.append((texts[0], texts[1]))
        return pairs
    finally:
        if c_schema.release:
            c_schema.release(ctypes.byref(c_schema))


def _holds_nan(array: pa.Array) -> bool:
    t = array.type
    if pa.types.is_floating(t):
        return bool(pc.any(pc.is_nan(array)).as_py())
    if isinstance(array, pa.DictionaryArray):
        return _holds_nan(array.dictionary)
    if pa.types.is_struct(t):
        return any(_holds_nan(array.field(i)) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _holds_nan(array.flatten())
    if pa.types.is_map(t):
        return _holds_nan(array.keys) or _holds_nan(array.items)
    return False


def _positional(filter: pc.Expression) -> str:
    """The references by position in ``filter``, as written (``pc.field(1)``)."""
    found = dict.fromkeys(re.findall(r"FieldPath\(([0-9 ,]+)\)", show(filter)))
    written = ", ".join(f"pc.field({p})" for p in found) or "pc.field(0)"
    return f"a field reference by position ({written})"


#: the last filters analyzed, by identity (an expression is unhashable; the entry holds it, so its id stays its own)
_CACHE: dict[int, tuple[pc.Expression, FilterInfo]] = {}
_CACHE_SIZE = 64


def analyze(filter: pc.Expression) -> FilterInfo:
    """The columns, field paths and NaN literals of ``filter`` (see the module docstring).
    :class:`~lakefmt.errors.UnsupportedFilterError` for a reference by position."""
    hit = _CACHE.get(id(filter))
    if hit is not None and hit[0] is filter:
        return hit[1]
    info = _analyze(filter)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[id(filter)] = (filter, info)
    return info


def _analyze(filter: pc.Expression) -> FilterInfo:
    try:
        reduced = filter.__reduce__()
    except pa.ArrowNotImplementedError as exc:
        if "field_ref" in str(exc):
            raise UnsupportedFilterError(
                f"the filter {show(filter)} holds {_positional(filter)}, whose column depends on which columns a "
                "reader reads: name the column instead, as pc.field('amount'), or pc.field('s', 'x') inside a struct"
            ) from None
        raise
    reader = pa.ipc.open_file(reduced[1][0])
    pairs = _metadata_pairs(reader.schema)
    batch = reader.read_all()
    paths: list[tuple[str, ...]] = []
    i = 0
    while i < len(pairs):
        key, value = pairs[i]
        if key == "nested_field_ref":
            depth = int(value)
            paths.append(tuple(v for _, v in pairs[i + 1 : i + 1 + depth]))
            i += 1 + depth
            continue
        if key == "field_ref":
            paths.append((value,))
        i += 1
    has_nan = any(_holds_nan(column.combine_chunks()) for column in batch.columns)
    columns = tuple(dict.fromkeys(p[0] for p in paths if p))
    return FilterInfo(columns, tuple(dict.fromkeys(paths)), has_nan)


def all_of(parts: Sequence[pc.Expression]) -> pc.Expression | None:
    """The conjunction of ``parts``, in their order (``a & b & c``); None for no parts (nothing to hold)."""
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def referenced_columns(filter: pc.Expression | None, schema: pa.Schema) -> list[str]:
    """The columns of ``schema`` that ``filter`` reads, in the schema's order (none without a filter)."""
    if filter is None:
        return []
    used = set(analyze(filter).columns)
    return [n for n in schema.names if n in used]


def has_nan_literal(filter: pc.Expression | None) -> bool:
    """Whether ``filter`` compares with a NaN literal (or a value set holding NaN)."""
    return filter is not None and analyze(filter).has_nan


def has_float(t: pa.DataType) -> bool:
    """Whether ``t`` is, or nests, a floating-point type (whose Parquet statistics leave NaN out)."""
    if pa.types.is_floating(t):
        return True
    if pa.types.is_dictionary(t):
        return has_float(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_float(t.value_type)
    if pa.types.is_map(t):
        return has_float(t.key_type) or has_float(t.item_type)
    return any(has_float(t.field(i).type) for i in range(t.num_fields)) if pa.types.is_struct(t) else False


def pushdown_safe(filter: pc.Expression | None, schema: pa.Schema) -> bool:
    """Whether pyarrow may evaluate ``filter`` inside its Parquet scan. That scan skips row groups by their
    Parquet min/max, which leave NaN out (a row group of NaN and -inf claims ``f == -inf`` and loses the NaN rows
    of ``is_nan(f)`` or ``f != -inf``), and its simplifier orders a NaN literal above every number. A filter that
    reads a floating-point column, or holds a NaN literal, is applied to the rows after reading instead."""
    if filter is None:
        return True
    info = analyze(filter)
    if info.has_nan:
        return False
    return not any(has_float(schema.field(c).type) for c in info.columns if c in schema.names)


def show(filter: pc.Expression) -> str:
    """``filter`` printed on one line (pyarrow prints a value set over several)."""
    return " ".join(str(filter).split())


def check_filter(filter: Any, schema: pa.Schema, what: str = "filter") -> pc.Expression:
    """``filter`` as a checked pyarrow expression over ``schema``, before anything is read: the one helper every
    API that takes a filter calls. ``filter`` is SQL predicate text (``"id > 3 AND dt = '2026-11-01'"``: the
    language of :mod:`lakefmt.spec.sql.predicate`, whose rules ``docs/filters.md`` writes, bound by
    :func:`lakefmt.spec.sql.row_filter.bind_text`) or a
    ``pyarrow.compute.Expression`` (``TypeError`` for anything else) over named columns
    (:class:`~lakefmt.errors.UnsupportedFilterError` for a positional reference) that evaluates to a boolean over
    the table's columns (:class:`~lakefmt.errors.InvalidPredicateError` naming a syntax error, a missing column, a
    comparison with a value of another type or a decimal literal that the column's type cannot hold, with the
    fix). ``what`` names the filter in messages ("the delete filter"). Returns the expression to filter with."""
    if isinstance(filter, str):
        try:
            filter = bind_text(filter, schema)
        except InvalidPredicateError as exc:
            raise InvalidPredicateError(f"the {what} {exc}") from None
    if not isinstance(filter, pc.Expression):
        raise TypeError(
            f"a {what} must be SQL predicate text, such as \"dt < '2026-01-01'\", or a pyarrow.compute.Expression, "
            f"such as pc.field('dt') < '2026-01-01'; got {type(filter).__name__}"
        )
    info = analyze(filter)
    columns = ", ".join(f"{f.name} ({f.type})" for f in schema) or "none"
    missing = [p for p in info.paths if not _resolves(p, schema)]
    if missing:
        raise InvalidPredicateError(
            f"the {what} {show(filter)} cannot be applied to the table: no column "
            f"{', '.join(repr('.'.join(p)) for p in missing)}; the table's columns: {columns}"
        )
    try:  # one row of nulls: some checks (a naive instant against a zoned column) run only when a kernel runs
        result = pa.table([pa.nulls(1, f.type) for f in schema], schema=schema.with_metadata(None)).filter(filter)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        used = [f"{c} ({schema.field(c).type})" for c in info.columns]
        decimals = [c for c in info.columns if pa.types.is_decimal(schema.field(c).type)]
        if "precision" in reason.lower() and decimals:
            c, t = decimals[0], schema.field(decimals[0]).type
            hint = (
                f"the decimal column {c!r} ({t}) is compared with a literal that pyarrow cannot combine with its "
                f"precision: give the literal the column's own type, as pc.field({c!r}) > "
                f"pa.scalar(Decimal('1'), pa.{t})"
            )
        elif "no kernel matching input types" in reason and any(
            pa.types.is_float16(schema.field(c).type) for c in info.columns
        ):
            hint = (
                "pyarrow has no comparison of half-precision (float16) values: read the column, then filter it "
                "cast to float32"
            )
        elif "no kernel matching input types" in reason:
            hint = "a column is compared with a value of another type"
        else:
            hint = "pyarrow cannot evaluate it"
        raise InvalidPredicateError(
            f"the {what} {show(filter)} cannot be applied to the table: {hint} ({reason}); "
            f"the columns it reads: {', '.join(used) or 'none'}"
        ) from None
    del result
    return filter


def _resolves(path: tuple[str, ...], schema: pa.Schema) -> bool:
    """Whether a path of names reaches a field of ``schema`` (through structs)."""
    names = schema.names
    t: pa.DataType | None = None
    for name in path:
        if t is None:
            if names.count(name) != 1:
                return False
            t = schema.field(name).type
            continue
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            return False
        t = t.field(t.get_field_index(name)).type
    return True


#: pyarrow's messages for a cast that fails on some values (not on the types): a filter that compares a column with
#: a literal of another type makes pyarrow cast the column (a uint64 column against an int literal: to int64)
_VALUE_CAST = ("not in range", "would overflow", "was truncated", "out of bounds")


@contextlib.contextmanager
def evaluating(filter: pc.Expression | None, what: str = "filter") -> Iterator[None]:
    """Within the block (where ``filter`` is evaluated over rows), a cast that fails on some of the rows' values
    is an :class:`~lakefmt.errors.InvalidPredicateError` naming the filter and the fix, not pyarrow's error: the
    filter passed :func:`check_filter` (its types combine), but its literal has another type than the column and
    pyarrow converts the column's values to it."""
    try:
        yield
    except pa.ArrowInvalid as exc:
        reason = str(exc).splitlines()[0] if str(exc) else ""
        if filter is None or not any(m in reason for m in _VALUE_CAST):
            raise
        raise InvalidPredicateError(
            f"the {what} {show(filter)} cannot be evaluated over the table's rows: pyarrow converts a column to the "
            f"type of the literal it is compared with, and a value does not fit ({reason}); give the literal the "
            "column's own type, as pc.field('u') == pa.scalar(1, pa.uint64())"
        ) from None
