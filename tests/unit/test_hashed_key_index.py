"""Hashed key index files (keys that are not one integer-like column: strings, binaries, several columns): the
layout (lakefmt.spec.keys.index_file), the key bytes (lakefmt.spec.keys.hashing.key_bytes), and lookups in them
(lakefmt.rewrite.keys.stored): mapped from local disk, by page and byte ranges from a memory filesystem, or fetched
whole, a lookup finds exactly the (position, probe) pairs of equal keys a brute-force comparison finds; a key that
shares a probed key's hash is told apart by its bytes, and damage makes it give up (None: the caller reads the key
columns) rather than select a wrong row."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefmt.io import file_io_for as open_fileio
from lakefmt.rewrite.keys.stored import clear_stored, open_stored, stored_match
from lakefmt.spec import layout
from lakefmt.spec.keys.hashing import hash_of_key_bytes, key_bytes, key_hash
from lakefmt.spec.keys.index_file import (
    FLAG_HASHED,
    FLAG_POSITIONS,
    FLAG_WIDE,
    HEADER_SIZE,
    PAGE_ROWS,
    encode_hashed_index,
    hashed_columns,
    indexed_column,
    parse_header,
)
from lakefmt.spec.schema import TableSchema

COLUMNS = ["s", "n"]

NAME = "data-test-0.parquet"  #: the data file every index here is written for


def keys_table(strings: list[str], numbers: list[int] | None = None) -> pa.Table:
    cols: dict[str, Any] = {"s": pa.array(strings, pa.string())}
    if numbers is not None:
        cols["n"] = pa.array(numbers, pa.int32())
    return pa.table(cols)


def encode(table: pa.Table, hashes: np.ndarray | None = None) -> bytes:
    cols = table.column_names
    hashes = key_hash(table, cols) if hashes is None else hashes
    return encode_hashed_index(hashes, key_bytes(table, cols), data_file=NAME)


@pytest.fixture(params=["local", "memory"])
def io(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    uri = str(tmp_path) if request.param == "local" else f"memory://hashed-{uuid.uuid4().hex}"
    return open_fileio(uri)


def store(io: Any, blob: bytes) -> str:
    data_path = f"bucket-{uuid.uuid4().hex}/{NAME}"
    io.write(layout.key_index_path(data_path), blob, sync=False)
    return data_path


def lookup(io: Any, path: str, rows: int, probe: pa.Table, hashes: np.ndarray | None = None,
           typed: bool = True) -> Any:
    """stored_match of ``probe``'s keys in the index of ``path``: a set of (position, probe row), or None. With
    ``typed``, the lookup knows the key columns' types (to tell a shared hash from damage)."""
    clear_stored()
    index = open_stored(io, path, rows)
    assert index is not None and index.header.hashed
    h = (key_hash(probe, probe.column_names) if hashes is None else hashes).view(np.int64)
    order = np.argsort(h, kind="stable")
    types = [f.type for f in probe.schema] if typed else None
    got = stored_match(io, index, h[order], np.arange(probe.num_rows, dtype=np.int64)[order],
                       key_bytes(probe, probe.column_names), types)
    if got is None:
        return None
    pairs = set(zip(got[0].tolist(), got[1].tolist(), strict=True))
    assert len(pairs) == len(got[0]), "a pair reported twice"
    return pairs


def brute(table: pa.Table, probe: pa.Table) -> set[tuple[int, int]]:
    mine = list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))
    theirs = list(zip(*(probe.column(c).to_pylist() for c in probe.column_names), strict=True))
    return {(p, r) for r, k in enumerate(theirs) for p, m in enumerate(mine) if m == k}


def test_key_bytes_tell_keys_apart_exactly() -> None:
    t = pa.table({"s": pa.array(["a", "ab", "", "a\x00"]), "b": pa.array([b"b", b"", b"ab", b""])})
    got = key_bytes(t, ["s", "b"]).to_pylist()
    assert len(set(got)) == 4, "('a','b') and ('ab','') differ: each value carries its length"
    assert got[0] == struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"
    ints = pa.table({"i": pa.array([-1, 2], pa.int16()), "u": pa.array([2**64 - 1, 0], pa.uint64()),
                     "t": pa.array([True, False])})
    assert key_bytes(ints, ["i", "u", "t"]).to_pylist()[0] == struct.pack("<qQQ", -1, 2**64 - 1, 1)
    with pytest.raises(ValueError, match="null"):
        key_bytes(pa.table({"s": pa.array(["a", None])}), ["s"])


