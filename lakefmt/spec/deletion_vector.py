"""Deletion vectors: the row positions of one data file that are deleted, in the one encoding that Delta
(``deletion_vector_*.bin``), Iceberg v3 (the Puffin blob ``deletion-vector-v1``) and Paimon (``bitmap64``) readers
all decode. The encoding of key tables' and merge-on-read deletes' vectors (:mod:`lakefmt.read.masks` applies them).

The vector is the *portable 64-bit Roaring bitmap*: an 8-byte little-endian count of 32-bit keys, then for each key
in ascending order its 4-byte little-endian value and the portable 32-bit Roaring bitmap of the low 32 bits of the
positions under it (pyroaring writes and reads that format). A *framed* vector is::

    length (4 bytes, big-endian: of magic + vector)   magic (D1 D3 39 64)   vector
    CRC-32 of magic + vector (4 bytes, big-endian)

A minimal Puffin file holds framed vectors as blobs: ``PFA1``, the blobs, ``PFA1``, the footer's JSON, the JSON's
length (4 bytes, little-endian), 4 flag bytes (0: the footer is not compressed), ``PFA1``.

Pure: bytes in, bytes out; decoding checks every length, the magic and the CRC, and a vector that does not decode
exactly (a truncated bitmap, keys out of order, trailing bytes) is :class:`~lakefmt.errors.CorruptMetadataError`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError

__all__ = [
    "DV_MAGIC",
    "PUFFIN_BLOB_TYPE",
    "PUFFIN_MAGIC",
    "PuffinBlob",
    "decode_framed",
    "decode_framed_positions",
    "decode_positions",
    "decode_puffin",
    "decode_vector",
    "encode_framed",
    "encode_puffin",
    "encode_vector",
    "puffin_blobs",
]

#: the magic of a framed vector: Delta's 1681511377 in little-endian, Iceberg's bytes D1 D3 39 64
DV_MAGIC = bytes.fromhex("D1D33964")
PUFFIN_MAGIC = b"PFA1"
PUFFIN_BLOB_TYPE = "deletion-vector-v1"
#: the largest 32-bit key Java's readers take (Iceberg and Delta keep keys in a signed int)
MAX_KEY = 2**31 - 1


def _bitmap_module() -> object:
    try:
        import pyroaring
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ImportError(f"deletion vectors need pyroaring ({exc})") from exc
    return pyroaring


def _positions(positions: Iterable[int] | pa.Array) -> pa.Array:
    """``positions`` as sorted, distinct int64 positions, checked."""
    try:
        array = positions.cast(pa.int64()) if isinstance(positions, pa.Array) else pa.array(list(positions), pa.int64())
    except (OverflowError, pa.ArrowInvalid) as exc:
        raise ValueError(f"a row position is a whole number from 0 to 2**63 - 1 ({exc})") from None
    if array.null_count:
        raise ValueError("a deletion vector holds no null position")
    if len(array) and pc.min(array).as_py() < 0:
        raise ValueError("a row position is never negative")
    return pc.unique(array).sort() if len(array) else array


def encode_vector(positions: Iterable[int] | pa.Array) -> bytes:
    """The portable 64-bit Roaring bitmap of ``positions`` (row positions in one data file, any order, repeats
    allowed; each from 0 to ``2**63 - 1``, so that its key, the high half, is at most :data:`MAX_KEY`)."""
    roaring = _bitmap_module()
    unique = _positions(positions)
    keys = pc.shift_right(unique, 32) if len(unique) else unique
    out = [b""]
    groups = 0
    for key in pc.unique(keys).to_pylist():  # an int64 position's key is at most MAX_KEY
        low = pc.bit_wise_and(pc.filter(unique, pc.equal(keys, key)), 0xFFFFFFFF)
        bitmap = roaring.BitMap(low.cast(pa.uint32()).to_numpy())  # type: ignore[attr-defined]
        out.append(struct.pack("<I", key) + bitmap.serialize())
        groups += 1
    out[0] = struct.pack("<Q", groups)
    return b"".join(out)


def decode_vector(data: bytes) -> pa.Array:
    """The sorted row positions (int64) of a portable 64-bit Roaring bitmap."""
    return pa.array(decode_positions(data), pa.int64())


def decode_positions(data: bytes) -> np.ndarray:
    """:func:`decode_vector` as a NumPy int64 array (no Arrow conversion: the change feed decodes many vectors)."""
    roaring = _bitmap_module()
    if len(data) < 8:
        raise CorruptMetadataError(f"a deletion vector of {len(data)} bytes is truncated (no key count)")
    (count,) = struct.unpack_from("<Q", data, 0)
    at, last = 8, -1
    view = memoryview(data)
    parts: list[np.ndarray] = []
    for _ in range(count):
        if at + 4 > len(data):
            raise CorruptMetadataError("a deletion vector is truncated (a key is missing)")
        (key,) = struct.unpack_from("<I", data, at)
        if key <= last or key > MAX_KEY:
            raise CorruptMetadataError(f"a deletion vector's keys are out of order or too large (key {key})")
        at += 4
        try:
            bitmap = roaring.BitMap.deserialize(view[at:])  # type: ignore[attr-defined]
        except (ValueError, OverflowError, TypeError) as exc:
            raise CorruptMetadataError(f"a deletion vector's bitmap for key {key} does not decode: {exc}") from None
        at += len(bitmap.serialize())
        low = np.asarray(bitmap.to_array(), dtype=np.uint32).astype(np.int64)
        parts.append(low + (key << 32) if key else low)
        last = key
    if at != len(data):
        raise CorruptMetadataError(f"a deletion vector has {len(data) - at} bytes past its last bitmap")
    if not parts:
        return np.zeros(0, np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def encode_framed(positions: Iterable[int] | pa.Array) -> bytes:
    """``positions`` as a framed vector (length, magic, vector, CRC-32): a Delta deletion-vector file's content
    after its version byte, or an Iceberg ``deletion-vector-v1`` blob."""
    body = DV_MAGIC + encode_vector(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def decode_framed(data: bytes) -> pa.Array:
    """The positions of a framed vector, its length, magic and CRC checked."""
    return pa.array(decode_framed_positions(data), pa.int64())


def decode_framed_positions(data: bytes) -> np.ndarray:
    """:func:`decode_framed` as a NumPy int64 array."""
    if len(data) < 12:
        raise CorruptMetadataError(f"a framed deletion vector of {len(data)} bytes is truncated")
    (length,) = struct.unpack_from(">I", data, 0)
    if length + 8 != len(data):
        raise CorruptMetadataError(f"a framed deletion vector says {length} bytes and holds {len(data) - 8}")
    body = data[4 : 4 + length]
    if body[:4] != DV_MAGIC:
        raise CorruptMetadataError(f"a framed deletion vector has the magic {body[:4].hex()}, not {DV_MAGIC.hex()}")
    (crc,) = struct.unpack_from(">I", data, 4 + length)
    if zlib.crc32(body) != crc:
        raise CorruptMetadataError("a framed deletion vector fails its CRC-32 (corrupt)")
    return decode_positions(body[4:])


def encode_puffin(
    vectors: Sequence[tuple[str, Iterable[int] | pa.Array]], properties: Mapping[str, str] | None = None
) -> bytes:
    """A Puffin file of one ``deletion-vector-v1`` blob per ``(referenced data file, positions)``, each with the
    properties ``referenced-data-file`` and ``cardinality`` (Iceberg v3's deletion-vector file)."""
    blobs, metas, listed = [], [], []
    offset = len(PUFFIN_MAGIC)
    for path, positions in vectors:
        unique = _positions(positions)
        framed = encode_framed(unique)
        listed.append(PuffinBlob(path, offset, len(framed), len(unique)))
        metas.append(
            {
                "type": PUFFIN_BLOB_TYPE,
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": offset,
                "length": len(framed),
                "properties": {"referenced-data-file": path, "cardinality": str(len(unique))},
            }
        )
        blobs.append(framed)
        offset += len(framed)
    footer_properties = {**dict(properties or {}), BLOBS_CRC: str(_blobs_crc(listed))}
    footer = orjson.dumps({"blobs": metas, "properties": footer_properties})
    tail = PUFFIN_MAGIC + footer + struct.pack("<I", len(footer)) + bytes(4) + PUFFIN_MAGIC
    return PUFFIN_MAGIC + b"".join(blobs) + tail


@dataclass(frozen=True, slots=True)
class PuffinBlob:
    """Where one deletion vector sits in a Puffin file: the data file it belongs to, the framed vector's offset and
    length, and how many positions it deletes."""

    referenced_data_file: str
    offset: int
    length: int
    cardinality: int


#: the footer property in which lakefmt's Puffin files carry the CRC-32 of their deletion vectors' metadata
BLOBS_CRC = "lakefmt.blobs-crc32"


def _blobs_crc(blobs: Sequence[PuffinBlob]) -> int:
    """CRC-32 of the deletion-vector blobs' metadata as a footer lists them, in order: per blob, its referenced
    data file, offset, length and cardinality, each followed by a newline (UTF-8)."""
    text = "".join(f"{b.referenced_data_file}\n{b.offset}\n{b.length}\n{b.cardinality}\n" for b in blobs)
    return zlib.crc32(text.encode("utf-8"))


def puffin_blobs(data: bytes) -> list[PuffinBlob]:
    """The ``deletion-vector-v1`` blobs a Puffin file's footer lists (other blob types are skipped), checked to
    lie inside the file before its footer, and against the footer's :data:`BLOBS_CRC` when it has one (a changed
    byte of a data file's path would otherwise leave that file's vector out, unseen: its deleted rows back)."""
    if len(data) < 16 or data[:4] != PUFFIN_MAGIC or data[-4:] != PUFFIN_MAGIC:
        raise CorruptMetadataError("not a Puffin file (magic PFA1 missing at its start or end)")
    (size,) = struct.unpack_from("<I", data, len(data) - 12)
    flags = data[-8:-4]
    if flags[0] & 1:
        raise CorruptMetadataError("a Puffin file with a compressed footer is not supported")
    start = len(data) - 12 - size
    if start < 8 or data[start - 4 : start] != PUFFIN_MAGIC:
        raise CorruptMetadataError("a Puffin file's footer length points outside it")
    try:
        footer = orjson.loads(data[start : start + size])
        out = []
        for blob in footer["blobs"]:
            if blob["type"] != PUFFIN_BLOB_TYPE:
                continue
            offset, length = int(blob["offset"]), int(blob["length"])
            if offset < 4 or length < 12 or offset + length > start - 4:
                raise CorruptMetadataError(f"a Puffin blob at {offset} (+{length}) is outside the file")
            props = blob["properties"]
            cardinality = int(props["cardinality"])
            if cardinality < 0:
                raise CorruptMetadataError(f"a Puffin blob at {offset} says its cardinality is {cardinality}")
            out.append(PuffinBlob(str(props["referenced-data-file"]), offset, length, cardinality))
        properties = footer.get("properties") if isinstance(footer, dict) else None
        expected = properties.get(BLOBS_CRC) if isinstance(properties, dict) else None
        if expected is not None and str(expected) != str(_blobs_crc(out)):
            raise CorruptMetadataError(
                f"a Puffin file's footer does not match its {BLOBS_CRC} (its deletion vectors' metadata is corrupt)"
            )
        return out
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadataError(f"a Puffin file's footer is not valid: {exc}") from None


def decode_puffin(data: bytes) -> dict[str, pa.Array]:
    """The positions of every ``deletion-vector-v1`` blob of a Puffin file, by referenced data file."""
    return {b.referenced_data_file: decode_framed(data[b.offset : b.offset + b.length]) for b in puffin_blobs(data)}
