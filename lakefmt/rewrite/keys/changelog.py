"""Stored changelogs (``changelog-producer``, Paimon's option and values): what a commit on a key table (or a
merge-on-read delete) stores for the change feed, in one changelog file (:mod:`lakefmt.spec.changelog`).

* ``lookup`` (:func:`store_changelog`): a commit that replaces or deletes rows by deletion vector stores its change
  rows. Its planner (:mod:`.planners`) already found, through the key lookup, the position of every row
  it deletes; this module reads those rows (the pre-images) and the commit's new rows that stay live (the
  post-images), labels them as the change feed would (:func:`lakefmt.read.change_labels.label_changes`) and writes
  them. The feed then reads that one file instead of reading the replaced rows out of older files. A commit that
  only inserts stores nothing: the feed reads its rows from its new files, which costs no more.
* ``input`` (:func:`store_input`): every commit stores the rows it was given, as they were written, each with its
  own row kind (the ``rowkind.field`` value, else an insert), and a delete by key as its key: the feed shows the
  input, not what it did to the table (Paimon's meaning). Writers drop an update's before-image (``-U``) before
  writing, so it is not stored.

Rows are read through a per-process cache of row groups (:class:`lakefmt.read.rows_at.RowReader`, one per table and
schema, a few tables at a time): a long-lived writer reads each row group of the table once, and the rows it writes
are cached as it labels them, so a later commit finds the rows it replaces in memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from lakefmt.cache import BoundedCache
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.change_labels import label_changes
from lakefmt.read.rows_at import RowReader, RowRequest
from lakefmt.spec import DataFile, TableSchema
from lakefmt.spec.changelog import encode_changelog
from lakefmt.spec.keys.rowkind import change_codes
from lakefmt.spec.manifest import FileContent

__all__ = ["clear_readers", "store_changelog", "store_input"]

#: each table's reader of the rows its upserts replace (row groups it read, kept for the next commit)
_READERS: BoundedCache[tuple[str, int, str], tuple[RowReader, threading.Lock]] = BoundedCache(4)


def _reader(io: FileIO, store: MetaStore, schema: TableSchema) -> tuple[RowReader, threading.Lock]:
    """The table's cached reader for ``schema``, and the lock its user holds (a reader is not thread-safe). Keyed
    by location and the schema itself (a table dropped and created again at the same location with other columns
    gets a reader of its own; its files have other names), shared by every table object of the same table (a
    Spark sink opens the table again for each micro-batch)."""
    key = (io.uri, schema.id, schema.id_schema.to_string(show_field_metadata=True))
    hit = _READERS.get(key)
    if hit is None:
        hit = _READERS.setdefault(key, (RowReader(io, store, schema), threading.Lock()))
    return hit


def clear_readers() -> None:
    """Forget the cached row groups (tests; memory)."""
    _READERS.clear()


def store_changelog(
    io: FileIO,
    store: MetaStore,
    schema: TableSchema,
    *,
    old: pa.Table,
    new: pa.Table,
    marks: Mapping[str, np.ndarray],
    path: str,
) -> DataFile | None:
    """Write the changelog file of a commit at ``path``: ``old``: the live data entries it may delete rows of;
    ``new``: the entries of its new data files; ``marks``: the positions it newly deletes, by data file path (sorted,
    each once). None, writing nothing, when the commit deletes no row of ``old``."""
    schema_ids = dict(zip(ents.paths(old), ents.schema_ids(old), strict=True))
    new_paths = ents.paths(new)
    new_set = set(new_paths)
    gone = [
        RowRequest(p, schema_ids.get(p), positions)
        for p, positions in sorted(marks.items())
        if p not in new_set and len(positions)
    ]
    if not gone:
        return None
    reader, lock = _reader(io, store, schema)
    kept = []
    for p, sid, count in zip(new_paths, ents.schema_ids(new), new.column(ents.ROW_COUNT).to_pylist(), strict=True):
        everything = np.arange(count, dtype=np.int64)
        dead = marks.get(p)
        live = everything if dead is None else np.setdiff1d(everything, dead, assume_unique=True)
        if len(live):
            kept.append(RowRequest(p, sid, live))
    with lock:
        reader.io, reader.store = io, store  # this commit's: files and schemas by id are read through them
        deleted, inserted = reader.take(gone), reader.take(kept)
    labelled = label_changes(deleted, inserted, schema.primary_keys)
    if labelled is None:
        return None
    rows, codes = labelled
    return _write(io, schema, rows, codes, path)


def _write(io: FileIO, schema: TableSchema, rows: pa.Table, codes: np.ndarray, path: str) -> DataFile:
    options = schema.table_options
    file_schema = schema.id_schema if schema.format_version >= 2 else schema.arrow_schema
    compression = None if options.compression == "none" else options.compression
    data = encode_changelog(rows, codes, _nullable(file_schema), compression)
    io.write(path, data, sync=options.fsync)
    return DataFile(
        path=path,
        file_size=len(data),
        row_count=rows.num_rows,
        schema_id=schema.id,
        partition={},
        stats={},
        creation_time_ms=int(time.time() * 1000),
        content=FileContent.DATA,
    )


def store_input(
    io: FileIO,
    store: MetaStore,
    schema: TableSchema,
    *,
    new: pa.Table,
    deleted_keys: pa.Table | None,
    path: str,
    dropped: Mapping[str, np.ndarray] | None = None,
) -> DataFile | None:
    """Write the ``input`` changelog file of a commit at ``path``: every row of its writers' files ``new``, in
    order, as it was written, with its own row kind (the ``rowkind.field`` value, else an insert), but the rows
    ``dropped`` (sorted positions by data file: those an upsert of the same rows never writes, a row that lost to a
    later row of its key and an update's before-image, so that ``append``, ``upsert``, job writers and the Spark
    sink store the same rows for the same batch), then a delete for each of ``deleted_keys`` (its key columns; the
    other columns null). None, writing nothing, for no row."""
    reader, lock = _reader(io, store, schema)
    counts = new.column(ents.ROW_COUNT).to_pylist()
    gone = dropped or {}
    every = [
        RowRequest(p, sid, _kept(count, gone.get(p)))
        for p, sid, count in zip(ents.paths(new), ents.schema_ids(new), counts, strict=True)
        if count
    ]
    every = [r for r in every if len(r.positions)]
    with lock:
        reader.io, reader.store = io, store
        rows = reader.take(every)
    options = schema.table_options
    field = options.rowkind_field
    codes = change_codes(rows.column(field), options) if field else np.zeros(rows.num_rows, np.int8)
    if deleted_keys is not None and deleted_keys.num_rows:
        keys = {k: deleted_keys.column(k).cast(schema.arrow_schema.field(k).type) for k in schema.primary_keys}
        n = deleted_keys.num_rows
        deletes = pa.table(
            [keys.get(f.name, pa.nulls(n, f.type)) for f in schema.arrow_schema], schema=_nullable(schema.arrow_schema)
        )
        rows = pa.concat_tables([rows.cast(deletes.schema), deletes])
        codes = np.concatenate([codes, np.full(n, 3, np.int8)])
    if rows.num_rows == 0:
        return None
    return _write(io, schema, rows, codes, path)


def _kept(count: int, dropped: np.ndarray | None) -> np.ndarray:
    """The positions ``0 .. count-1`` but ``dropped``."""
    every = np.arange(count, dtype=np.int64)
    return every if dropped is None or not len(dropped) else np.setdiff1d(every, dropped, assume_unique=True)


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)
