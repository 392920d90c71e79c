"""Primary keys: which columns may be one, and the stable hash that puts each key in its bucket.

A key table's rows go to bucket ``key_hash(row) mod bucket``, computed over the bucket-key columns (the primary key
without the partition keys: rows of one partition that share a key share a bucket). The hash is part of the format
(docs/format.md, "Buckets"), so that every writer, in any language, puts a key in the same bucket:

* a column's 64-bit value ``v``: the integer itself for integer, boolean (0 or 1), date, time and timestamp
  columns (the stored integer, in the column's own unit), taken as an unsigned 64-bit number; for string and binary
  columns ``len + sum(byte[i] * P ** (len - 1 - i))`` over the UTF-8 or raw bytes, modulo 2**64, with
  ``P = 0x100000001B3``;
* a row's hash: ``h = 0``, then for each bucket-key column in order ``h = mix(h * P + mix(v))``, modulo 2**64,
  where ``mix`` is SplitMix64's finaliser: ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
  z *= 0x94D049BB133111EB; z ^= z >> 31``;
* the bucket: ``h mod bucket``.

Pure and vectorised (numpy over Arrow buffers): hashing a million keys takes milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import UnsupportedTypeError
from lakefmt.spec.types import type_family

__all__ = [
    "KEY_TYPES",
    "bucket_of",
    "buckets_of_hashes",
    "hash_of_key_bytes",
    "is_key_type",
    "key_bytes",
    "key_hash",
    "stored_integers",
]

#: the types a primary-key column may have (in words, for messages)
KEY_TYPES = "integer, boolean, string, binary, date, time or timestamp"

_P = np.uint64(0x100000001B3)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def is_key_type(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` may be part of a primary key (floating point, decimal and nested types may
    not: they have no one exact byte form to hash and compare)."""
    return type_family(t) in ("integer", "boolean", "string", "binary", "date", "time", "timestamp")


def _mix(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = z ^ (z >> np.uint64(30))
        z = z * _M1
        z = z ^ (z >> np.uint64(27))
        z = z * _M2
        out: np.ndarray = z ^ (z >> np.uint64(31))
        return out


def stored_integers(array: pa.Array) -> np.ndarray:
    """The integers an integer-like column stores, in its own width and signedness: dates, times and timestamps in
    their own unit, booleans as 0 and 1."""
    t = array.type
    if pa.types.is_boolean(t):
        array = pc.cast(array, pa.uint8())
    elif pa.types.is_date32(t) or pa.types.is_time32(t):
        array = array.view(pa.int32())
    elif pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t):
        array = array.view(pa.int64())
    values: np.ndarray = array.to_numpy(zero_copy_only=False)
    return values


def _int_values(array: pa.Array) -> np.ndarray:
    values = stored_integers(array)
    if values.dtype.kind == "u":
        return values.astype(np.uint64)
    out: np.ndarray = values.astype(np.int64).view(np.uint64)
    return out


def _bytes_values(array: pa.Array) -> np.ndarray:
    n = len(array)
    if n == 0:
        return np.zeros(0, np.uint64)
    wide = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[array.offset : array.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    total = int(offsets[-1] - offsets[0])
    out = lengths.astype(np.uint64)
    if total == 0:
        return out
    longest = int(lengths.max())
    with np.errstate(over="ignore"):
        # P ** i modulo 2**64 (numpy's uint64 products wrap): one vectorised pass, not a Python loop per byte
        powers = np.ones(longest, np.uint64)
        if longest > 1:
            powers[1:] = np.cumprod(np.full(longest - 1, _P, np.uint64), dtype=np.uint64)
        owner = np.repeat(np.arange(n), lengths)
        index = np.arange(offsets[0], offsets[-1])
        from_end = offsets[owner + 1] - 1 - index
        weighted = data[index].astype(np.uint64) * powers[from_end]
        sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(weighted, dtype=np.uint64)])
        start = offsets[:-1] - offsets[0]
        hashed: np.ndarray = out + (sums[start + lengths] - sums[start])
        return hashed


def _column_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        if chunk.null_count:
            raise ValueError("a primary-key column holds a null")
        t = chunk.type
        if _is_bytes(t):
            parts.append(_bytes_values(chunk))
        elif is_key_type(t):
            parts.append(_int_values(chunk))
        else:
            raise UnsupportedTypeError(f"a primary-key column cannot have type {t}; key columns are {KEY_TYPES}")
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def key_hash(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """The format's 64-bit hash (uint64) of each row's values in ``columns`` (see the module's description)."""
    h = np.zeros(table.num_rows, np.uint64)
    with np.errstate(over="ignore"):
        for name in columns:
            h = _mix(h * _P + _mix(_column_values(table.column(name))))
    return h


def _is_bytes(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
    )


def _fixed(values: np.ndarray, width: int) -> pa.Array:
    """``values`` (little-endian numpy items of ``width`` bytes) as a large binary array of their bytes."""
    data = pa.py_buffer(np.ascontiguousarray(values).tobytes())
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(values), [None, data]).cast(pa.large_binary())


