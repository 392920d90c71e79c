"""The ``lookup`` changelog producer (``changelog-producer=lookup``, Paimon's name): a commit that replaces or
deletes rows by deletion vector stores its change rows in a changelog file (:mod:`lakefmt.spec.changelog`).

The commit's planner (:mod:`lakefmt.rewrite.keys`) already found, through the key lookup, the position of every row
it deletes; this module reads those rows (the pre-images), and the commit's new rows that stay live (the
post-images), labels them as the change feed would (:func:`lakefmt.read.change_labels.label_changes`) and writes
them. The feed then reads that one file instead of reading the replaced rows out of older files.

The rows are read through a per-process cache of row groups (:class:`lakefmt.read.rows_at.RowReader`, one per table
and schema, a few tables at a time): a long-lived writer reads each row group of the table once, and the rows it
writes are cached as it labels them, so a later commit finds the rows it replaces in memory. A commit that only
inserts stores nothing: the feed reads its rows from its new files, which costs no more.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.change_labels import label_changes
from lakefmt.read.rows_at import RowReader, RowRequest
from lakefmt.spec import DataFile, TableSchema
from lakefmt.spec.changelog import encode_changelog
from lakefmt.spec.manifest import FileContent

__all__ = ["clear_readers", "store_changelog"]

_READERS: OrderedDict[tuple[str, int], tuple[RowReader, threading.Lock]] = OrderedDict()
_LOCK = threading.Lock()
_MAX_READERS = 4


def _reader(io: FileIO, store: MetaStore, schema: TableSchema) -> tuple[RowReader, threading.Lock]:
    """The table's cached reader for ``schema``, and the lock its user holds (a reader is not thread-safe)."""
    key = (io.uri, schema.id)
    with _LOCK:
        hit = _READERS.get(key)
        if hit is None:
            hit = _READERS[key] = (RowReader(io, store, schema), threading.Lock())
            while len(_READERS) > _MAX_READERS:
                _READERS.popitem(last=False)
        _READERS.move_to_end(key)
        return hit


def clear_readers() -> None:
    """Forget the cached row groups (tests; memory)."""
    with _LOCK:
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
    schema_ids = dict(zip(ents.paths(old), _schema_ids(old), strict=True))
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
    for p, sid, count in zip(new_paths, _schema_ids(new), new.column(ents.ROW_COUNT).to_pylist(), strict=True):
        everything = np.arange(count, dtype=np.int64)
        dead = marks.get(p)
        live = everything if dead is None else np.setdiff1d(everything, dead, assume_unique=True)
        if len(live):
            kept.append(RowRequest(p, sid, live))
    with lock:
        deleted, inserted = reader.take(gone), reader.take(kept)
    labelled = label_changes(deleted, inserted, schema.primary_keys)
    if labelled is None:
        return None
    rows, codes = labelled
    options = schema.table_options
    file_schema = schema.id_schema if schema.format_version >= 2 else schema.arrow_schema
    compression = None if options.compression == "none" else options.compression
    data = encode_changelog(rows, codes, file_schema, compression)
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


def _schema_ids(entries: pa.Table) -> list[int | None]:
    if ents.SCHEMA_ID not in entries.column_names:
        return [None] * entries.num_rows
    out: list[int | None] = entries.column(ents.SCHEMA_ID).to_pylist()
    return out