def test_which_tables_get_which_index() -> None:
    def schema(fields: list[pa.Field], keys: list[str], parts: list[str] | None = None) -> TableSchema:
        return TableSchema(0, pa.schema(fields), tuple(parts or ()), format_version=3, primary_keys=tuple(keys))

    s = pa.field("s", pa.string(), nullable=False)
    i = pa.field("i", pa.int64(), nullable=False)
    assert hashed_columns(schema([s, i], ["s"])) == ("s",)
    assert hashed_columns(schema([s, i], ["s", "i"])) == ("s", "i")
    assert hashed_columns(schema([s, i], ["i"])) is None and indexed_column(schema([s, i], ["i"])) == "i"
    assert hashed_columns(schema([s, i], ["s", "i"], ["s"])) is None, "the bucket key is i alone: an integer index"
    assert hashed_columns(schema([s, i], ["i", "s"], ["i"])) == ("s",)
    assert hashed_columns(TableSchema(0, pa.schema([s, i]))) is None


def test_header_flags_and_size() -> None:
    t = keys_table(["b", "a", "cc", "a"], [1, 2, 3, 4])
    blob = encode(t)
    h = parse_header(blob)
    assert h is not None and h.hashed and h.wide and h.has_positions
    assert h.flags == FLAG_HASHED | FLAG_WIDE | FLAG_POSITIONS
    assert h.size == len(blob) and h.count == 4
    assert h.base == sum(len(b) for b in key_bytes(t, COLUMNS).to_pylist()), "base: the key bytes' length"
    offsets = np.frombuffer(blob, "<u8", 5, h.offsets_offset)
    assert offsets[0] == 0 and offsets[-1] == h.base and bool(np.all(np.diff(offsets.astype(np.int64)) >= 0))
    empty = encode(keys_table([], []))
    h0 = parse_header(empty)
    assert h0 is not None and h0.count == 0 and h0.size == len(empty)


@pytest.mark.parametrize("flags", [FLAG_HASHED, FLAG_HASHED | FLAG_POSITIONS])
def test_hashes_must_be_wide(flags: int) -> None:
    blob = bytearray(encode(keys_table(["x", "y"], [1, 2])))
    blob[6:8] = flags.to_bytes(2, "little")
    assert parse_header(bytes(blob)) is None


def test_a_negative_bytes_length_is_no_index() -> None:
    blob = bytearray(encode(keys_table(["x", "y"], [1, 2])))
    blob[16:24] = (-1).to_bytes(8, "little", signed=True)
    assert parse_header(bytes(blob)) is None


@pytest.mark.parametrize("probes", [3, 40, 2000])
def test_lookup_equals_brute_force(io: Any, probes: int) -> None:
    """A few probes touch a few pages (ranges from memory://), many touch most (fetched whole)."""
    rng = np.random.default_rng(probes)
    n = 6 * PAGE_ROWS + 17
    ids = rng.permutation(n)
    t = keys_table([f"key-{i:06d}" for i in ids], (ids % 7).tolist())
    path = store(io, encode(t))
    wanted = rng.choice(n + 500, probes, replace=False)
    probe = keys_table([f"key-{i:06d}" for i in wanted], (wanted % 7).tolist())
    assert lookup(io, path, n, probe) == brute(t, probe)
    wrong = keys_table([f"key-{i:06d}" for i in wanted], ((wanted + 1) % 7).tolist())  # same strings, other n
    assert lookup(io, path, n, wrong) == set()


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.tuples(st.text(max_size=4), st.integers(-3, 3)), max_size=60),
    probes=st.lists(st.tuples(st.text(max_size=4), st.integers(-3, 3)), max_size=20),
)
def test_lookup_property(keys: list[tuple[str, int]], probes: list[tuple[str, int]]) -> None:
    io = open_fileio(f"memory://hashed-{uuid.uuid4().hex}")
    t = keys_table([k for k, _ in keys], [n for _, n in keys])
    p = keys_table([k for k, _ in probes], [n for _, n in probes])
    assert lookup(io, store(io, encode(t)), len(keys), p) == brute(t, p)


def test_a_hash_shared_by_other_keys_gives_up(io: Any) -> None:
    """Distinct keys with one hash (forced here: any 64-bit hash collides somewhere): the lookup says None, so the
    caller compares the key columns themselves, never selecting the other key's row."""
    t = keys_table(["a", "b", "c"], [1, 1, 1])
    path = store(io, encode(t, hashes=np.zeros(3, np.uint64)))
    probe = keys_table(["b"], [1])
    assert lookup(io, path, 3, probe, hashes=np.zeros(1, np.uint64)) is None
    alone = store(io, encode(keys_table(["b"], [1]), hashes=np.zeros(1, np.uint64)))
    assert lookup(io, alone, 1, probe, hashes=np.zeros(1, np.uint64)) == {(0, 0)}


def binaries(values: list[bytes]) -> pa.Table:
    return pa.table({"b": pa.array(values, pa.binary())})


