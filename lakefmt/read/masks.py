"""Deletion vectors on the read side: which rows of a data file are deleted, and the mask that drops them.

A snapshot of a format-version-3 table may hold, per partition and bucket, one live deletion-vector file (a Puffin
file; entries of content DELETION_VECTORS) with the vector of each of that bucket's data files that has deleted
rows. Every read masks a file's rows by their **absolute position in the file** before anything else: the mask is
applied to the whole file as read, and only then the filter and the projection, never a row-group split or a limit
below it (a row skipped before masking would shift every position after it).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.spec.deletion_vector import decode_framed_positions, puffin_blobs

__all__ = ["Vector", "apply_vector", "deleted_count", "deleted_positions", "keep_mask", "load_vectors", "vectors_of"]


@dataclass(frozen=True, slots=True)
class Vector:
    """Where the deletion vector of one data file is: its Puffin file (relative to the root), the blob's offset
    and length, and how many rows it deletes. Small and picklable: an engine's read task carries it."""

    file: str
    offset: int
    length: int
    cardinality: int


_CACHE_BYTES = 64 << 20
#: threads that filter masked files' rows at once (:func:`mask_whole`)
_FILTER_THREADS = min(4, os.cpu_count() or 1)
#: the fewest rows a thread of :func:`mask_whole` filters (below it, a thread costs more than it saves)
_SEGMENT_ROWS = 1 << 16
_cache: OrderedDict[str, bytes] = OrderedDict()  # immutable Puffin files, by full path
_cache_size = 0
_lock = threading.Lock()


def _read(io: FileIO, rel: str) -> bytes:
    """A deletion-vector file's bytes, from a small per-process cache (the files are immutable)."""
    global _cache_size
    key = io.full_path(rel)
    with _lock:
        data = _cache.get(key)
        if data is not None:
            _cache.move_to_end(key)
            return data
    data = io.read(rel)
    with _lock:
        if key not in _cache:
            _cache[key] = data
            _cache_size += len(data)
            while _cache_size > _CACHE_BYTES and len(_cache) > 1:
                _, old = _cache.popitem(last=False)
                _cache_size -= len(old)
    return data


def _homes(entries: pa.Table) -> list[tuple[str, object]]:
    """Each entry's partition values and bucket, comparable (the home of a data or deletion-vector file)."""
    n = entries.num_rows
    parts = entries.column(ents.PARTITION).to_pylist() if ents.PARTITION in entries.column_names else [None] * n
    buckets = entries.column(ents.BUCKET).to_pylist() if ents.BUCKET in entries.column_names else [None] * n
    return [(repr(sorted((p or {}).items())), b) for p, b in zip(parts, buckets, strict=True)]


def load_vectors(
    io: FileIO, vector_entries: pa.Table, only: Iterable[str] | None = None, *, data: pa.Table | None = None
) -> dict[str, Vector]:
    """The vectors the deletion-vector files of ``vector_entries`` hold, by data-file path (only those of ``only``
    when given, or of the data files ``data``, whose entries then also check that each vector is in the file of
    its data file's partition and bucket). Each file is read once (in parallel on object stores); a data file
    with two live vectors, or a partition and bucket with two live deletion-vector files, is corrupt metadata."""
    if vector_entries.num_rows == 0:
        return {}
    ents.check_data_paths(vector_entries, "a deletion-vector entry")
    files = ents.paths(vector_entries)
    homes = _homes(vector_entries)
    data_homes = None if data is None else dict(zip(ents.paths(data), _homes(data), strict=True))
    wanted = set(data_homes) if data_homes is not None else None if only is None else set(only)
    if data_homes is not None:  # the files of the data files' partitions and buckets: one each at most
        places = set(data_homes.values())
        mine = [i for i, h in enumerate(homes) if h in places]
        files, homes = [files[i] for i in mine], [homes[i] for i in mine]
        if len(set(homes)) != len(homes):
            twice = next(h for h in homes if homes.count(h) > 1)
            both = [f for f, h in zip(files, homes, strict=True) if h == twice]
            raise CorruptMetadataError(
                f"one partition and bucket has two live deletion-vector files ({', '.join(both)})"
            )
    if len(files) > 2 and io.protocol not in ("file", "memory"):
        with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
            contents = list(pool.map(lambda f: _read(io, f), files))
    else:
        contents = [_read(io, f) for f in files]
    out: dict[str, Vector] = {}
    for rel, home, content in zip(files, homes, contents, strict=True):
        for blob in puffin_blobs(content):
            path = blob.referenced_data_file
            if wanted is not None and path not in wanted:
                continue
            if path in out:
                raise CorruptMetadataError(f"data file {path} has two live deletion vectors ({out[path].file}, {rel})")
            if data_homes is not None and data_homes[path] != home:
                raise CorruptMetadataError(
                    f"deletion-vector file {rel} holds a vector of data file {path}, which is in another partition "
                    "or bucket"
                )
            out[path] = Vector(rel, blob.offset, blob.length, blob.cardinality)
    return out


def vectors_of(io: FileIO, entries: pa.Table, data_paths: Iterable[str] | None = None) -> dict[str, Vector]:
    """:func:`load_vectors` over the deletion-vector entries among ``entries`` (a snapshot's live entries)."""
    return load_vectors(io, ents.vector_files(entries), data_paths)


