"""What users hand a one-line write or ``create_table``: a schema, or data that has one. pyarrow Tables, record
batches and readers, pandas and Polars frames, and anything that speaks the Arrow PyCapsule interface
(``__arrow_c_stream__`` for rows, ``__arrow_c_schema__`` for a schema alone)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakefmt.errors import SchemaMismatchError, TableAlreadyExistsError
from lakefmt.spec import TableSchema

__all__ = ["as_arrow", "check_same_table", "differences", "schema_of"]


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "columns")


def _check_polars(data: Any) -> None:
    """:class:`SchemaMismatchError` naming a Polars ``Object`` column: Polars exports it as 8 bytes a value (the
    address of each Python object), which a write would store as if they were data."""
    if type(data).__module__.split(".")[0] != "polars" or not hasattr(data, "collect_schema"):
        return
    for name, dtype in data.collect_schema().items():
        if type(dtype).__name__ == "Object":
            raise SchemaMismatchError(
                f"the frame's column {name!r} has Polars type Object (Python objects), which Arrow cannot hold: "
                "Polars would export their memory addresses; give it a type, e.g. "
                f"df.with_columns(pl.col({name!r}).cast(pl.String))"
            )


def as_arrow(data: Any) -> Any:
    """``data`` as Arrow the writer reads (a Table, a RecordBatch or a RecordBatchReader), read at most once: a
    pandas frame without its index (a RangeIndex carries no data; name a meaningful index with
    ``reset_index()``), any other object with ``__arrow_c_stream__`` as a reader. Anything else is returned as it
    is (an iterable of batches: the writer checks it)."""
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return data
    if _is_pandas(data):
        return _converted(lambda f: pa.Table.from_pandas(f, preserve_index=False), _with_named_index(data))
    if hasattr(data, "__arrow_c_stream__"):
        _check_polars(data)
        return pa.RecordBatchReader.from_stream(data)
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):  # batches: read as they come
        items = iter(data)
        first = next(items, None)
        if isinstance(first, pa.Table | pa.RecordBatch):
            rest = itertools.chain([first], items)
            return pa.RecordBatchReader.from_batches(first.schema, (b for t in rest for b in _batches(t)))
        return [] if first is None else itertools.chain([first], items)
    return data


def _with_named_index(frame: Any) -> Any:
    """A pandas frame with its named index levels moved into columns (as deltalake writes them): a named index
    carries data (``set_index("id")``, a groupby's keys); an unnamed one (a RangeIndex, what a row filter leaves)
    is positions only and is dropped. :class:`SchemaMismatchError` when a level's name is also a column's."""
    named = [n for n in frame.index.names if n is not None]
    if not named:
        return frame
    clash = [n for n in named if n in frame.columns]
    if clash:
        raise SchemaMismatchError(
            f"the frame's index {clash[0]!r} has the name of one of its columns; rename or drop one of them"
        )
    return frame.reset_index(level=named)


def _converted(convert: Callable[[Any], Any], frame: Any) -> Any:
    """``convert(frame)``, a pandas column Arrow cannot type (an object column of mixed values) a
    :class:`SchemaMismatchError` naming it."""
    try:
        return convert(frame)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        for name in frame.columns:
            try:
                pa.array(frame[name], from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as col_exc:
                raise SchemaMismatchError(
                    f"the frame's column {str(name)!r} cannot be converted to Arrow ({col_exc}); give it one type, "
                    f"e.g. df.astype({{{str(name)!r}: 'string'}})"
                ) from None
        raise SchemaMismatchError(f"the frame cannot be converted to Arrow: {exc}") from None


def _batches(item: Any) -> list[pa.RecordBatch]:
    if isinstance(item, pa.Table):
        batches: list[pa.RecordBatch] = item.to_batches()
        return batches
    if isinstance(item, pa.RecordBatch):
        return [item]
    raise SchemaMismatchError(f"expected Arrow tables or record batches, got {type(item).__name__}")


def schema_of(data: Any) -> pa.Schema:
    """The Arrow schema of ``data``: a ``pyarrow.Schema`` as it is, or the schema of data that has one (see the
    module docstring), its view types as their plain types (Polars exports ``string_view``: the table stores
    ``string``, which writes accept view data into) and its dictionary types (pandas' and Polars' Categorical) as
    their value types; a stream is not read (its schema comes first). ``TypeError``
    for anything else; :class:`SchemaMismatchError` for a column of data that holds only nulls (type null)."""
    if isinstance(data, pa.Schema):
        return data
    schema = _schema(data)
    untyped = [f.name for f in schema if pa.types.is_null(f.type)]
    if untyped:
        raise SchemaMismatchError(
            f"column {untyped[0]!r} of the data holds only nulls, so it has no type to create a column from; "
            "give it one (a pyarrow schema, or e.g. df.astype({...: 'string'}) in pandas)"
        )
    return pa.schema([f.with_type(_plain(f.type)) for f in schema], metadata=schema.metadata)


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):  # pandas' and Polars' Categorical: the table stores the values
        return _plain(t.value_type)
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        item = t.value_field.with_type(_plain(t.value_type))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain(t.field(i).type)) for i in range(t.num_fields)])
    return t


def _schema(data: Any) -> pa.Schema:
    if isinstance(data, pa.Schema):
        return data
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return data.schema
    if _is_pandas(data):
        return _converted(lambda f: pa.Schema.from_pandas(f, preserve_index=False), _with_named_index(data))
    if hasattr(data, "__arrow_c_schema__") and not hasattr(data, "__arrow_c_stream__"):
        return pa.schema(data)
    if hasattr(data, "__arrow_c_stream__"):
        _check_polars(data)
        return pa.RecordBatchReader.from_stream(data).schema
    raise TypeError(
        "schema must be a pyarrow.Schema or data that has one (a pyarrow Table, RecordBatch or RecordBatchReader, "
        f"a pandas or Polars DataFrame, an object with __arrow_c_stream__ or __arrow_c_schema__), got "
        f"{type(data).__name__}"
    )


def differences(
    existing: TableSchema,
    *,
    columns: pa.Schema | None = None,
    partition_by: Sequence[str] | None = None,
    primary_key: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
) -> list[str]:
    """How the ``existing`` table differs from what was asked for: ``columns`` (names, order, types, nullability;
    field ids and metadata aside), ``partition_by``, ``primary_key`` and the ``options`` given (only those). What
    is None was not asked for."""
    out = []
    if columns is not None:
        have = [(f.name, str(f.type), f.nullable) for f in existing.arrow_schema]
        want = [(f.name, str(f.type), f.nullable) for f in columns]
        if have != want:
            out.append(f"columns: the table has {_show(have)}, asked for {_show(want)}")
    if partition_by is not None and existing.partition_keys != tuple(partition_by):
        out.append(f"partition keys: the table has {list(existing.partition_keys)}, asked for {list(partition_by)}")
    if isinstance(primary_key, str):
        primary_key = [primary_key]
    if primary_key is not None and existing.primary_keys != tuple(primary_key):
        out.append(f"primary key: the table has {list(existing.primary_keys)}, asked for {list(primary_key)}")
    for key, value in sorted((options or {}).items()):
        if existing.options.get(str(key)) != str(value):
            out.append(f"option {key}: the table has {existing.options.get(str(key))!r}, asked for {str(value)!r}")
    return out


def check_same_table(uri: str, existing: TableSchema, asked: TableSchema, options: Mapping[str, str] | None) -> None:
    """``create_table(exist_ok=True)``: :class:`TableAlreadyExistsError` naming what differs unless the table at
    ``uri`` is the one asked for (``asked``: schema 0 as ``create_table`` would have published it)."""
    asked = TableSchema.from_json(asked.to_json())  # as the table would have stored it
    diff = differences(
        existing, columns=asked.arrow_schema, partition_by=asked.partition_keys, primary_key=asked.primary_keys,
        options=options,
    )
    if diff:
        raise TableAlreadyExistsError(
            f"a table already exists at {uri} and is not the one asked for ({'; '.join(diff)}): open it with "
            "open_table, or create the new one elsewhere"
        )


def _show(columns: list[tuple[str, str, bool]]) -> str:
    return "(" + ", ".join(f"{n} {t}{'' if nullable else ' not null'}" for n, t, nullable in columns) + ")"
