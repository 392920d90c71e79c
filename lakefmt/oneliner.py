"""One-line writes (deltalake's ``write_deltalake``): ``lakefmt.write_table(uri, data)`` creates the table from the
data's schema when there is none at ``uri``, then appends or overwrites."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from lakefmt.aliases import either
from lakefmt.errors import InvalidOptionError, NotATableError, TableAlreadyExistsError
from lakefmt.rewrite.replace import check_rows_satisfy
from lakefmt.spec.filters import check_filter
from lakefmt.spec.scope import constant_condition
from lakefmt.table import Table, create_table, open_table
from lakefmt.write.source import as_arrow, differences, schema_of

__all__ = ["MODES", "write_table"]

#: the modes of :func:`write_table`
MODES = ("append", "overwrite", "error", "ignore")


def write_table(
    uri: str,
    data: Any,
    mode: Literal["append", "overwrite", "error", "ignore"] = "append",
    *,
    partition_by: Sequence[str] | None = None,
    primary_key: Sequence[str] | None = None,
    schema_mode: Literal["merge"] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    predicate: str | None = None,
    primary_keys: Sequence[str] | None = None,
) -> Table:
    """Write ``data`` (a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or Polars DataFrame, anything with
    ``__arrow_c_stream__``, or an iterable of record batches) to the table at ``uri`` in one snapshot, and return
    the table.

    When ``uri`` holds no table, one is created first from the data's schema with ``partition_by``,
    ``primary_key`` and ``options`` (:func:`lakefmt.create_table`; of two racing creates one wins and the other
    writes to it). When it holds one, what is given of ``partition_by``, ``primary_key`` and ``options`` must match
    it (:class:`TableAlreadyExistsError` names the difference otherwise, before anything is written).

    ``mode="append"`` (the default) adds the rows (on a key table: upserts them by key, as :meth:`Table.append`
    does), so running a script twice writes its rows twice; ``mode="overwrite"`` replaces every row of the table
    (:meth:`Table.overwrite`), or with ``predicate`` (SQL text, deltalake's ``predicate=``) only the rows where it
    is true, in the same commit that adds the new rows, each of which must satisfy it (on partition columns alone:
    the partitions it selects, replaced whole). deltalake's ``mode="error"`` writes only when ``uri`` holds no
    table yet (:class:`TableAlreadyExistsError` otherwise, nothing written), ``mode="ignore"`` then writes nothing
    and returns the table as it is. Any other mode is an :class:`InvalidOptionError`, as is ``predicate`` with a
    mode other than ``overwrite``. ``schema_mode="merge"`` adds the data's new columns to the table first; without
    it a column the table lacks is refused. Either way the table's nullable columns the data lacks are written as
    nulls. ``primary_keys`` (pypaimon's spelling) is ``primary_key``. When the table is new, ``predicate`` and the
    rows are checked before it is created (a stream is read first), so a refusal leaves no table behind."""
    primary_key = either("primary_key", primary_key, "primary_keys", primary_keys)
    if mode not in MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    if schema_mode not in (None, "merge"):
        raise InvalidOptionError(f"schema_mode must be 'merge' or None, got {schema_mode!r}")
    if predicate is not None and mode != "overwrite":
        raise InvalidOptionError(f"predicate replaces the rows it selects: it needs mode='overwrite', got {mode!r}")
    if predicate is not None and (not isinstance(predicate, str) or not predicate.strip()):
        raise InvalidOptionError(f"predicate must be SQL text such as \"x < 0.5\", got {predicate!r}")
    data = as_arrow(data)
    if predicate is not None and not _exists(uri, storage_options):
        data = _checked_first_rows(data, predicate)
    table, created = _table(uri, data, partition_by, primary_key, storage_options, options,
                            exclusive=mode in ("error", "ignore"))
    if mode in ("error", "ignore") and not created:
        if mode == "error":
            raise TableAlreadyExistsError(
                f"a table already exists at {uri} (mode='error' writes only a new table); nothing was written. "
                "Use mode='append' to add rows, 'overwrite' to replace them, or 'ignore' to skip the write"
            )
        return table
    if mode == "overwrite":
        table.overwrite(data, schema_mode=schema_mode, where=predicate)
    else:
        table.append(data, schema_mode=schema_mode)
    return table


def _exists(uri: str, storage_options: Mapping[str, Any] | None) -> bool:
    try:
        open_table(uri, storage_options)
    except NotATableError as exc:
        return type(exc) is not NotATableError  # a missing bucket: the write fails as it would
    return True


def _checked_first_rows(data: Any, predicate: str) -> Any:
    """``data`` (a stream read into a table) once ``predicate`` binds to its columns and every row satisfies it:
    the checks the overwrite of a new table makes, made before the table is created."""
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    schema = schema_of(data)
    condition = check_filter(predicate, schema, "overwrite condition")
    if constant_condition(condition, schema, predicate) is None and isinstance(data, pa.Table | pa.RecordBatch):
        check_rows_satisfy(data, condition, predicate)
    return data


def _table(
    uri: str, data: Any, partition_by: Sequence[str] | None, primary_key: Sequence[str] | None,
    storage_options: Mapping[str, Any] | None, options: Mapping[str, str] | None, *, exclusive: bool = False,
) -> tuple[Table, bool]:
    """The table at ``uri``, created from ``data``'s schema if there is none (and whether this call created it);
    checked against what was asked, unless ``exclusive`` and another writer's table was found (not written to)."""
    try:
        table = open_table(uri, storage_options)
    except NotATableError as exc:
        if type(exc) is not NotATableError:  # a missing bucket: creating fails the same way
            raise
        try:
            schema = schema_of(data)
            return create_table(uri, schema, partition_by, options, storage_options, primary_key=primary_key), True
        except TableAlreadyExistsError:  # another writer created it meanwhile: write to it, if it is the same
            table = open_table(uri, storage_options)
    if exclusive:
        return table, False
    diff = differences(table.table_schema(), partition_by=partition_by, primary_key=primary_key, options=options)
    if diff:
        raise TableAlreadyExistsError(
            f"the table at {uri} is not the one asked for ({'; '.join(diff)}); nothing was written"
        )
    return table, False
