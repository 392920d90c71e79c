"""Deletion vectors on the read side: which rows of a data file are deleted, and the mask that drops them.

A snapshot of a format-version-3 table may hold, per partition and bucket, one live deletion-vector file (a Puffin
file; entries of content DELETION_VECTORS) with the vector of each of that bucket's data files that has deleted
rows. Every read masks a file's rows by their **absolute position in the file** before anything else: the mask is
applied to the whole file as read, and only then the filter and the projection, never a row-group split or a limit
below it (a row skipped before masking would shift every position after it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakefmt.cache import BoundedCache
from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec.deletion_vector import decode_framed_positions, puffin_blobs

__all__ = [
    "Home",
    "Vector",
    "apply_vector",
    "check_homes",
    "check_positions",
    "check_vectors",
    "deleted_count",
    "deleted_positions",
    "homes_of",
    "keep_bitmap",
    "keep_mask",
    "keep_rows",
    "latest_data",
    "load_vectors",
    "mask_whole",
    "vectors_of",
]


@dataclass(frozen=True, slots=True)
class Vector:
    """Where the deletion vector of one data file is: its Puffin file (relative to the root), the blob's offset
    and length, and how many rows it deletes; the data file it belongs to (its blob's ``referenced-data-file``) and
    that file's rows by its manifest entry, which every position it deletes must be below
    (:func:`deleted_positions` checks; None where the entry is not at hand, as in the change feed, whose readers
    check the positions against the file's own rows). Small and picklable: an engine's read task carries it."""

    file: str
    offset: int
    length: int
    cardinality: int
    data_file: str = ""
    rows: int | None = None


_CACHE_BYTES = 64 << 20
#: threads that filter masked rows at once (:func:`keep_rows`)
_FILTER_THREADS = min(4, os.cpu_count() or 1)
#: :func:`keep_rows` filters on one thread below twice this many copied rows (threads would cost more than they save)
_SEGMENT_ROWS = 1 << 16
_cache: BoundedCache[str, bytes] = BoundedCache(max_bytes=_CACHE_BYTES, sizeof=len)  # Puffin files, by full path


def _read(io: FileIO, rel: str) -> bytes:
    """A deletion-vector file's bytes, from a small per-process cache (the files are immutable)."""
    key = io.full_path(rel)
    data = _cache.get(key)
    if data is None:
        data = _cache.setdefault(key, io.read(rel))
    return data


#: a file's home: its partition values (comparable) and bucket
Home = tuple[str, object]


def homes_of(entries: pa.Table) -> list[Home]:
    """Each entry's partition values and bucket, comparable (the home of a data or deletion-vector file)."""
    n = entries.num_rows
    parts = entries.column(ents.PARTITION).to_pylist() if ents.PARTITION in entries.column_names else [None] * n
    buckets = entries.column(ents.BUCKET).to_pylist() if ents.BUCKET in entries.column_names else [None] * n
    return [(repr(sorted((p or {}).items())), b) for p, b in zip(parts, buckets, strict=True)]


def check_homes(vector_entries: pa.Table, vectors: Mapping[str, Vector], homes: Mapping[str, Home]) -> None:
    """Every vector of ``vectors`` (held by the deletion-vector files of ``vector_entries``) whose data file's home
    is known (``homes``: data-file path -> :func:`homes_of`) must be in the deletion-vector file of that home (format
    §22.3): :class:`CorruptMetadataError` naming the Puffin file and the data file otherwise. Every read, write and
    the change feed check here before they leave out the vectors they do not need, so a vector misplaced into
    another partition's file is refused wherever it is met, never applied by one path and dropped by another."""
    file_homes = dict(zip(ents.paths(vector_entries), homes_of(vector_entries), strict=True))
    for path, vector in vectors.items():
        home = homes.get(path)
        if home is not None and file_homes.get(vector.file, home) != home:
            raise CorruptMetadataError(
                f"deletion-vector file {vector.file} holds a vector of data file {path}, which is in another "
                "partition or bucket"
            )


def load_vectors(
    io: FileIO,
    vector_entries: pa.Table,
    only: Iterable[str] | None = None,
    *,
    data: pa.Table | None = None,
    live: Callable[[], pa.Table] | None = None,
) -> dict[str, Vector]:
    """The vectors the deletion-vector files of ``vector_entries`` hold, by data-file path (only those of ``only``
    when given, or of the data files ``data``, whose entries then also check that each vector is in the file of
    its data file's partition and bucket, and give each vector its data file's row count, against which
    :func:`deleted_positions` checks every position). A vector of a file that is not among ``data`` is left out:
    no read of those files applies it, and a write that rewrites a bucket's vectors drops it; but first, when
    ``live`` is given (the snapshot's live data entries, asked for only when such a vector is met), such a file
    must not be live in another partition or bucket (:func:`check_homes`: a write that read only its own
    partitions would otherwise drop a misplaced vector silently). Each file is read once (in parallel on object
    stores); a data file with two live vectors, or a partition and bucket with two live deletion-vector files, is
    corrupt metadata."""
    if vector_entries.num_rows == 0:
        return {}
    ents.check_data_paths(vector_entries, "a deletion-vector entry")
    files = ents.paths(vector_entries)
    homes = homes_of(vector_entries)
    data_homes = None if data is None else dict(zip(ents.paths(data), homes_of(data), strict=True))
    counts = None if data is None else data.column(ents.ROW_COUNT).to_pylist()
    data_rows = None if counts is None else dict(zip(ents.paths(data), counts, strict=True))
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
    every: dict[str, Vector] = {}  # each file's vectors, then checked against their data files' homes
    others: dict[str, Vector] = {}  # vectors of files not among ``data``
    for rel, content in zip(files, contents, strict=True):
        try:
            blobs = puffin_blobs(content)
        except CorruptMetadataError as exc:
            raise CorruptMetadataError(f"deletion-vector file {rel}: {exc}") from exc
        for blob in blobs:
            path = blob.referenced_data_file
            rows = None if data_rows is None else data_rows.get(path)
            vector = Vector(rel, blob.offset, blob.length, blob.cardinality, path, rows)
            if wanted is not None and path not in wanted:
                others[path] = vector
                continue
            if path in every:
                raise CorruptMetadataError(
                    f"data file {path} has two live deletion vectors ({every[path].file}, {rel})"
                )
            every[path] = vector
    if data_homes is not None:
        check_homes(vector_entries, every, data_homes)
        if others and live is not None:
            elsewhere = live()
            elsewhere = ents.data_files(elsewhere) if ents.CONTENT in elsewhere.column_names else elsewhere
            known = dict(zip(ents.paths(elsewhere), homes_of(elsewhere), strict=True))
            check_homes(vector_entries, others, {p: known[p] for p in others if p in known})
    return every


def latest_data(store: MetaStore) -> Callable[[], pa.Table]:
    """For :func:`load_vectors`'s ``live``: the live entries of the table's latest snapshot, read when called. A
    data file's partition and bucket never change (its path is never reused), so the entry of a file in any
    snapshot says where its vector belongs: a write planned on an older snapshot may check against the latest."""

    def read() -> pa.Table:
        latest = store.latest_snapshot()
        return (
            ents.live_entries(store, latest) if latest is not None else pa.table({ents.PATH: pa.array([], pa.string())})
        )

    return read


def vectors_of(io: FileIO, entries: pa.Table, data_paths: Iterable[str] | None = None) -> dict[str, Vector]:
    """:func:`load_vectors` over the deletion-vector entries among ``entries`` (a snapshot's live entries)."""
    return load_vectors(io, ents.vector_files(entries), data_paths)


def deleted_positions(io: FileIO, vector: Vector, rows: int | None = None) -> np.ndarray:
    """The sorted positions (int64) a vector deletes: its cardinality checked against its footer's, and every
    position against its data file's rows (:func:`check_positions`), both the manifest's (``vector.rows``) and
    ``rows`` (the rows the caller read of the file) when known. Every read and write decodes a vector here, so a
    position at or past its file's rows (which would delete nothing, or on a reader that numbers rows across
    files, a row of another file) is refused before anything is read or written by it."""
    data = _read(io, vector.file)
    if vector.offset < 0 or vector.offset + vector.length > len(data):
        raise CorruptMetadataError(f"deletion vector at {vector.offset} of {vector.file} is outside the file")
    try:
        positions = decode_framed_positions(data[vector.offset : vector.offset + vector.length])
    except CorruptMetadataError as exc:
        raise CorruptMetadataError(f"deletion vector at {vector.offset} of {vector.file}: {exc}") from exc
    if len(positions) != vector.cardinality:
        raise CorruptMetadataError(
            f"deletion vector at {vector.offset} of {vector.file} holds {len(positions)} positions, its footer says "
            f"{vector.cardinality}"
        )
    what = vector.data_file or f"the data file of the vector at {vector.offset}"
    for limit in (vector.rows, rows):
        if limit is not None:
            check_positions(positions, limit, what, source=vector.file)
    return positions


def check_positions(positions: np.ndarray, num_rows: int, what: str, *, source: str | None = None) -> None:
    """A vector's sorted ``positions`` must all be rows of its file (``num_rows``): :class:`CorruptMetadataError`
    naming ``what`` (the data file) and ``source`` (the vector's Puffin file, when known) otherwise."""
    if len(positions) and int(positions[-1]) >= num_rows:
        where = f" (in {source})" if source else ""
        raise CorruptMetadataError(
            f"the deletion vector of {what}{where} deletes row {int(positions[-1])}, but the file holds {num_rows} rows"
        )


def check_vectors(io: FileIO, vectors: Mapping[str, Vector], paths: Iterable[str]) -> None:
    """Decode and check the vector of each of the data files ``paths`` that has one (:func:`deleted_positions`)."""
    for path in paths:
        vector = vectors.get(path)
        if vector is not None:
            deleted_positions(io, vector)


def keep_bitmap(num_rows: int, positions: np.ndarray) -> pa.BooleanArray:
    """An Arrow mask of ``num_rows`` rows, False at ``positions`` (each below ``num_rows``, as a decoded vector's
    are once :func:`check_positions` passed): a bool per row packed into the mask's bitmap by numpy, five times
    faster than Arrow's conversion of the bools."""
    keep = np.ones(num_rows, dtype=bool)
    keep[positions] = False
    bits = np.packbits(keep, bitorder="little")  # the last byte's padding bits are clear
    return pa.BooleanArray.from_buffers(pa.bool_(), num_rows, [None, pa.py_buffer(bits)])


def keep_mask(num_rows: int, positions: np.ndarray, what: str) -> pa.BooleanArray:
    """True for each of ``num_rows`` rows not in ``positions`` (checked: :func:`check_positions`)."""
    check_positions(positions, num_rows, what)
    return keep_bitmap(num_rows, positions)


def apply_vector(io: FileIO, table: pa.Table, vector: Vector | None, what: str) -> pa.Table:
    """The rows of ``table`` (every row of data file ``what``, in file order) that ``vector`` leaves live: each
    position checked against the rows read (:func:`deleted_positions`), and the vector against the file it
    belongs to."""
    if vector is None:
        return table
    if vector.data_file and vector.data_file != what:
        raise CorruptMetadataError(
            f"the deletion vector of {vector.data_file} (in {vector.file}) was given for data file {what}"
        )
    return keep_rows(table, deleted_positions(io, vector, table.num_rows))


def deleted_count(io: FileIO, vectors: Mapping[str, Vector], paths: Iterable[str], rows: Iterable[int]) -> int:
    """How many rows the vectors of ``paths`` (data files of ``rows`` rows each) delete. Each vector is decoded
    and checked (its cardinality, no position past its file's rows), so that a count never differs from what a
    read returns; the deletion-vector files are small, and read already for their footers."""
    total = 0
    for path, num_rows in zip(paths, rows, strict=True):
        vector = vectors.get(path)
        if vector is not None:
            total += len(deleted_positions(io, vector, num_rows))
    return total


def mask_whole(io: FileIO, table: pa.Table, entries: pa.Table, vectors: Mapping[str, Vector], what: str) -> pa.Table:
    """The live rows of ``table``: every row of the files of ``entries``, in their order, each file's rows at its
    offset (from the entries' row counts, which must add up to the table's rows: :class:`CorruptMetadataError`
    naming ``what`` otherwise), masked by the files' ``vectors`` (:func:`keep_rows`)."""
    counts = np.asarray(entries.column(ents.ROW_COUNT).to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(counts) and int(counts.min()) < 0:
        raise CorruptMetadataError(f"a manifest entry of {what} gives a negative row count")
    total = int(counts.sum())
    if table.num_rows != total:
        raise CorruptMetadataError(f"{what} hold {table.num_rows} rows, their manifest entries say {total}")
    deleted: list[np.ndarray] = []  # each file's positions at its offset: sorted, as the files are in order
    offset = 0
    for path, count in zip(ents.paths(entries), counts.tolist(), strict=True):
        vector = vectors.get(path)
        if vector is not None:
            deleted.append(deleted_positions(io, vector, count) + offset)
        offset += count
    return keep_rows(table, np.concatenate(deleted)) if deleted else table


def _without_validity(chunk: pa.Array) -> pa.Array:
    """``chunk`` without its validity bitmap when it has one but no null (as a Parquet reader's arrays of nullable
    columns often do): the same values, zero-copy, which Arrow filters about twice as fast. Only flat types
    (fixed-width, strings, binaries), whose buffers are the bitmap then the values; any other chunk as it is."""
    t = chunk.type
    flat = pa.types.is_primitive(t) or pa.types.is_decimal(t) or pa.types.is_fixed_size_binary(t)
    flat = flat or pa.types.is_string(t) or pa.types.is_large_string(t)
    flat = flat or pa.types.is_binary(t) or pa.types.is_large_binary(t)
    if not flat or chunk.null_count or pa.types.is_null(t):
        return chunk
    buffers = chunk.buffers()
    if buffers[0] is None:
        return chunk
    return pa.Array.from_buffers(t, len(chunk), [None, *buffers[1:]], null_count=0, offset=chunk.offset)


def keep_rows(table: pa.Table, deleted: np.ndarray) -> pa.Table:
    """The rows of ``table`` but those at ``deleted`` (positions in the table: sorted, distinct), in order.

    Column by column and chunk by chunk, each chunk filtered by the slice of one mask over its rows: a chunk with
    no deleted row is kept as it is (no copy), and Arrow's filter of one array by a mask of its own length is its
    fast one (a table's or chunked array's filter whose mask is not cut like its chunks takes the rows by index,
    two to three times slower). The chunks are filtered by a few threads at once (Arrow's filter releases the
    GIL) when there are enough rows to pay for them."""
    n = table.num_rows
    deleted = np.asarray(deleted)
    if deleted.dtype.kind not in "iu":
        raise TypeError(f"keep_rows takes the positions of the deleted rows (integers), not {deleted.dtype} values")
    if len(deleted) and (int(deleted[0]) < 0 or int(deleted[-1]) >= n):
        raise ValueError(f"deleted positions {int(deleted[0])}..{int(deleted[-1])} for a table of {n} rows")
    if len(deleted) > 1 and not bool(np.all(deleted[1:] > deleted[:-1])):  # each chunk's count relies on it
        raise ValueError("deleted positions must be sorted and distinct")
    if table.num_columns == 0:
        return table.slice(0, n - len(deleted))
    whole: pa.BooleanArray | None = None  # the mask as one Arrow array, sliced (zero-copy) for each chunk
    masks: dict[tuple[int, int], pa.BooleanArray | bool] = {}  # by (first row, rows): shared by the columns
    jobs: list[tuple[int, pa.Array, pa.BooleanArray | bool]] = []  # (column, chunk, its mask)
    for c, column in enumerate(table.columns):
        start = 0
        for chunk in column.chunks:
            key = (start, len(chunk))
            mask = masks.get(key)
            if mask is None:  # True: every row kept, False: none, else the chunk's slice of the mask
                lo, hi = np.searchsorted(deleted, [start, start + len(chunk)])
                gone = int(hi - lo)
                if gone in (0, len(chunk)):
                    mask = gone == 0
                else:
                    whole = keep_bitmap(n, deleted) if whole is None else whole
                    mask = whole.slice(start, len(chunk))
                masks[key] = mask
            jobs.append((c, chunk, mask))
            start += len(chunk)
    results: list[pa.Array | None] = [None] * len(jobs)

    def run(group: list[int]) -> None:
        for i in group:
            _, chunk, mask = jobs[i]
            results[i] = chunk if mask is True else None if mask is False else _without_validity(chunk).filter(mask)

    copying = [i for i, (_, chunk, mask) in enumerate(jobs) if not isinstance(mask, bool)]
    copied = sum(len(jobs[i][1]) for i in copying)
    if _FILTER_THREADS > 1 and copied >= 2 * _SEGMENT_ROWS:
        # a few large tasks of similar size (the largest chunks first, each to the least loaded): one task per
        # thread, as a task per chunk spends more on handing tasks over than the filters take
        groups: list[list[int]] = [[] for _ in range(_FILTER_THREADS)]
        loads = [0] * _FILTER_THREADS
        for i in sorted(copying, key=lambda i: -len(jobs[i][1])):
            least = loads.index(min(loads))
            groups[least].append(i)
            loads[least] += len(jobs[i][1])
        chosen = set(copying)
        run([i for i in range(len(jobs)) if i not in chosen])
        with ThreadPoolExecutor(max_workers=_FILTER_THREADS) as pool:
            list(pool.map(run, groups))
    else:
        run(list(range(len(jobs))))
    columns: list[list[pa.Array]] = [[] for _ in range(table.num_columns)]
    for (c, _, _), result in zip(jobs, results, strict=True):
        if result is not None:
            columns[c].append(result)
    return pa.Table.from_arrays(
        [pa.chunked_array(parts, type=table.schema.field(c).type) for c, parts in enumerate(columns)],
        schema=table.schema,
    )
