"""A key table's buckets as the row-level planners see them: each entry's and each key's (partition, bucket), the
live entries of given buckets, the key columns of a data file, the positions to mark per file, and a bucket's
deletion-vector file. Shared by the upsert and delete planners (:mod:`.planners`), the merge engines'
planner (:mod:`lakefmt.rewrite.keys.engine_planner`) and MERGE's (:mod:`lakefmt.rewrite.merge.commit`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_entries
from lakefmt.spec import DataFile, Snapshot, TableSchema, layout
from lakefmt.spec.deletion_vector import encode_puffin
from lakefmt.spec.keys.hashing import bucket_of
from lakefmt.spec.manifest import FileContent
from lakefmt.spec.partition import partition_path

__all__ = [
    "FILE",
    "ORDER",
    "POS",
    "BucketKey",
    "Marks",
    "bucket_keys_of",
    "key_buckets",
    "live_in",
    "member",
    "read_columns",
    "sorted_unique",
    "state_of",
    "vector_file_path",
    "write_vector_file",
]

#: columns the planners add to key columns: a row's position in its file, its file, its order in a write
POS = "__lakefmt_pos"
FILE = "__lakefmt_file"
ORDER = "__lakefmt_order"

BucketKey = tuple[tuple[Any, ...], int]  # (partition values in key order, bucket)


# -- the key columns of data files ------------------------------------------------------------------------------
def read_columns(io: FileIO, store: MetaStore, entry: pa.Table, schema: TableSchema, columns: list[str]) -> pa.Table:
    """The ``columns`` of every row of one data file (``entry``: its one ADD entry), in file order, its row count
    checked against the entry."""
    path = ents.paths(entry)[0]
    batches = list(read_entries(io, entry, schema, columns=columns, schemas=store.schema))
    out_schema = pa.schema([schema.arrow_schema.field(c) for c in columns])
    table = pa.Table.from_batches(batches, schema=out_schema).combine_chunks()
    want = entry.column(ents.ROW_COUNT)[0].as_py()
    if table.num_rows != want:
        raise CorruptMetadataError(f"data file {path} does not hold the {want} rows its manifest entry says")
    return table


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``values`` sorted, each once (by sorting: numpy's hash-based unique is slow on large int arrays)."""
    out = np.sort(values)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_set`` (sorted ascending), by binary search."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    hit: np.ndarray = sorted_set[at] == values
    return hit


# -- buckets ----------------------------------------------------------------------------------------------------
def bucket_keys_of(entries: pa.Table, schema: TableSchema) -> list[BucketKey]:
    """Each entry's (partition values, bucket)."""
    n = entries.num_rows
    buckets = entries.column(ents.BUCKET).to_pylist() if ents.BUCKET in entries.column_names else [0] * n
    if schema.partition_keys and ents.PARTITION in entries.column_names:
        parts = [
            tuple((p or {}).get(k) for k in schema.partition_keys) for p in entries.column(ents.PARTITION).to_pylist()
        ]
    else:
        parts = [()] * n
    return list(zip(parts, buckets, strict=True))


def key_buckets(keys: pa.Table, schema: TableSchema) -> list[BucketKey]:
    """Each key's (partition values, bucket), from its columns (a key table's keys hold its partition keys)."""
    part = [tuple(v) for v in zip(*(keys.column(k).to_pylist() for k in schema.partition_keys), strict=True)]
    if not schema.partition_keys:
        part = [()] * keys.num_rows
    buckets = bucket_of(keys, schema.bucket_keys, schema.table_options.bucket).tolist()
    return list(zip(part, buckets, strict=True))


def live_in(store: MetaStore, latest: Snapshot | None, schema: TableSchema, wanted: set[BucketKey]) -> pa.Table:
    """The live entries (data and deletion vectors) of the partitions and buckets ``wanted``, in ``latest``."""
    if latest is None or not wanted:
        return ents.empty_entries_for(schema)
    live = ents.live_entries(store, latest)
    if live.num_rows == 0:
        return live
    mine = [bk in wanted for bk in bucket_keys_of(live, schema)]
    return live.filter(pa.array(mine, pa.bool_()))


def state_of(entries: pa.Table) -> frozenset[str]:
    """The state of some buckets that a plan depends on: the paths of their live entries (data and vectors)."""
    return frozenset(ents.paths(entries))


@dataclass
class Marks:
    """New positions to delete, by data-file path, within one bucket."""

    by_file: dict[str, list[np.ndarray]]

    def add(self, path: str, positions: np.ndarray) -> None:
        """Mark ``positions`` of the data file ``path`` (nothing when empty)."""
        if len(positions):
            self.by_file.setdefault(path, []).append(positions.astype(np.int64))


def vector_file_path(schema: TableSchema, partition: dict[str, Any], bucket: int, writer_id: str, k: int) -> str:
    """Where :func:`write_vector_file` writes a partition and bucket's ``k``-th deletion-vector file."""
    folder = partition_path(schema.partition_keys, partition)
    if schema.has_primary_key:
        folder = layout.bucket_folder(folder, bucket)
    name = layout.dv_file_name(writer_id, k)
    return f"{folder}/{name}" if folder else name


def write_vector_file(
    io: FileIO,
    schema: TableSchema,
    partition: dict[str, Any],
    bucket: int,
    blobs: Sequence[tuple[str, pa.Array]],
    writer_id: str,
    k: int,
) -> DataFile:
    """Write one partition and bucket's deletion-vector file (a Puffin file of ``blobs``: data path, positions) in
    its folder, and return its entry's metadata (rows: the positions it deletes)."""
    rel = vector_file_path(schema, partition, bucket, writer_id, k)
    data = encode_puffin(blobs)
    io.write(rel, data, sync=schema.table_options.fsync)
    return DataFile(
        path=rel,
        file_size=len(data),
        row_count=sum(len(v) for _, v in blobs),
        schema_id=schema.id,
        partition=partition,
        stats={},
        creation_time_ms=int(time.time() * 1000),
        bucket=bucket,
        content=FileContent.DELETION_VECTORS,
    )


