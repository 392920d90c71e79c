"""Key index files: a key table's data file's keys, sorted, stored beside it for lookups by binary search.

An upsert must find the live rows of its keys. Reading a file's key column costs the whole file's keys; its key
index costs the pages a binary search touches (mapped from local disk, or fetched by byte range from object
storage), so a cold writer's lookup of ``k`` keys costs about ``k`` pages, however large the table.

A data file of a key table gets one whose bucket key (the primary key without the partition keys) is one
integer-like column: integers up to 64 bits (not ``uint64``), dates, times and timestamps, by their stored integer.
A file of any other bucket key (strings, binaries, booleans, ``uint64``, several columns) gets a *hashed* key index
(flag HASHED): its "keys" are the rows' 64-bit key hashes (:func:`.hashing.key_hash`, as int64), and the
rows' key bytes (:func:`lakefmt.spec.keys.hashing.key_bytes`) follow, in the same order, so that a lookup checks every
equal hash on the key itself. An index is optional: a reader that finds none, or one whose header does not match
its data file, reads the file's key columns instead. Layout (all little-endian), named after its data file
(:func:`lakefmt.spec.layout.key_index_path`)::

    header     32 bytes: magic b"LKIX", u16 version (2), u16 flags, u32 page_rows, u32 crc32 of the data file's
               name then the directory, i64 base, u64 count (the data file's rows)
    directory  i64[ceil(count / page_rows)]: the first key of each page of the key array
    keys       count values, ascending: key - base as u32 (flag WIDE unset) or i64 (WIDE set)
    positions  u32[count] (flag POSITIONS): each key's row in the data file; absent when the file's rows are in
               key order already (a key's row is then its index)
    offsets    u64[count + 1] (flag HASHED): where each key's bytes start in the key bytes (the last: their length)
    key bytes  (flag HASHED) the keys' bytes, in the order of the keys

Keys are in ascending order, equal keys by position. ``base`` is the smallest key (0 with WIDE); with HASHED (which
comes with WIDE) it is the length of the key bytes. The CRC covers the data file's name (the last part of its path)
before the directory, so that an index beside another data file (copied, or left from an earlier file) is no index.
Version 1 (written before) had the directory's CRC alone: it is no index either.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakefmt.spec.keys.hashing import stored_integers
from lakefmt.spec.schema import TableSchema

__all__ = [
    "HEADER_SIZE",
    "PAGE_ROWS",
    "IndexHeader",
    "encode_hashed_index",
    "encode_key_index",
    "hashed_columns",
    "indexable_type",
    "indexed_column",
    "key_values",
    "parse_header",
]

MAGIC = b"LKIX"
VERSION = 2
HEADER_SIZE = 32
PAGE_ROWS = 1024  #: keys per page of the directory (4 KiB of narrow keys)
FLAG_POSITIONS = 1
FLAG_WIDE = 2
FLAG_RUN = 4
FLAG_HASHED = 8
_HEADER = struct.Struct("<4sHHIIqQ")
_U32_MAX = (1 << 32) - 1


def indexable_type(t: pa.DataType) -> bool:
    """Whether a one-column bucket key of type ``t`` gets key index files: integer-like, as an int64."""
    return bool(
        (pa.types.is_integer(t) and not pa.types.is_uint64(t))
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
    )


def indexed_column(schema: TableSchema) -> str | None:
    """The column whose values a table's data files' key indexes hold: the bucket key of a key table when it is one
    column of an :func:`indexable_type`; None when its files have a hashed key index or none."""
    keys = schema.bucket_keys if schema.has_primary_key else ()
    if len(keys) != 1 or not indexable_type(schema.arrow_schema.field(keys[0]).type):
        return None
    return keys[0]


def hashed_columns(schema: TableSchema) -> tuple[str, ...] | None:
    """The columns whose key bytes a table's data files' hashed key indexes hold: the bucket key of a key table that
    has no :func:`indexed_column` (and at least one bucket-key column); None otherwise."""
    keys = schema.bucket_keys if schema.has_primary_key else ()
    if not keys or indexed_column(schema) is not None:
        return None
    return tuple(keys)


def key_values(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The stored integers of a key column of an :func:`indexable_type`, as int64 (nulls are not allowed in keys)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(stored_integers(column), dtype=np.int64)


@dataclass(frozen=True)
class IndexHeader:
    """A key index's header, checked against the data file it belongs to."""

    flags: int
    page_rows: int
    directory_crc: int
    base: int
    count: int

    @property
    def wide(self) -> bool:
        return bool(self.flags & FLAG_WIDE)

    @property
    def has_positions(self) -> bool:
        return bool(self.flags & FLAG_POSITIONS)

    @property
    def run(self) -> bool:
        """Whether the file's keys are ``base, base + 1, ...`` in file order (the header is the whole index)."""
        return bool(self.flags & FLAG_RUN)

    @property
    def hashed(self) -> bool:
        """Whether the keys are key hashes, followed by the keys' bytes (offsets and data)."""
        return bool(self.flags & FLAG_HASHED)

    @property
    def pages(self) -> int:
        return 0 if self.run else -(-self.count // self.page_rows)

    @property
    def key_width(self) -> int:
        return 8 if self.wide else 4

    @property
    def keys_offset(self) -> int:
        return HEADER_SIZE + 8 * self.pages

    @property
    def positions_offset(self) -> int:
        return self.keys_offset + (0 if self.run else self.key_width * self.count)

    @property
    def offsets_offset(self) -> int:
        """Where the key bytes' offsets start (HASHED)."""
        return self.positions_offset + (4 * self.count if self.has_positions else 0)

    @property
    def bytes_offset(self) -> int:
        """Where the key bytes start (HASHED)."""
        return self.offsets_offset + 8 * (self.count + 1)

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self.bytes_offset + self.base if self.hashed else self.offsets_offset


def parse_header(data: bytes | memoryview) -> IndexHeader | None:
    """The header at the start of ``data``, or None when it is not a key index of this version (too short, another
    magic or version, unknown flags, a page size of 0)."""
    if len(data) < HEADER_SIZE:
        return None
    magic, version, flags, page_rows, crc, base, count = _HEADER.unpack_from(data, 0)
    known = FLAG_POSITIONS | FLAG_WIDE | FLAG_RUN | FLAG_HASHED
    if magic != MAGIC or version != VERSION or flags & ~known or page_rows <= 0:
        return None
    if flags & FLAG_HASHED and (not flags & FLAG_WIDE or base < 0):  # hashes are i64; base: the bytes' length
        return None
    if flags & FLAG_RUN and flags != FLAG_RUN:  # a run has no key array to widen and no positions
        return None
    return IndexHeader(flags, page_rows, crc, base, count)


def _crc(data_file: str, directory: bytes | memoryview) -> int:
    """The header's CRC: of the data file's name (the last part of ``data_file``, UTF-8) then the directory."""
    return zlib.crc32(directory, zlib.crc32(data_file.rsplit("/", 1)[-1].encode()))


def directory_ok(header: IndexHeader, directory: bytes | memoryview, data_file: str) -> bool:
    """Whether ``directory`` (the bytes after the header) and the name of ``data_file`` (the data file the index
    is read for) match the header's CRC."""
    return len(directory) == 8 * header.pages and _crc(data_file, directory) == header.directory_crc


def encode_key_index(keys: np.ndarray, *, data_file: str) -> bytes:
    """The key index of the data file ``data_file`` (its path or name), whose rows hold ``keys`` (int64, in file
    order)."""
    keys = np.asarray(keys, dtype=np.int64)
    count = len(keys)
    flags = 0
    if count > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        positions: np.ndarray | None = order.astype("<u4")
        flags |= FLAG_POSITIONS
    else:
        positions = None
    base = int(keys[0]) if count else 0
    if positions is None and count and int(keys[-1]) - base == count - 1 and bool(np.all(np.diff(keys) == 1)):
        # base, base + 1, ...: a key's row is key - base, and the header says it all
        return _HEADER.pack(MAGIC, VERSION, FLAG_RUN, PAGE_ROWS, _crc(data_file, b""), base, count)
    if count and int(keys[-1]) - base <= _U32_MAX:
        stored = (keys - base).astype("<u4")  # no overflow: the span fits
    else:
        stored, base = keys.astype("<i8"), 0
        flags |= FLAG_WIDE
    directory = np.ascontiguousarray(keys[::PAGE_ROWS], dtype="<i8").tobytes()
    header = _HEADER.pack(MAGIC, VERSION, flags, PAGE_ROWS, _crc(data_file, directory), base, count)
    parts = [header, directory, stored.tobytes()]
    if positions is not None:
        parts.append(positions.tobytes())
    return b"".join(parts)


def encode_hashed_index(hashes: np.ndarray, keys: pa.Array, *, data_file: str) -> bytes:
    """The hashed key index of the data file ``data_file`` (its path or name), whose rows have the key hashes
    ``hashes`` (uint64, in file order) and the key bytes ``keys`` (:func:`lakefmt.spec.keys.hashing.key_bytes`, in file
    order)."""
    signed = np.asarray(hashes, dtype=np.uint64).view(np.int64)
    count = len(signed)
    if len(keys) != count:
        raise ValueError(f"{count} hashes for {len(keys)} keys")
    order = np.argsort(signed, kind="stable")
    sorted_keys = keys.take(pa.array(order)) if count else keys
    sorted_keys = sorted_keys.cast(pa.large_binary())
    if sorted_keys.offset or count == 0:
        sorted_keys = pa.concat_arrays([sorted_keys, pa.array([], pa.large_binary())])
    raw_offsets = np.frombuffer(sorted_keys.buffers()[1], np.int64, count + 1) if count else np.zeros(1, np.int64)
    start = int(raw_offsets[0])
    offsets = (raw_offsets - start).astype("<u8")
    length = int(offsets[-1])
    data = sorted_keys.buffers()[2]
    key_data = b"" if data is None or length == 0 else data.slice(start, length).to_pybytes()
    stored = signed[order].astype("<i8")
    flags = FLAG_HASHED | FLAG_WIDE
    positions = None
    if count > 1 and not bool(np.all(order[1:] > order[:-1])):
        positions = order.astype("<u4")
        flags |= FLAG_POSITIONS
    directory = np.ascontiguousarray(stored[::PAGE_ROWS], dtype="<i8").tobytes()
    header = _HEADER.pack(MAGIC, VERSION, flags, PAGE_ROWS, _crc(data_file, directory), length, count)
    parts = [header, directory, stored.tobytes()]
    if positions is not None:
        parts.append(positions.tobytes())
    parts += [offsets.tobytes(), key_data]
    return b"".join(parts)
