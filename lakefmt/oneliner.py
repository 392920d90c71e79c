"""One-line writes (deltalake's ``write_deltalake``): ``lakefmt.write_table(uri, data)`` creates the table from the
data's schema when there is none at ``uri``, then appends or overwrites."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from lakefmt.errors import InvalidOptionError, NotATableError, TableAlreadyExistsError
from lakefmt.table import Table, create_table, open_table
from lakefmt.write.source import as_arrow, differences, schema_of

__all__ = ["MODES", "write_table"]

#: the modes of :func:`write_table`
MODES = ("append", "overwrite")


def write_table(
    uri: str,
    data: Any,
    mode: Literal["append", "overwrite"] = "append",
    *,
    partition_by: Sequence[str] | None = None,
    primary_key: Sequence[str] | None = None,
    schema_mode: Literal["merge"] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
) -> Table:
    """Write ``data`` (a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or Polars DataFrame, anything with
    ``__arrow_c_stream__``, or an iterable of record batches) to the table at ``uri`` in one snapshot, and return
    the table.

    When ``uri`` holds no table, one is created first from the data's schema with ``partition_by``,
    ``primary_key`` and ``options`` (:func:`lakefmt.create_table`; of two racing creates one wins and the other
    writes to it). When it holds one, what is given of ``partition_by``, ``primary_key`` and ``options`` must match
    it (:class:`TableAlreadyExistsError` names the difference otherwise, before anything is written).

    ``mode="append"`` adds the rows (on a key table: upserts them by key, as :meth:`Table.append` does);
    ``mode="overwrite"`` replaces every row of the table (:meth:`Table.overwrite`). Any other mode is an
    :class:`InvalidOptionError`. ``schema_mode="merge"`` adds the data's new columns to the table first; without it
    a column the table lacks is refused. Either way the table's nullable columns the data lacks are written as
    nulls."""
    if mode not in MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    if schema_mode not in (None, "merge"):
        raise InvalidOptionError(f"schema_mode must be 'merge' or None, got {schema_mode!r}")
    data = as_arrow(data)
    table = _table(uri, data, partition_by, primary_key, storage_options, options)
    if mode == "append":
        table.append(data, schema_mode=schema_mode)
    else:
        table.overwrite(data, schema_mode=schema_mode)
    return table


def _table(
    uri: str, data: Any, partition_by: Sequence[str] | None, primary_key: Sequence[str] | None,
    storage_options: Mapping[str, Any] | None, options: Mapping[str, str] | None,
) -> Table:
    """The table at ``uri``, created from ``data``'s schema if there is none; checked against what was asked."""
    try:
        table = open_table(uri, storage_options)
    except NotATableError as exc:
        if type(exc) is not NotATableError:  # a missing bucket: creating fails the same way
            raise
        try:
            return create_table(uri, schema_of(data), partition_by, options, storage_options, primary_key=primary_key)
        except TableAlreadyExistsError:  # another writer created it meanwhile: write to it, if it is the same
            table = open_table(uri, storage_options)
    diff = differences(table.table_schema(), partition_by=partition_by, primary_key=primary_key, options=options)
    if diff:
        raise TableAlreadyExistsError(
            f"the table at {uri} is not the one asked for ({'; '.join(diff)}); nothing was written"
        )
    return table
