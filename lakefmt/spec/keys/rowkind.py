"""Row kinds: change-data input into a key table (the table option ``rowkind.field``, Paimon's name).

A key table whose option ``rowkind.field`` names one of its string columns takes each written row as a change of
its key, by that column's value:

=============================  ==========================  =================================  =======
change                         Paimon (``paimon``)         Delta (``delta``)                  Debezium (``debezium``)
=============================  ==========================  =================================  =======
insert, upsert                 ``+I``                      ``insert``                         ``c``, ``r``
update (the new row)           ``+U``                      ``update_postimage``               ``u``
update (the old row)           ``-U``                      ``update_preimage``                (none)
delete                         ``-D``                      ``delete``                         ``d``
=============================  ==========================  =================================  =======

Inserts and updates upsert the row; a delete deletes its key's live row (the row itself is never live); an
update's old row is ignored (the new row that follows it replaces the key's row). The three spellings share no
value, so by default (``rowkind.format=any``) each is accepted; ``rowkind.format`` = ``paimon``, ``delta`` or
``debezium`` accepts that one only. Values are compared exactly (case included). A null or any other value is
refused (:class:`~lakefmt.errors.InvalidRowKindError`) before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidRowKindError
from lakefmt.key_options import ROWKIND_FORMATS
from lakefmt.options import TableOptions

__all__ = [
    "CHANGE_CODES",
    "DELETE",
    "IGNORE",
    "ROWKIND_FORMATS",
    "SPELLINGS",
    "UPSERT",
    "change_codes",
    "check_kind_column",
    "drop_ignored",
    "row_kinds",
]

UPSERT, DELETE, IGNORE = 0, 1, 2  #: what a row does (the values :func:`row_kinds` returns)

#: per ``rowkind.format``, each accepted value and what a row of it does
SPELLINGS: dict[str, dict[str, int]] = {
    "paimon": {"+I": UPSERT, "+U": UPSERT, "-U": IGNORE, "-D": DELETE},
    "delta": {"insert": UPSERT, "update_postimage": UPSERT, "update_preimage": IGNORE, "delete": DELETE},
    "debezium": {"c": UPSERT, "r": UPSERT, "u": UPSERT, "d": DELETE},
}
SPELLINGS["any"] = {v: k for spelling in list(SPELLINGS.values()) for v, k in spelling.items()}
assert set(SPELLINGS) == set(ROWKIND_FORMATS)


def row_kinds(column: pa.Array | pa.ChunkedArray, options: TableOptions) -> np.ndarray:
    """What each row does (:data:`UPSERT`, :data:`DELETE`, :data:`IGNORE`), by its value in ``column`` (the
    ``rowkind.field`` column) under ``options``' ``rowkind.format``. :class:`InvalidRowKindError` names a null or
    unknown value and the values accepted."""
    field, fmt = options.rowkind_field, options.rowkind_format
    spelling = SPELLINGS[fmt]
    accepted = ", ".join(spelling)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise InvalidRowKindError(f"column {field!r} (the table's rowkind.field) must be a string, not {column.type}")
    if column.null_count:
        raise InvalidRowKindError(
            f"{column.null_count} row(s) have no row kind: column {field!r} (the table's rowkind.field) is null; "
            f"every row must say what it is ({accepted}); nothing was written"
        )
    if len(column) == 0:
        return np.zeros(0, np.int8)
    values = pa.array(list(spelling), column.type)
    at = pc.index_in(column, value_set=values)
    if at.null_count:
        bad = pc.unique(pc.filter(column, pc.is_null(at))).to_pylist()
        shown = ", ".join(repr(v) for v in bad[:5]) + (", ..." if len(bad) > 5 else "")
        raise InvalidRowKindError(
            f"unknown row kind(s) {shown} in column {field!r} (the table's rowkind.field, rowkind.format={fmt}); "
            f"the kinds accepted are {accepted}; nothing was written"
        )
    codes = np.array(list(spelling.values()), np.int8)
    out: np.ndarray = codes[pc.fill_null(at, 0).to_numpy(zero_copy_only=False)]
    return out


#: each accepted value's change as Paimon's row-kind byte (``+I`` 0, ``-U`` 1, ``+U`` 2, ``-D`` 3): what a stored
#: ``input`` changelog records
CHANGE_CODES = {
    "+I": 0, "-U": 1, "+U": 2, "-D": 3,
    "insert": 0, "update_preimage": 1, "update_postimage": 2, "delete": 3,
    "c": 0, "r": 0, "u": 2, "d": 3,
}  # fmt: skip


def change_codes(column: pa.Array | pa.ChunkedArray, options: TableOptions) -> np.ndarray:
    """Each row's change as a row-kind byte (:data:`CHANGE_CODES`), its value checked as :func:`row_kinds` does."""
    row_kinds(column, options)
    if len(column) == 0:
        return np.zeros(0, np.int8)
    values = pa.array(list(CHANGE_CODES), column.type)
    at = pc.index_in(column, value_set=values).to_numpy(zero_copy_only=False)
    out: np.ndarray = np.array(list(CHANGE_CODES.values()), np.int8)[at]
    return out


def check_kind_column(names: Sequence[str], options: TableOptions) -> None:
    """Refuse data without the table's ``rowkind.field`` column (:class:`InvalidRowKindError`, naming it): a
    missing nullable column would otherwise be filled with nulls, and every row said to have no row kind."""
    field = options.rowkind_field
    if field is not None and field not in names:
        raise InvalidRowKindError(
            f"the data has no column {field!r} (the table's rowkind.field): every row must say what it is "
            f"({', '.join(SPELLINGS[options.rowkind_format])}); nothing was written"
        )


def drop_ignored(table: pa.Table, options: TableOptions) -> pa.Table:
    """``table`` without the rows to ignore (updates' old rows), every row's kind checked (:func:`row_kinds`);
    ``table`` itself when the table has no ``rowkind.field``."""
    field = options.rowkind_field
    if field is None or field not in table.column_names:
        return table
    kinds = row_kinds(table.column(field), options)
    if not bool(np.any(kinds == IGNORE)):
        return table
    return table.filter(pa.array(kinds != IGNORE))