def key_bytes(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Each row's key in ``columns`` as bytes (a ``large_binary`` array), equal exactly when the keys are equal: per
    column in order, an integer-like value as its stored integer in 8 little-endian bytes (two's complement;
    ``uint64`` as is; a boolean as 0 or 1), a string or binary value as its byte length (``u32``, little-endian)
    then its UTF-8 or raw bytes. The key index files of keys that are not one integer-like column store these bytes
    (docs/format.md, "Key index files")."""
    parts: list[pa.Array] = []
    for name in columns:
        column = table.column(name).combine_chunks()
        if column.null_count:
            raise ValueError("a primary-key column holds a null")
        t = column.type
        if _is_bytes(t):
            lengths = pc.binary_length(column).to_numpy(zero_copy_only=False)
            if len(lengths) and int(lengths.max()) > 0xFFFFFFFF:
                raise ValueError(f"a value of key column {name!r} is longer than 4 GiB")
            parts += [_fixed(lengths.astype("<u4"), 4), column.cast(pa.large_binary())]
        elif is_key_type(t):
            values = stored_integers(column)
            parts.append(_fixed(values.astype("<u8" if values.dtype.kind == "u" else "<i8"), 8))
        else:
            raise UnsupportedTypeError(f"a primary-key column cannot have type {t}; key columns are {KEY_TYPES}")
    if not parts:
        return pa.array([b""] * table.num_rows, pa.large_binary())
    if len(parts) == 1:
        return parts[0]
    joined: pa.Array = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()))
    return joined


def _parse_key(key: bytes, kinds: Sequence[bool]) -> list[bytes | int] | None:
    """The column values of one key's bytes (:func:`key_bytes`; ``kinds``: per column, whether it is a string or
    binary column): a string's or binary's bytes, an integer-like value's 64 bits as an unsigned integer (the
    value :func:`key_hash` takes for it). None when the bytes do not have that layout."""
    values: list[bytes | int] = []
    at = 0
    for is_bytes in kinds:
        if is_bytes:
            if at + 4 > len(key):
                return None
            size = int.from_bytes(key[at : at + 4], "little")
            at += 4
            if at + size > len(key):
                return None
            values.append(key[at : at + size])
            at += size
        else:
            if at + 8 > len(key):
                return None
            values.append(int.from_bytes(key[at : at + 8], "little"))
            at += 8
    return values if at == len(key) else None


def hash_of_key_bytes(keys: pa.Array, types: Sequence[pa.DataType]) -> tuple[np.ndarray, np.ndarray]:
    """The :func:`key_hash` (uint64) of each key given by its :func:`key_bytes` (``types``: the bucket-key columns'
    types, in order), and whether each key's bytes have the layout those types give (the hash of one that does
    not is 0). What a hashed key index stores for a key can so be checked against the hash it is filed under: equal
    means two keys that share a hash, not damage. One key at a time: for the few keys a lookup compares."""
    kinds = [_is_bytes(t) for t in types]
    columns: list[list[bytes | int]] = [[] for _ in kinds]
    ok = np.ones(len(keys), dtype=bool)
    for i, key in enumerate(keys.to_pylist()):
        values = _parse_key(key, kinds)
        if values is None:
            ok[i] = False
            values = [b"" if is_bytes else 0 for is_bytes in kinds]
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    if not kinds:
        return np.zeros(len(keys), np.uint64), ok
    names = [f"c{j}" for j in range(len(kinds))]
    arrays = [pa.array(c, pa.large_binary() if b else pa.uint64()) for c, b in zip(columns, kinds, strict=True)]
    hashes = key_hash(pa.table(dict(zip(names, arrays, strict=True))), names)
    return np.where(ok, hashes, np.uint64(0)), ok


def bucket_of(table: pa.Table, columns: Sequence[str], buckets: int) -> np.ndarray:
    """The bucket (int32, ``0 .. buckets - 1``) of each row: its :func:`key_hash` modulo ``buckets``. With no
    bucket-key columns (a key made of partition keys alone), every row is in bucket 0."""
    if buckets < 1:
        raise ValueError(f"a table has at least one bucket, got {buckets}")
    if not columns or buckets == 1:
        return np.zeros(table.num_rows, np.int32)
    return buckets_of_hashes(key_hash(table, columns), buckets)


def buckets_of_hashes(hashes: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket (int32) of each :func:`key_hash` in ``hashes`` (uint64): the hash modulo ``buckets``."""
    if buckets < 1:
        raise ValueError(f"a table has at least one bucket, got {buckets}")
    if buckets == 1:
        return np.zeros(len(hashes), np.int32)
    return (np.asarray(hashes, np.uint64) % np.uint64(buckets)).astype(np.int32)
