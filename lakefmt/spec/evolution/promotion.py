"""The type rules of schema evolution, and column paths: which type changes widen losslessly
(:func:`is_promotion`), what kind of type a column is for the rules (:func:`kind_of`), and the path of names that
names a column at any depth. Used by the editor (:mod:`lakefmt.spec.evolution.editor`), by the comparison of two
schemas (:mod:`lakefmt.spec.evolution.changes`) and by reads that cast old files (``lakefmt.read.evolve``)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lakefmt.errors import SchemaEvolutionError

__all__ = ["Path", "as_path", "is_promotion", "kind_of", "show_path"]

#: a column's path of names: ``("info", "city")`` is field ``city`` of struct column ``info``. A string names the
#: column of that exact name or, when there is none, a field inside a struct by its dotted name (``"info.city"``,
#: as in pyiceberg); see :meth:`SchemaEditor.resolve`
Path = tuple[str, ...]


_INT_ORDER = {
    True: [pa.int8(), pa.int16(), pa.int32(), pa.int64()],
    False: [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()],
}


def as_path(path: str | Sequence[str]) -> Path:
    """A column path from a name or a sequence of names, taken literally (:class:`SchemaEvolutionError` for
    anything else)."""
    try:
        parts: Path = (path,) if isinstance(path, str) else tuple(path)
    except TypeError:
        parts = ()
    if not parts or not all(isinstance(p, str) for p in parts):
        raise SchemaEvolutionError(f"a column path is a name or a sequence of names, got {path!r}")
    return parts


def is_promotion(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether ``src`` widens losslessly into ``dst`` (the type changes the rules allow; equal types are not)."""
    if src == dst:
        return False
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        signed = pa.types.is_signed_integer(src)
        if signed != pa.types.is_signed_integer(dst):
            return False
        order = _INT_ORDER[signed]
        return order.index(src) < order.index(dst)
    if pa.types.is_float32(src) and pa.types.is_float64(dst):
        return True
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return bool(src.scale == dst.scale and src.precision < dst.precision and src.bit_width <= dst.bit_width)
    return False


def kind_of(t: pa.DataType) -> str:
    """What kind of type ``t`` is for evolution: ``struct``, a list, a map or ``primitive``."""
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_large_list(t):
        return "large_list"
    if pa.types.is_list(t):
        return "list"
    if pa.types.is_map(t):
        return "map"
    return "primitive"

def show_path(path: Path) -> str:
    """A column's path for messages: ``'info.city'``, or ``the table`` for the root."""
    return repr(".".join(path)) if len(path) > 1 else repr(path[0]) if path else "the table"
