"""A table's location: creating one (its first schema file, published exclusively in an empty folder that no
other table holds) and opening one (a folder that holds a schema file), with the storage client's failures
explained (:func:`lakefmt.io.storage.storage_errors`). The table object itself is :mod:`lakefmt.table`'s."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakefmt.errors import (
    BucketNotFoundError,
    InvalidOptionError,
    LocationNotEmptyError,
    NotATableError,
    TableAlreadyExistsError,
    UnsupportedTypeError,
)
from lakefmt.io import file_io_for
from lakefmt.io.paths import is_temp_of
from lakefmt.io.storage import storage_errors
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import TableSchema, layout
from lakefmt.spec.codec import BASE_FORMAT_VERSION, FORMAT_VERSION
from lakefmt.spec.keys.merge_engine import check_merge_engine
from lakefmt.spec.types import type_to_json

__all__ = ["create_store", "enclosing_table", "first_schema", "open_store"]


def first_schema(
    schema: pa.Schema,
    partition_by: Sequence[str] | None,
    options: Mapping[str, str] | None,
    primary_key: Sequence[str] | None = None,
) -> TableSchema:
    """Schema 0 of a new table, checked before anything is written: a ``pyarrow.Schema`` (``TypeError``), of
    supported types (:class:`UnsupportedTypeError` names the type), with known and valid options
    (:class:`UnknownOptionError`: a typo never silently leaves a default in force; :class:`InvalidOptionError`).

    With ``primary_key`` a key table (format version 3): its key columns are made non-null, and the options
    ``bucket``, ``sequence.field`` and ``rowkind.field`` are checked against the columns.
    ``write.delete.mode=merge-on-read`` on a table without a key makes it version 3 too (deletion vectors)."""
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    for f in schema:
        type_to_json(f.type)
    _check_names(schema)
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    TableOptions.check_keys(opts)
    parsed = TableOptions.from_map(opts).check()
    if isinstance(primary_key, str):
        primary_key = [primary_key]
    keys = tuple(str(k) for k in (primary_key or ()))
    if not keys:
        for key in ("bucket", "sequence.field", "rowkind.field", "rowkind.format"):
            if key in opts:
                raise InvalidOptionError(f"option {key} is for key tables: pass primary_key=[...] as well")
    else:
        _check_rowkind(schema, keys, parsed, opts)
    if keys and parsed.sequence_field is not None:
        if parsed.sequence_field not in schema.names:
            raise InvalidOptionError(
                f"option sequence.field names {parsed.sequence_field!r}, which is not a column "
                f"(columns: {', '.join(schema.names)})"
            )
        t = schema.field(parsed.sequence_field).type
        if not (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)):
            raise InvalidOptionError(
                f"option sequence.field names {parsed.sequence_field!r} of type {t}; it must be an integer, date "
                "or timestamp column"
            )
    check_merge_engine(schema, keys, parsed)
    fields = [f.with_nullable(False) if f.name in keys else f for f in schema]
    keyed = bool(keys) or parsed.delete_mode == "merge-on-read"
    return TableSchema(
        id=0,
        arrow_schema=pa.schema(fields),
        partition_keys=tuple(partition_by or ()),
        options=opts,
        time_millis=int(time.time() * 1000),
        format_version=FORMAT_VERSION if keyed else BASE_FORMAT_VERSION,
        primary_keys=keys,
    )


def _check_names(schema: pa.Schema) -> None:
    """Column names a new table cannot have: an empty one, and two that differ only in case (Spark SQL resolves
    names case-insensitively, so it could read neither of them)."""
    if any(not name.strip() for name in schema.names):
        raise UnsupportedTypeError(f"a column name is empty (columns: {schema.names}); give every column a name")
    folded: dict[str, str] = {}
    for name in schema.names:
        other = folded.setdefault(name.casefold(), name)
        if other != name:
            raise UnsupportedTypeError(
                f"columns {other!r} and {name!r} differ only in case; Spark SQL could tell neither apart: rename one"
            )


def _check_rowkind(schema: pa.Schema, keys: Sequence[str], parsed: TableOptions, opts: Mapping[str, str]) -> None:
    """``rowkind.field`` names a string column that is not a key column; ``rowkind.format`` comes with it."""
    field = parsed.rowkind_field
    if field is None:
        if "rowkind.format" in opts:
            raise InvalidOptionError("option rowkind.format says how rowkind.field spells row kinds: set rowkind.field")
        return
    if field not in schema.names:
        raise InvalidOptionError(
            f"option rowkind.field names {field!r}, which is not a column (columns: {', '.join(schema.names)})"
        )
    t = schema.field(field).type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise InvalidOptionError(f"option rowkind.field names {field!r} of type {t}; it must be a string column")
    if field in keys:
        raise InvalidOptionError(
            f"option rowkind.field names {field!r}, a primary-key column; a row's kind must not be part of its key"
        )


def create_store(uri: str, schema: TableSchema, storage_options: Mapping[str, Any] | None) -> MetaStore:
    """Publish ``schema`` (schema 0) at ``uri``. Refuses a location that already holds a table
    (:class:`TableAlreadyExistsError`; of two racing creates one wins), a location inside another table's root or
    holding any other file (:class:`LocationNotEmptyError`: maintenance deletes unreferenced files under a root,
    so a table owns its folder), a bucket that does not exist (:class:`BucketNotFoundError`)."""
    options = dict(storage_options or {})
    with storage_errors(uri, options):  # no credentials, an endpoint that does not answer, ...
        io = file_io_for(uri, options)
        bucket = io.missing_bucket()
        if bucket is not None:
            raise BucketNotFoundError(f"cannot create a table at {uri}: the bucket {bucket!r} does not exist")
        store = MetaStore(io)
        if store.schema_ids():
            raise TableAlreadyExistsError(f"a lakefmt table already exists at {uri}")
        outer = enclosing_table(io.uri, options)
        if outer is not None:
            raise LocationNotEmptyError(
                f"{uri} is inside the lakefmt table at {outer}, whose maintenance owns every file under its root "
                "(orphan-clean would delete this table); create the table outside it"
            )
        # a temp file of an interrupted create (schema/.schema-0.tmp-...) is not someone else's data
        stray = next((f for f in io.walk() if not is_temp_of(layout.schema_path(0), f.path)), None)
        if stray is not None:
            raise LocationNotEmptyError(
                f"{uri} is not empty (it holds {stray.path!r}); create the table in an empty location"
            )
        try:
            published = io.publish(layout.schema_path(0), schema.to_json())
        except NotADirectoryError as exc:  # a local file where the table's folder would be (or above it)
            raise LocationNotEmptyError(
                f"{uri} is a file or lies under one ({exc.filename}); create the table in an empty folder"
            ) from None
        if not published:
            raise TableAlreadyExistsError(f"a lakefmt table was created at {uri} concurrently")
        return store


def open_store(uri: str, storage_options: Mapping[str, Any] | None) -> MetaStore:
    """The metadata store of the table at ``uri``; :class:`NotATableError` if it holds none
    (:class:`BucketNotFoundError`, a kind of it, when its bucket does not exist)."""
    options = dict(storage_options or {})
    with storage_errors(uri, options):
        io = file_io_for(uri, options)
        store = MetaStore(io)
        try:
            store.latest_schema()  # raises NotATableError
        except NotATableError as exc:
            bucket = io.missing_bucket()
            if bucket is not None:
                message = f"{uri} is not a lakefmt table: the bucket {bucket!r} does not exist"
                raise BucketNotFoundError(message) from exc
            raise
    return store


def enclosing_table(uri: str, storage_options: dict[str, Any]) -> str | None:
    """The URI of a table whose root holds ``uri`` (a folder above it with a ``schema/schema-<n>``), if any.
    ``uri`` is normalized (:func:`~lakefmt.io.paths.normalize_uri`): a local table is an absolute path."""
    if "://" not in uri:
        path = uri
        ancestors = []
        while (parent := os.path.dirname(path)) != path:
            ancestors.append(parent)
            path = parent
    else:
        scheme, rest = uri.split("://", 1)
        parts = rest.rstrip("/").split("/")
        ancestors = [f"{scheme}://{'/'.join(parts[:i])}" for i in range(len(parts) - 1, 0, -1)]
    for ancestor in ancestors:
        if MetaStore(file_io_for(ancestor, storage_options)).schema_ids():
            return ancestor
    return None