def deleted_positions(io: FileIO, vector: Vector) -> np.ndarray:
    """The sorted positions (int64) a vector deletes; its cardinality is checked against the file's."""
    data = _read(io, vector.file)
    if vector.offset < 0 or vector.offset + vector.length > len(data):
        raise CorruptMetadataError(f"deletion vector at {vector.offset} of {vector.file} is outside the file")
    positions = decode_framed_positions(data[vector.offset : vector.offset + vector.length])
    if len(positions) != vector.cardinality:
        raise CorruptMetadataError(
            f"deletion vector at {vector.offset} of {vector.file} holds {len(positions)} positions, its footer says "
            f"{vector.cardinality}"
        )
    return positions


def keep_mask(num_rows: int, positions: np.ndarray, what: str) -> pa.BooleanArray:
    """True for each of ``num_rows`` rows not in ``positions``; a position past the file's rows is corrupt."""
    if len(positions) and int(positions[-1]) >= num_rows:
        raise CorruptMetadataError(
            f"the deletion vector of {what} deletes row {int(positions[-1])}, but the file holds {num_rows} rows"
        )
    keep = np.ones(num_rows, dtype=bool)
    keep[positions] = False
    return pa.array(keep)


def apply_vector(io: FileIO, table: pa.Table, vector: Vector | None, what: str) -> pa.Table:
    """The rows of ``table`` (every row of one data file, in file order) that ``vector`` leaves live."""
    if vector is None:
        return table
    return table.filter(keep_mask(table.num_rows, deleted_positions(io, vector), what))


def deleted_count(io: FileIO, vectors: Mapping[str, Vector], paths: Iterable[str], rows: Iterable[int]) -> int:
    """How many rows the vectors of ``paths`` (data files of ``rows`` rows each) delete. Each vector is decoded
    and checked (its cardinality, no position past its file's rows), so that a count never differs from what a
    read returns; the deletion-vector files are small, and read already for their footers."""
    total = 0
    for path, num_rows in zip(paths, rows, strict=True):
        vector = vectors.get(path)
        if vector is not None:
            positions = deleted_positions(io, vector)
            if len(positions) and int(positions[-1]) >= num_rows:
                raise CorruptMetadataError(
                    f"the deletion vector of {path} deletes row {int(positions[-1])}, but the file holds "
                    f"{num_rows} rows"
                )
            total += len(positions)
    return total


def mask_whole(io: FileIO, table: pa.Table, entries: pa.Table, vectors: Mapping[str, Vector], what: str) -> pa.Table:
    """The live rows of ``table``: every row of the files of ``entries``, in their order, each file's rows at its
    offset (from the entries' row counts, which must add up to the table's rows: :class:`CorruptMetadataError`
    naming ``what`` otherwise), masked by the files' ``vectors``.

    Only the rows of files with a vector are copied: consecutive such files are filtered together, in a few
    segments of similar size filtered by a few threads at once (Arrow's filter releases the GIL), and the rows of
    the other files are kept as slices of ``table``."""
    counts = np.asarray(entries.column(ents.ROW_COUNT).to_numpy(zero_copy_only=False), dtype=np.int64)
    total = int(counts.sum())
    if table.num_rows != total:
        raise CorruptMetadataError(f"{what} hold {table.num_rows} rows, their manifest entries say {total}")
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    paths = ents.paths(entries)
    masked_rows = sum(c for p, c in zip(paths, counts.tolist(), strict=True) if p in vectors)
    if not masked_rows:
        return table
    target = max(_SEGMENT_ROWS, -(-masked_rows // _FILTER_THREADS))
    # (start, rows, files with a vector: (path, offset in the segment, rows)) or (start, rows, None): kept as is
    segments: list[tuple[int, int, list[tuple[str, int, int]] | None]] = []
    for path, offset, count in zip(paths, offsets.tolist(), counts.tolist(), strict=True):
        vector = path in vectors
        last = segments[-1] if segments else None
        if last is not None and (last[2] is None) == (not vector) and (not vector or last[1] < target):
            start, rows, files = last
            if files is not None:
                files.append((path, rows, count))
            segments[-1] = (start, rows + count, files)
        else:
            segments.append((offset, count, [(path, 0, count)] if vector else None))

    def part(segment: tuple[int, int, list[tuple[str, int, int]] | None]) -> pa.Table:
        start, rows, files = segment
        piece = table.slice(start, rows)
        if files is None:
            return piece
        keep = np.ones(rows, dtype=bool)
        for path, at, count in files:
            positions = deleted_positions(io, vectors[path])
            if len(positions) and int(positions[-1]) >= count:
                raise CorruptMetadataError(
                    f"the deletion vector of {path} deletes row {int(positions[-1])}, but the file holds {count} rows"
                )
            keep[at + positions] = False
        return piece.filter(pa.array(keep))

    if sum(files is not None for _, _, files in segments) > 1 and _FILTER_THREADS > 1:
        with ThreadPoolExecutor(max_workers=_FILTER_THREADS) as pool:
            parts = list(pool.map(part, segments))
    else:
        parts = [part(segment) for segment in segments]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
