"""The task-side writer: Parquet data files per partition, then one per-task manifest.

Partition columns are kept **in** the data files (as well as in the manifest): every data file is a complete,
self-describing Parquet file, readers need no path parsing, and column min/max pruning covers partition
columns too. A constant column costs a few bytes per row group once dictionary/RLE-encoded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefmt.errors import InvalidPartitionError, LakefmtError, SchemaMismatchError
from lakefmt.io import FileIO
from lakefmt.key_options import MAX_BUCKETS
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.options import InvalidOptionError
from lakefmt.spec import CommitMessage, DataFile, TableSchema, layout
from lakefmt.spec.keys.hashing import bucket_of, buckets_of_hashes, key_bytes, key_hash
from lakefmt.spec.keys.index_file import (
    encode_hashed_index,
    encode_key_index,
    hashed_columns,
    indexed_column,
    key_values,
)
from lakefmt.spec.keys.rowkind import check_kind_column, drop_ignored
from lakefmt.spec.manifest import encode_manifest, manifest_meta
from lakefmt.spec.partition import partition_path
from lakefmt.write.conform import conform
from lakefmt.write.encoding import dictionary_columns
from lakefmt.write.source import as_arrow
from lakefmt.write.stats import StatsCollector

__all__ = ["TableWriter", "WriterClosedError", "as_tables"]

_BUCKET = "__lakefmt_bucket"
_HASH = "__lakefmt_key_hash"  #: buffered rows' key hashes (hashed key indexes), dropped before they are written
_MAX_INDEXED_ROWS = (1 << 32) - 1  #: a key index's positions are 32-bit


class WriterClosedError(LakefmtError):
    """``write`` after ``prepare_commit`` or ``abort``."""


def as_tables(data: Any) -> Iterable[pa.Table]:
    """Accept a Table, RecordBatch, RecordBatchReader, pandas-like object with ``__arrow_c_stream__``, or an
    iterable of batches/tables, and yield tables."""
    if isinstance(data, pa.Table):
        yield data
    elif isinstance(data, pa.RecordBatch):
        yield pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        for batch in data:
            yield pa.Table.from_batches([batch])
    elif hasattr(data, "__arrow_c_stream__"):  # a pandas frame as write_table takes it (its named index kept)
        yield from as_tables(as_arrow(data))
    elif isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        for item in data:
            if not isinstance(item, pa.Table | pa.RecordBatch):
                raise SchemaMismatchError(f"expected Arrow tables or record batches, got {type(item).__name__}")
            yield from as_tables(item)
    else:
        raise SchemaMismatchError(
            f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, RecordBatchReader "
            "or an iterable of them"
        )


@dataclass
class _OpenFile:
    rel_path: str
    stream: Any  # a binary output stream with tell() and close()
    writer: pq.ParquetWriter
    stats: StatsCollector
    rows: int = 0
    keys: list[np.ndarray] | None = None  #: a key table's indexed key values, group by group (key index files)
    #: a key table's key hashes and key bytes, group by group (hashed key index files)
    hashed: list[tuple[np.ndarray, pa.Array]] | None = None
    index_bytes: int = 0  #: bytes of ``keys`` or ``hashed``
    synced_bytes: int = 0  # bytes written when the last background sync started
    pending_sync: Future[None] | None = None


@dataclass
class _PartitionState:
    values: dict[str, Any]
    folder: str
    bucket: int = 0
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_rows: int = 0
    buffered_bytes: int = 0
    file: _OpenFile | None = None


class TableWriter:
    """Writes data files for one task and, on :meth:`prepare_commit`, one manifest listing them.

    Nothing is visible to readers until a committer publishes the returned :class:`CommitMessage`. Not
    thread-safe: use one writer per task or thread.
    """

    def __init__(
        self,
        io: FileIO,
        schema: TableSchema,
        *,
        writer_id: str | None = None,
        on_manifest: Callable[[str, bytes], None] | None = None,
        creation_time_ms: int | None = None,
    ) -> None:
        self._io = io
        # the creation time its files record (default: each file's close): a rewrite records its inputs' newest,
        # so that automatic compaction's tiers, which go by creation time, see its rows' age
        self._creation_time_ms = creation_time_ms
        self._on_manifest = on_manifest  # e.g. the table's metadata cache: a committer here need not read it
        self._schema = schema
        self._options = schema.table_options
        if schema.has_primary_key and self._options.bucket > MAX_BUCKETS:  # a table created before the check
            raise InvalidOptionError(
                f"this key table's option bucket ({self._options.bucket}) is more than {MAX_BUCKETS} buckets, "
                "which no manifest entry can number: it cannot be written (its reads are unaffected)"
            )
        # ``write.sync-ahead-bytes``: a file still being written is synced in the background each time this many
        # more bytes of it are on disk (0: off; files under it are synced once, at close); only with fsync
        self._sync_ahead_bytes = self._options.sync_ahead_bytes if self._options.fsync else 0
        self.writer_id = writer_id or uuid.uuid4().hex  #: a label for commit messages and logs
        self._file_id = uuid.uuid4().hex  # names files: unique even if a caller reuses writer_id
        self._partitions: dict[tuple[Any, ...], _PartitionState] = {}
        self._done: list[DataFile] = []
        self._counter = 0
        self._buffered_bytes = 0
        self._index_bytes = 0  # the open files' key index entries, held until each file closes
        self._closed = False
        self._manifest_name: str | None = None  #: the per-task manifest being written by prepare_commit
        self._begun: list[str] = []  #: every data file this writer began to write, finished or not
        self._syncer: ThreadPoolExecutor | None = None  # one thread, started by the first large file
        #: the bucket-key column whose values key index files hold (a key table with one integer-like bucket key)
        self._index_key = indexed_column(schema)
        #: the bucket-key columns whose key bytes hashed key index files hold (any other key table)
        self._hashed_keys = hashed_columns(schema)
        if _HASH in schema.arrow_schema.names:  # a table's own column of that name: hashes are not carried
            self._hashed_keys = None

    @staticmethod
    def check_schema(incoming: pa.Schema, table_schema: pa.Schema) -> None:
        """Raise :class:`SchemaMismatchError` (naming the columns) if data of schema ``incoming`` cannot be
        written to a table of ``table_schema``; lets an engine fail a job before any task runs."""
        conform(incoming.empty_table(), table_schema)

    # -- public -----------------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        """Buffer and write rows (Table, RecordBatch, RecordBatchReader or an iterable of them). On a key table
        with ``rowkind.field`` every row's kind is checked (:class:`InvalidRowKindError` before anything of the
        batch is buffered) and updates' old rows are left out (:mod:`lakefmt.spec.keys.rowkind`)."""
        if self._closed:
            raise WriterClosedError("this writer has already been committed or aborted")
        for table in as_tables(data):
            if table.num_rows == 0:
                conform(table, self._schema.arrow_schema)
                continue
            check_kind_column(table.column_names, self._options)  # before conform fills it with nulls
            table = drop_ignored(conform(table, self._schema.arrow_schema), self._options)  # rowkind.field
            if table.num_rows == 0:
                continue
            for values, part in self._split(table):
                self._buffer(values, part)
            while self._buffered_bytes > self._options.write_buffer_size:
                largest = max(self._partitions.values(), key=lambda p: p.buffered_bytes)
                self._flush(largest)
            # a key table's open files hold their rows' keys (and key bytes) for their key index files until they
            # close: bounded apart, by the same size, by closing the file that holds the most (its rows roll over
            # to a new file, as at the target file size)
            while self._index_bytes > self._options.write_buffer_size:
                fullest = max(
                    (p for p in self._partitions.values() if p.file is not None),
                    key=lambda p: p.file.index_bytes if p.file is not None else 0,
                    default=None,
                )
                if fullest is None:  # no open file: nothing is held
                    self._index_bytes = 0
                    break
                self._close_file(fullest)

    def prepare_commit(self) -> CommitMessage:
        """Close every file and write the per-task manifest; return its metadata (nothing is published). When
        that fails (an error or an interrupt), what the writer wrote is deleted (best effort) before the error
        propagates: no message names those files, so no one else would."""
        if self._closed:
            raise WriterClosedError("this writer has already been committed or aborted")
        try:
            return self._prepare()
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to report
                self.abort()
            raise

    def _prepare(self) -> CommitMessage:
        self.close_files()
        if not self._done:
            return CommitMessage(self.writer_id, ())
        schema = self._schema
        entries = ents.added_entries_for(self._done, schema)
        data = encode_manifest(entries, schema.format_version)
        name = layout.manifest_name(self._file_id, self._next())
        self._manifest_name = name  # deleted by abort() if what follows fails (the write may have landed)
        self._io.write(layout.manifest_path(name), data, sync=self._options.fsync)
        if self._on_manifest is not None:
            self._on_manifest(name, data)
        meta = manifest_meta(name, len(data), entries, self._schema.id)
        self._manifest_name = None  # written: the message names it from here on
        return CommitMessage(self.writer_id, (meta,))

    def close_files(self) -> list[DataFile]:
        """Close every file and return them all, without writing a manifest (for a caller that lists the files in
        entries of its own: a key table's merge engine, at commit time); the writer is closed."""
        if self._closed:
            raise WriterClosedError("this writer has already been committed or aborted")
        try:
            for state in self._partitions.values():
                self._flush(state)
                self._close_file(state)
        finally:
            self._stop_syncer()
        self._closed = True
        return list(self._done)

    def abort(self) -> None:
        """Close and delete everything this writer wrote (best effort; orphan-clean removes the rest)."""
        self._closed = True
        for state in self._partitions.values():
            if state.file is not None:
                try:
                    state.file.writer.close()
                    state.file.stream.close()
                    if state.file.pending_sync is not None:
                        state.file.pending_sync.result()
                except (OSError, pa.ArrowException):
                    pass
                self._io.delete(state.file.rel_path)
                state.file = None
        self._index_bytes = 0
        self._stop_syncer()
        gone = set()
        for f in self._done:
            self._io.delete(f.path)
            gone.add(f.path)
        self._done.clear()
        for rel in self._begun:  # a file whose open or close was cut short
            if rel not in gone:
                self._io.delete(rel)
        if self._manifest_name is not None:
            self._io.delete(layout.manifest_path(self._manifest_name))
            self._manifest_name = None

    @property
    def written_files(self) -> list[DataFile]:
        """Data files completed so far."""
        return list(self._done)

    @property
    def begun_paths(self) -> list[str]:
        """Every data file this writer began to write (the completed ones and any cut short), relative to the
        table root: what to delete when its commit is known not to land."""
        return list(self._begun)

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None and not self._closed:
            self.abort()

    # -- internals --------------------------------------------------------------------------------------
    def _next(self) -> int:
        self._counter += 1
        return self._counter - 1

    def _split(self, table: pa.Table) -> list[tuple[tuple[Any, ...], pa.Table]]:
        """The rows of ``table`` by partition (and, on a key table, by bucket: the last value of each key)."""
        keys = list(self._schema.partition_keys)
        bucketed = self._schema.has_primary_key
        if not keys and not bucketed:
            return [((), table)]
        key_table = table.select(keys)
        for k in keys:
            if pa.types.is_date(key_table.column(k).type):
                _check_partition_dates(k, key_table.column(k))
        if bucketed:
            if self._hashed_keys is not None:  # the key hashes the key index holds: computed once, carried along
                hashes = key_hash(table, self._hashed_keys)
                buckets = buckets_of_hashes(hashes, self._options.bucket)
                table = table.append_column(_HASH, pa.array(hashes, pa.uint64()))
            else:
                buckets = bucket_of(table, self._schema.bucket_keys, self._options.bucket)
            key_table = key_table.append_column(_BUCKET, pa.array(buckets, pa.int32()))
        names = key_table.column_names
        if all(pc.count_distinct(key_table.column(k), mode="all").as_py() == 1 for k in names):
            first = key_table.slice(0, 1).to_pylist()[0]
            return [(tuple(first[k] for k in names), table)]
        rows = key_table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
        groups = rows.group_by(names, use_threads=False).aggregate([("__row", "list")])
        out = []
        key_values = [groups.column(k).to_pylist() for k in names]
        indices = groups.column("__row_list")
        for g in range(groups.num_rows):
            out.append((tuple(v[g] for v in key_values), table.take(indices[g].values)))
        return out

    def _buffer(self, values: tuple[Any, ...], part: pa.Table) -> None:
        state = self._partitions.get(values)
        if state is None:
            keys = self._schema.partition_keys
            mapping = dict(zip(keys, values[: len(keys)], strict=True))
            folder = partition_path(keys, mapping)
            bucket = 0
            if self._schema.has_primary_key:
                bucket = int(values[len(keys)])
                folder = layout.bucket_folder(folder, bucket)
            state = _PartitionState(mapping, folder, bucket)
            self._partitions[values] = state
        size = part.nbytes
        state.buffered.append(part)
        state.buffered_rows += part.num_rows
        state.buffered_bytes += size
        self._buffered_bytes += size
        if state.buffered_rows >= self._options.row_group_rows or state.buffered_bytes >= self._options.row_group_size:
            self._flush(state)

    def _flush(self, state: _PartitionState) -> None:
        if not state.buffered:
            return
        table = pa.concat_tables(state.buffered) if len(state.buffered) > 1 else state.buffered[0]
        if self._schema.has_primary_key:  # key-sorted row groups: tight key ranges for lookups
            table = table.sort_by([(k, "ascending") for k in self._schema.primary_keys])
        self._buffered_bytes -= state.buffered_bytes
        state.buffered, state.buffered_rows, state.buffered_bytes = [], 0, 0
        hashes = None
        if self._hashed_keys is not None:  # the key hashes _split added, for the key index: not a column to write
            hashes = table.column(_HASH)
            table = table.drop_columns([_HASH])
        # One row group per slice of at most row-group-rows rows and about row-group-size bytes: a single large
        # write (one 10M-row table) must not become one huge row group, and files roll between row groups.
        step = self._options.row_group_rows
        if table.nbytes > self._options.row_group_size:
            step = min(step, max(1, table.num_rows * self._options.row_group_size // table.nbytes))
        for start in range(0, table.num_rows, step):
            group = table.slice(start, step)
            f = state.file or self._open_file(state, group)
            f.writer.write_table(group, row_group_size=max(group.num_rows, 1))
            f.stats.update(group)
            f.rows += group.num_rows
            held = 0
            if f.keys is not None:
                f.keys.append(key_values(group.column(self._index_key)))
                held = f.keys[-1].nbytes
            if f.hashed is not None and self._hashed_keys is not None and hashes is not None:
                group_hashes = hashes.slice(start, group.num_rows).to_numpy()
                f.hashed.append((group_hashes, key_bytes(group, self._hashed_keys)))
                held = group_hashes.nbytes + f.hashed[-1][1].nbytes
            f.index_bytes += held
            self._index_bytes += held
            written = f.stream.tell()
            if written >= self._options.target_file_size:
                self._close_file(state)
            elif self._sync_ahead_bytes and written - f.synced_bytes >= self._sync_ahead_bytes:
                self._sync_ahead(f, written)

    def _open_file(self, state: _PartitionState, first: pa.Table) -> _OpenFile:
        name = layout.data_file_name(self._file_id, self._next())
        rel = f"{state.folder}/{name}" if state.folder else name
        self._begun.append(rel)  # before the open: an open whose answer was lost may have created the file
        stream = self._io.open_output(rel)
        compression = None if self._options.compression == "none" else self._options.compression
        # version 2: the Parquet schema carries each field's id (PARQUET:field_id), so any reader can match by id
        file_schema = self._schema.id_schema if self._schema.format_version >= 2 else self._schema.arrow_schema
        # dictionary encoding only where the first rows say it pays (lakefmt.write.encoding)
        dictionary = dictionary_columns(file_schema, first)
        writer = pq.ParquetWriter(stream, file_schema, compression=compression, use_dictionary=dictionary)
        state.file = _OpenFile(rel, stream, writer, StatsCollector(self._schema.arrow_schema))
        if self._index_key is not None:
            state.file.keys = []
        elif self._hashed_keys is not None:
            state.file.hashed = []
        return state.file

    def _sync_ahead(self, f: _OpenFile, written: int) -> None:
        """Start a background sync of what ``f`` holds so far, unless one is still running."""
        if f.pending_sync is not None:
            if not f.pending_sync.done():
                return
            f.pending_sync.result()
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakefmt-sync")
        f.synced_bytes = written
        f.pending_sync = self._syncer.submit(self._io.sync, f.rel_path)

    def _stop_syncer(self) -> None:
        if self._syncer is not None:
            self._syncer.shutdown(wait=True)
            self._syncer = None

    def _close_file(self, state: _PartitionState) -> None:
        f = state.file
        if f is None:
            return
        state.file = None
        self._index_bytes -= f.index_bytes
        indexed = f.keys is not None or f.hashed is not None
        try:
            f.writer.close()
            footer = f.writer.writer.metadata  # the Parquet footer, with each row group's min/max
            size = f.stream.tell()
            f.stream.close()
            if f.pending_sync is not None:
                f.pending_sync.result()  # a failed background sync fails the file, as the final one would
            if self._options.fsync:
                self._io.sync(f.rel_path)
            if indexed:
                self._write_key_index(f)
        except BaseException:
            with contextlib.suppress(OSError):  # in neither state.file nor _done now: abort would miss it
                self._io.delete(f.rel_path)
                if indexed:
                    self._io.delete(layout.key_index_path(f.rel_path))
            raise
        self._done.append(
            DataFile(
                path=f.rel_path,
                file_size=size,
                row_count=f.rows,
                schema_id=self._schema.id,
                partition=state.values,
                stats=f.stats.result(footer),
                creation_time_ms=self._creation_time_ms or int(time.time() * 1000),
                bucket=state.bucket,
            )
        )

    def _write_key_index(self, f: _OpenFile) -> None:
        """Write the key index file of ``f`` (:mod:`lakefmt.spec.keys.index_file`), once the data file is complete."""
        if f.rows > _MAX_INDEXED_ROWS:
            return
        rel = layout.key_index_path(f.rel_path)
        self._begun.append(rel)
        if f.hashed is not None:
            hashes = np.concatenate([h for h, _ in f.hashed]) if f.hashed else np.zeros(0, np.uint64)
            keys = pa.concat_arrays([k for _, k in f.hashed]) if f.hashed else pa.array([], pa.large_binary())
            f.hashed = None
            self._io.write(rel, encode_hashed_index(hashes, keys, data_file=f.rel_path), sync=self._options.fsync)
            return
        assert f.keys is not None
        values = np.concatenate(f.keys) if f.keys else np.zeros(0, np.int64)
        f.keys = None
        self._io.write(rel, encode_key_index(values, data_file=f.rel_path), sync=self._options.fsync)


def _check_partition_dates(key: str, column: pa.ChunkedArray) -> None:
    """A date partition value names a folder (``dt=2026-11-01``): refuse one outside years 1..9999, which no date
    of Python's can hold (:class:`InvalidPartitionError`), before any file is written."""
    days = pc.min_max(column.cast(pa.int32()))
    lo, hi = days["min"].as_py(), days["max"].as_py()
    first, last = -719162, 2932896  # 0001-01-01 and 9999-12-31, in days since 1970-01-01
    if lo is not None and (lo < first or hi > last):
        raise InvalidPartitionError(
            f"partition key {key!r} holds dates outside years 1..9999 ({lo}..{hi} days since 1970-01-01), which "
            "cannot name a partition folder; nothing was written"
        )


def writer_schema(store: MetaStore, schema_id: int | None, target_file_size: int | None) -> TableSchema:
    """The schema a writer of the table writes under: the current one, or with ``schema_id`` that schema's columns
    (an engine checked its data against it on its driver) with the table's options of now; ``target_file_size``
    (bytes) overrides the option ``target-file-size``."""
    schema = store.latest_schema()
    if schema_id is not None and schema_id != schema.id:
        schema = dataclasses.replace(store.schema(schema_id), options=dict(schema.options))
    if target_file_size is not None:
        schema = dataclasses.replace(schema, options={**schema.options, "target-file-size": str(target_file_size)})
    return schema
