"""Deletion vectors (``lakefmt/spec/deletion_vector.py``): the portable 64-bit Roaring bitmap, its frame (length,
magic, CRC-32) and a minimal Puffin file, checked by round trips, by hand-made hostile bytes, and by an independent
reader: pyiceberg's deletion-vector reader decodes lakefmt's Puffin files to the same positions."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.table.deletion_vector import DeletionVector, deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

from lakefmt.errors import CorruptMetadataError
from lakefmt.spec.deletion_vector import (
    BLOBS_CRC,
    DV_MAGIC,
    MAX_KEY,
    decode_framed,
    decode_puffin,
    decode_vector,
    encode_framed,
    encode_puffin,
    encode_vector,
    puffin_blobs,
)


def _theirs(dv: DeletionVector) -> list[int]:
    """The positions pyiceberg decoded (from its bitmaps: its ``to_vector`` cannot build an Arrow array when a key
    is missing or there are no positions, a chunk with no values having no type)."""
    return [(key << 32) + low for key, bitmap in enumerate(dv._bitmaps) for low in bitmap]


#: positions under several 32-bit keys (each key's low halves a bitmap of its own), some dense, some sparse
SPREAD = [0, 1, 2, 65535, 65536, 2**32 - 1, 2**32, 2**32 + 7, 5 * 2**32 + 123_456, 40 * 2**32]


def test_round_trip_in_order_without_repeats() -> None:
    data = encode_vector([7, 3, 3, *SPREAD, 0])
    assert decode_vector(data).to_pylist() == sorted({7, 3, *SPREAD})
    assert decode_framed(encode_framed(SPREAD)).to_pylist() == SPREAD
    assert decode_vector(encode_vector([])).to_pylist() == []
    assert decode_vector(encode_vector(pa.array(range(100_000), pa.int64()))).to_pylist() == list(range(100_000))


def test_the_layout_is_the_portable_one() -> None:
    """8-byte little-endian key count, then per key its 4-byte little-endian value and a portable 32-bit bitmap;
    the frame is a big-endian length of magic + vector, the magic D1 D3 39 64 (Delta's 1681511377 in
    little-endian), the vector, and a big-endian CRC-32 of magic + vector."""
    vector = encode_vector([1, 2**32 + 5])
    assert struct.unpack_from("<Q", vector, 0) == (2,) and struct.unpack_from("<I", vector, 8) == (0,)
    assert struct.pack("<I", 1681511377) == DV_MAGIC
    framed = encode_framed([1, 2**32 + 5])
    assert struct.unpack_from(">I", framed, 0) == (len(DV_MAGIC) + len(vector),)
    assert framed[4:8] == DV_MAGIC and framed[8:-4] == vector
    assert struct.unpack_from(">I", framed, len(framed) - 4) == (zlib.crc32(DV_MAGIC + vector),)


def test_pyiceberg_decodes_lakefmts_puffin_file() -> None:
    """An independent reader: pyiceberg 0.12's deletion-vector reader finds the same positions per data file."""
    vectors = [("dt=a/data-1.parquet", SPREAD), ("data-2.parquet", [5]), ("data-3.parquet", list(range(0, 10_000, 3)))]
    puffin = encode_puffin(vectors)
    theirs = {dv.referenced_data_file: _theirs(dv) for dv in deletion_vectors_from_puffin_file(PuffinFile(puffin))}
    assert theirs == {path: sorted(set(p)) for path, p in vectors}
    assert {k: v.to_pylist() for k, v in decode_puffin(puffin).items()} == theirs
    footer = PuffinFile(puffin).footer
    assert [b.properties["cardinality"] for b in footer.blobs] == [str(len(SPREAD)), "1", "3334"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3 * 2**32 + 10), max_size=300) | st.lists(st.integers(0, 70_000), max_size=3000))