def test_keys_that_share_a_hash_are_told_apart_by_their_bytes(io: Any) -> None:
    """Short binary keys share the format's hash easily (a value's hash is its length plus a polynomial of its
    bytes: ``00 01`` and ``02`` both give 3). A stored key whose bytes differ from the probed key's but hash to the
    hash it is filed under is another key: its pair is dropped, and the lookup still answers (no reading of the
    key columns). Without the key columns' types, any such difference gives up (None)."""
    colliding = [b"\x00\x01", b"\x02", b"\x01\x00"]
    t = binaries([*colliding, b"other", b""])
    hashes = key_hash(t, ["b"])
    assert hashes[0] == hashes[1], "the premise: two keys with one hash"
    path = store(io, encode(t))
    for k, key in enumerate(colliding):
        probe = binaries([key])
        assert lookup(io, path, 5, probe) == {(k, 0)} == brute(t, probe)
        if (hashes == hashes[k]).sum() > 1:
            assert lookup(io, path, 5, probe, typed=False) is None
    probe = binaries([b"\x00\x00\x00"])  # 3 + 0: the hash of 00 01 and 02, and no key of the file
    assert key_hash(probe, ["b"])[0] == hashes[0]
    assert lookup(io, path, 5, probe) == set()
    both = binaries([b"\x02", b"\x00\x01", b"\x00\x00\x00", b"other", b""])
    assert lookup(io, path, 5, both) == brute(t, both)


def test_a_forged_entry_under_a_shared_hash_gives_up(io: Any) -> None:
    """Bytes that do not hash to the hash they are filed under are damage, even when the lookup knows the types:
    the lookup gives up rather than drop a pair it cannot account for."""
    t = binaries([b"\x02", b"zz"])
    forged = key_hash(t, ["b"])
    forged[1] = forged[0]  # "zz" filed under the hash of 02
    path = store(io, encode(t, hashes=forged))
    assert lookup(io, path, 2, binaries([b"\x02"])) is None


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.binary(max_size=6), st.integers(-(2**63), 2**63 - 1), st.text(max_size=3),
                               st.booleans()), max_size=30))
def test_the_hash_of_key_bytes_is_the_key_hash(rows: list[tuple[bytes, int, str, bool]]) -> None:
    t = pa.table({"b": pa.array([r[0] for r in rows], pa.binary()), "i": pa.array([r[1] for r in rows], pa.int64()),
                  "s": pa.array([r[2] for r in rows], pa.string()), "t": pa.array([r[3] for r in rows], pa.bool_())})
    for cols in (["b"], ["i", "s"], ["s", "t", "b", "i"]):
        got, ok = hash_of_key_bytes(key_bytes(t, cols), [t.schema.field(c).type for c in cols])
        assert bool(ok.all())
        assert got.tolist() == key_hash(t, cols).tolist()


def test_key_bytes_of_another_layout_do_not_parse() -> None:
    types = [pa.string(), pa.int32()]
    good = key_bytes(pa.table({"s": ["ab"], "n": pa.array([7], pa.int32())}), ["s", "n"]).to_pylist()[0]
    cases = [good[:-1], good + b"\x00", b"", struct.pack("<I", 99) + b"ab" + bytes(8)]
    _, ok = hash_of_key_bytes(pa.array(cases, pa.large_binary()), types)
    assert not bool(ok.any())


def test_damaged_key_bytes_give_up(io: Any) -> None:
    t = keys_table([f"k{i:04d}" for i in range(3000)], list(range(3000)))
    blob = bytearray(encode(t))
    h = parse_header(bytes(blob))
    assert h is not None
    blob[h.bytes_offset + 4] ^= 0x01  # the first key's first character: its hash no longer matches its bytes
    path = store(io, bytes(blob))
    first = int(np.frombuffer(bytes(blob), "<u4", 1, h.positions_offset)[0])
    probe = t.slice(first, 1)
    assert lookup(io, path, 3000, probe) is None
    clear_stored()
    bad = bytearray(encode(t))
    bad[h.offsets_offset + 8 : h.offsets_offset + 16] = (h.base + 10).to_bytes(8, "little")  # past the bytes
    path = store(io, bytes(bad))
    index = open_stored(io, path, 3000)
    assert index is not None
    hashes = key_hash(t, COLUMNS).view(np.int64)
    order = np.argsort(hashes, kind="stable")
    assert stored_match(io, index, hashes[order], order.astype(np.int64), key_bytes(t, COLUMNS)) is None
    assert open_stored(io, path, 3000) is None, "an index that contradicts itself is not used again"


def test_a_hashed_index_needs_the_probed_bytes(io: Any) -> None:
    t = keys_table(["a"], [1])
    path = store(io, encode(t))
    clear_stored()
    index = open_stored(io, path, 1)
    assert index is not None
    with pytest.raises(ValueError, match="bytes"):
        stored_match(io, index, np.zeros(1, np.int64), np.zeros(1, np.int64))


def test_the_header_alone_is_refused_for_a_hashed_index() -> None:
    blob = encode(keys_table(["a", "b"], [1, 2]))
    assert parse_header(blob[:HEADER_SIZE]) is not None  # the header parses; its size says more follows
    h = parse_header(blob)
    assert h is not None and h.size > HEADER_SIZE
