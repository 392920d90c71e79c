"""Key index files: a key table's data file's keys, sorted, stored beside it for lookups by binary search.

An upsert must find the live rows of its keys. Reading a file's key column costs the whole file's keys; its key
index costs the pages a binary search touches (mapped from local disk, or fetched by byte range from object
storage), so a cold writer's lookup of ``k`` keys costs about ``k`` pages, however large the table.

A key index exists only for a data file of a key table whose bucket key (the primary key without the partition
keys) is one integer-like column: integers up to 64 bits (not ``uint64``), dates, times and timestamps, by their
stored integer. It is optional: a reader that finds none, or one whose header does not match its data file, reads
the file's key column instead. Layout (all little-endian), named after its data file
(:func:`lakefmt.spec.layout.key_index_path`)::

    header     32 bytes: magic b"LKIX", u16 version (1), u16 flags, u32 page_rows, u32 crc32 of the directory,
               i64 base, u64 count (the data file's rows)
    directory  i64[ceil(count / page_rows)]: the first key of each page of the key array
    keys       count values, ascending: key - base as u32 (flag WIDE unset) or i64 (WIDE set)
    positions  u32[count] (flag POSITIONS): each key's row in the data file; absent when the file's rows are in
               key order already (a key's position is then its index)

Keys are in ascending order, equal keys by position. ``base`` is the smallest key (0 with WIDE).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakefmt.spec.keys import stored_integers
from lakefmt.spec.schema import TableSchema

__all__ = [
    "HEADER_SIZE",
    "PAGE_ROWS",
    "IndexHeader",
    "encode_key_index",
    "indexable_type",
    "indexed_column",
    "key_values",
    "parse_header",
]

MAGIC = b"LKIX"
VERSION = 1
HEADER_SIZE = 32
PAGE_ROWS = 1024  #: keys per page of the directory (4 KiB of narrow keys)
FLAG_POSITIONS = 1
FLAG_WIDE = 2
FLAG_RUN = 4
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
    column of an :func:`indexable_type`; None when its files have no key index."""
    keys = schema.bucket_keys if schema.has_primary_key else ()
    if len(keys) != 1 or not indexable_type(schema.arrow_schema.field(keys[0]).type):
        return None
    return keys[0]


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
    def size(self) -> int:
        """The file's size in bytes."""
        return self.positions_offset + (4 * self.count if self.has_positions else 0)


def parse_header(data: bytes | memoryview) -> IndexHeader | None:
    """The header at the start of ``data``, or None when it is not a key index of this version (too short, another
    magic or version, unknown flags, a page size of 0)."""
    if len(data) < HEADER_SIZE:
        return None
    magic, version, flags, page_rows, crc, base, count = _HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or flags & ~(FLAG_POSITIONS | FLAG_WIDE | FLAG_RUN) or page_rows <= 0:
        return None
    if flags & FLAG_RUN and flags != FLAG_RUN:  # a run has no key array to widen and no positions
        return None
    return IndexHeader(flags, page_rows, crc, base, count)


def directory_ok(header: IndexHeader, directory: bytes | memoryview) -> bool:
    """Whether ``directory`` (the bytes after the header) matches the header's CRC."""
    return len(directory) == 8 * header.pages and zlib.crc32(directory) == header.directory_crc


def encode_key_index(keys: np.ndarray) -> bytes:
    """The key index of a data file whose rows hold ``keys`` (int64, in file order)."""
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
        return _HEADER.pack(MAGIC, VERSION, FLAG_RUN, PAGE_ROWS, zlib.crc32(b""), base, count)
    if count and int(keys[-1]) - base <= _U32_MAX:
        stored = (keys - base).astype("<u4")  # no overflow: the span fits
    else:
        stored, base = keys.astype("<i8"), 0
        flags |= FLAG_WIDE
    directory = np.ascontiguousarray(keys[::PAGE_ROWS], dtype="<i8").tobytes()
    header = _HEADER.pack(MAGIC, VERSION, flags, PAGE_ROWS, zlib.crc32(directory), base, count)
    parts = [header, directory, stored.tobytes()]
    if positions is not None:
        parts.append(positions.tobytes())
    return b"".join(parts)