def test_any_positions_round_trip_and_pyiceberg_agrees(positions: list[int]) -> None:
    want = sorted(set(positions))
    assert decode_framed(encode_framed(positions)).to_pylist() == want
    (dv,) = deletion_vectors_from_puffin_file(PuffinFile(encode_puffin([("f.parquet", positions)])))
    assert _theirs(dv) == want


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (b"", "truncated"),
        (encode_framed([1, 2])[:-1], "says"),
        (encode_framed([1, 2])[:8] + b"\x00" + encode_framed([1, 2])[9:], "CRC"),
        (struct.pack(">I", 4 + 8) + b"XXXX" + struct.pack("<Q", 0) + b"\x00" * 4, "magic"),
    ],
    ids=["empty", "cut", "flipped byte", "wrong magic"],
)
def test_hostile_frames_are_corrupt_metadata(bad: bytes, match: str) -> None:
    with pytest.raises(CorruptMetadataError, match=match):
        decode_framed(bad)


def test_hostile_vectors_are_corrupt_metadata() -> None:
    good = encode_vector([1, 2**32 + 1])
    with pytest.raises(CorruptMetadataError, match="truncated"):
        decode_vector(good[:5])
    with pytest.raises(CorruptMetadataError):
        decode_vector(good[:-2])
    with pytest.raises(CorruptMetadataError, match="past its last bitmap"):
        decode_vector(good + b"\x00")
    two = struct.pack("<Q", 2) + good[8:]  # claims two keys but the second key's bytes are the first one's again
    with pytest.raises(CorruptMetadataError):
        decode_vector(two + good[8:])
    with pytest.raises(CorruptMetadataError, match="out of order"):
        decode_vector(struct.pack("<Q", 1) + struct.pack("<I", MAX_KEY + 1) + good[12:])
    with pytest.raises(CorruptMetadataError, match="Puffin"):
        decode_puffin(b"PFA1 not a puffin")


def test_positions_a_vector_cannot_hold_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        encode_vector([-1])
    with pytest.raises(ValueError, match="from 0 to 2\\*\\*63 - 1"):
        encode_vector([2**63])  # its key would be MAX_KEY + 1
    with pytest.raises(ValueError, match="null"):
        encode_vector(pa.array([1, None], pa.int64()))


def _with_footer(data: bytes, change: Any) -> bytes:
    """``data`` (a Puffin file) with its footer's JSON object passed through ``change``."""
    size = struct.unpack_from("<I", data, len(data) - 12)[0]
    start = len(data) - 12 - size
    footer = change(orjson.loads(data[start : start + size]))
    raw = orjson.dumps(footer)
    return data[:start] + raw + struct.pack("<I", len(raw)) + data[-8:]


def test_the_footer_crc_covers_the_vectors_metadata() -> None:
    """lakefmt's footers carry ``lakefmt.blobs-crc32``: a changed path, offset, length or cardinality, a blob
    dropped or of another type, or a wrong value is refused; a footer without the property (another writer's, or
    lakefmt's before it), or whose properties are null, is read."""
    data = encode_puffin([("a/data-1.parquet", [1, 5]), ("a/data-2.parquet", [0])])
    seen: list[Any] = []
    _with_footer(data, lambda f: seen.append(f) or f)
    assert BLOBS_CRC in seen[0]["properties"]
    assert [b.referenced_data_file for b in puffin_blobs(data)] == ["a/data-1.parquet", "a/data-2.parquet"]

    def edit(path: tuple[Any, ...], value: Any) -> Any:
        def change(footer: Any) -> Any:
            node = footer
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            return footer
        return change

    damaged = [
        edit(("blobs", 0, "properties", "referenced-data-file"), "a/data-3.parquet"),
        edit(("blobs", 1, "properties", "cardinality"), "2"),
        edit(("blobs", 1, "type"), "apache-datasketches-theta-v1"),
        edit(("properties", BLOBS_CRC), "12345"),
        lambda f: {**f, "blobs": f["blobs"][:1]},
    ]
    for change in damaged:
        with pytest.raises(CorruptMetadataError, match="blobs-crc32"):
            puffin_blobs(_with_footer(data, change))
    for change in (lambda f: {**f, "properties": {}}, lambda f: {**f, "properties": None},
                   lambda f: {"blobs": f["blobs"]}):
        assert len(puffin_blobs(_with_footer(data, change))) == 2
