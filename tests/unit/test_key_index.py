"""Key index files (spec.keys.index_file) and lookups in them (rewrite.keys.stored): every lookup, mapped
from local disk, by page ranges from a memory filesystem, or fetched whole, finds exactly the (position, probe)
pairs of equal keys that a brute-force comparison finds."""

from __future__ import annotations

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
from lakefmt.spec.keys.index_file import (
    FLAG_POSITIONS,
    FLAG_WIDE,
    HEADER_SIZE,
    PAGE_ROWS,
    encode_key_index,
    indexable_type,
    key_values,
    parse_header,
)

I64 = np.iinfo(np.int64)

NAME = "data-test-0.parquet"  #: the data file every index here is written for


def _brute(keys: np.ndarray, probes: np.ndarray) -> set[tuple[int, int]]:
    """Every (file position, probe row) whose keys are equal."""
    out = set()
    where: dict[int, list[int]] = {}
    for pos, k in enumerate(keys.tolist()):
        where.setdefault(k, []).append(pos)
    for row, v in enumerate(probes.tolist()):
        out.update((pos, row) for pos in where.get(v, []))
    return out


def _lookup(io: Any, data_path: str, keys: np.ndarray, probes: np.ndarray) -> set[tuple[int, int]]:
    clear_stored()
    index = open_stored(io, data_path, len(keys))
    assert index is not None
    order = np.argsort(probes, kind="stable")
    got = stored_match(io, index, probes[order], np.arange(len(probes), dtype=np.int64)[order])
    assert got is not None
    pos, rows = got
    pairs = set(zip(pos.tolist(), rows.tolist(), strict=True))
    assert len(pairs) == len(pos), "a pair reported twice"
    return pairs


@pytest.fixture(params=["local", "memory"])
def io(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    uri = str(tmp_path) if request.param == "local" else f"memory://keyindex-{uuid.uuid4().hex}"
    return open_fileio(uri)


def _store(io: Any, keys: np.ndarray) -> str:
    data_path = f"bucket-{uuid.uuid4().hex}/{NAME}"
    io.write(layout.key_index_path(data_path), encode_key_index(keys, data_file=NAME), sync=False)
    return data_path


def test_header_flags_and_size() -> None:
    # in order, not consecutive
    sorted_narrow = encode_key_index(np.arange(10, 5000, dtype=np.int64) * 2, data_file=NAME)
    h = parse_header(sorted_narrow)
    assert h is not None and h.count == 4990 and h.base == 20 and not h.wide and not h.has_positions and not h.run
    assert h.size == len(sorted_narrow) == HEADER_SIZE + 8 * -(-4990 // PAGE_ROWS) + 4 * 4990
    shuffled = encode_key_index(np.array([5, 3, 9, 3], dtype=np.int64), data_file=NAME)
    h = parse_header(shuffled)
    assert h is not None and h.flags == FLAG_POSITIONS and h.size == len(shuffled)
    wide = encode_key_index(np.array([I64.min, 0, I64.max], dtype=np.int64), data_file=NAME)
    h = parse_header(wide)
    assert h is not None and h.flags == FLAG_WIDE and h.base == 0 and h.size == len(wide)
    empty = encode_key_index(np.zeros(0, np.int64), data_file=NAME)
    h = parse_header(empty)
    assert h is not None and h.count == 0 and h.size == len(empty)


@pytest.mark.parametrize(
    "blob",
    [b"", b"LKIX", b"XXXX" + bytes(28), b"LKIX\x02\x00" + bytes(26), b"LKIX\x01\x00\x08\x00" + bytes(24)],
    ids=["empty", "short", "magic", "version", "flags"],
)
def test_foreign_bytes_are_no_index(blob: bytes) -> None:
    assert parse_header(blob) is None


def test_indexable_types() -> None:
    for t in (pa.int8(), pa.int32(), pa.int64(), pa.uint32(), pa.date32(), pa.timestamp("us", "UTC"), pa.time64("ns")):
        assert indexable_type(t), t
    for t in (pa.uint64(), pa.string(), pa.bool_(), pa.binary(), pa.float64()):
        assert not indexable_type(t), t
    days = pa.array([0, 19000], pa.date32())
    assert key_values(days).tolist() == [0, 19000]
    assert key_values(pa.chunked_array([pa.array([-(2**40)], pa.timestamp("ns"))])).tolist() == [-(2**40)]


@pytest.mark.parametrize("layout_kind", ["sorted", "shuffled", "wide", "duplicates", "negative"])
def test_lookup_equals_brute_force(io: Any, layout_kind: str) -> None:
    rng = np.random.default_rng(7)
    n = 5 * PAGE_ROWS + 17
    keys = {
        "sorted": np.arange(n, dtype=np.int64) * 3,
        "shuffled": rng.permutation(n).astype(np.int64) * 3,
        "wide": rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True),
        "duplicates": np.sort(rng.integers(0, n // 8, n)).astype(np.int64),
        "negative": rng.permutation(np.arange(-n, 0, dtype=np.int64)),
    }[layout_kind]
    path = _store(io, keys)
    sparse = rng.choice(keys, 7)  # a few keys: pages by range on object storage
    dense = np.concatenate([rng.choice(keys, n // 2), rng.integers(keys.min() - 5, keys.max() + 5, n // 4)])
    edges = np.array([keys.min(), keys.max(), keys.min() - 1, keys.max() + 1, I64.min, I64.max], dtype=np.int64)
    for probes in (sparse, dense, edges, np.concatenate([sparse, sparse])):
        probes = probes.astype(np.int64)
        assert _lookup(io, path, keys, probes) == _brute(keys, probes)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-50, 50), min_size=1, max_size=3000),
    probes=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-60, 60), min_size=1, max_size=40),
    memory=st.booleans(),
)
def test_lookup_property(keys: list[int], probes: list[int], memory: bool) -> None:
    io = open_fileio(f"memory://keyindex-{uuid.uuid4().hex}") if memory else None
    if io is None:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            io = open_fileio(folder)
            k, p = np.array(keys, np.int64), np.array(probes, np.int64)
            assert _lookup(io, _store(io, k), k, p) == _brute(k, p)
        return
    k, p = np.array(keys, np.int64), np.array(probes, np.int64)
    assert _lookup(io, _store(io, k), k, p) == _brute(k, p)


def test_unusable_index_is_none(io: Any) -> None:
    keys = np.arange(3000, dtype=np.int64) * 2
    path = _store(io, keys)
    clear_stored()
    assert open_stored(io, path, 2999) is None, "a row count other than the data file's"
    clear_stored()
    assert open_stored(io, "bucket-0/data-none-0.parquet", 10) is None, "missing"
    blob = bytearray(encode_key_index(keys, data_file=NAME))
    blob[HEADER_SIZE + 3] ^= 0xFF  # the directory no longer matches its CRC
    io.write(layout.key_index_path(path), bytes(blob), sync=False)
    clear_stored()
    assert open_stored(io, path, 3000) is None
    io.write(layout.key_index_path(path), encode_key_index(keys, data_file=NAME)[:-5], sync=False)  # truncated
    clear_stored()
    index = open_stored(io, path, 3000)
    assert index is None or stored_match(io, index, keys, keys) is None


def test_position_outside_the_file_is_refused(io: Any) -> None:
    keys = np.array([4, 2, 8, 6], dtype=np.int64)
    blob = bytearray(encode_key_index(keys, data_file=NAME))
    h = parse_header(bytes(blob))
    assert h is not None and h.has_positions
    blob[h.positions_offset : h.positions_offset + 4] = (99).to_bytes(4, "little")
    path = f"bucket-{uuid.uuid4().hex}/{NAME}"
    io.write(layout.key_index_path(path), bytes(blob), sync=False)
    clear_stored()
    index = open_stored(io, path, 4)
    assert index is not None
    assert stored_match(io, index, np.array([2], np.int64), np.array([0], np.int64)) is None


def test_a_run_of_consecutive_keys_is_its_header(io: Any) -> None:
    """Keys base, base + 1, ... in file order (an ordered append into one bucket): the index is the 32-byte header,
    and a lookup is arithmetic."""
    for base in (0, -5, 2**40, I64.max - 10_000):
        keys = np.arange(base, base + 10_000, dtype=np.int64)
        blob = encode_key_index(keys, data_file=NAME)
        h = parse_header(blob)
        assert h is not None and h.run and len(blob) == HEADER_SIZE == h.size
        path = _store(io, keys)
        probes = np.array([base - 1, base, base + 17, base + 9_999, base + 10_000, I64.min, I64.max], np.int64)
        assert _lookup(io, path, keys, probes) == _brute(keys, probes)
    for near_run in ([1, 2, 2, 4], [3, 4, 5, 7], [5, 6, 7, 8][::-1]):  # a repeat, a gap, no key order: no run
        h = parse_header(encode_key_index(np.array(near_run, np.int64), data_file=NAME))
        assert h is not None and not h.run


def test_a_run_flag_with_other_flags_is_no_index() -> None:
    from lakefmt.spec.keys.index_file import FLAG_RUN

    blob = bytearray(encode_key_index(np.arange(5, dtype=np.int64), data_file=NAME))
    struct_flags = FLAG_RUN | FLAG_WIDE
    blob[6:8] = struct_flags.to_bytes(2, "little")
    assert parse_header(bytes(blob)) is None


def test_an_index_is_bound_to_its_data_file(io: Any) -> None:
    """The CRC covers the data file's name: an index beside another data file (copied there, or left from another
    file of the same rows) is no index, so its keys never decide which rows of this file are live."""
    keys = np.arange(3000, dtype=np.int64) * 3
    path = _store(io, keys)
    clear_stored()
    assert open_stored(io, path, 3000) is not None
    other = f"bucket-{uuid.uuid4().hex}/data-other-0.parquet"
    io.write(layout.key_index_path(other), io.read(layout.key_index_path(path)), sync=False)
    clear_stored()
    assert open_stored(io, other, 3000) is None
    run = f"bucket-{uuid.uuid4().hex}/data-run-0.parquet"
    io.write(layout.key_index_path(run), encode_key_index(np.arange(50, dtype=np.int64), data_file=NAME), sync=False)
    clear_stored()
    assert open_stored(io, run, 50) is None, "a run's header alone is bound too"


def test_a_version_1_index_is_no_index(io: Any) -> None:
    """Version 1 (its CRC of the directory alone, bound to no data file) is not used."""
    blob = bytearray(encode_key_index(np.arange(3000, dtype=np.int64) * 2, data_file=NAME))
    blob[4:6] = (1).to_bytes(2, "little")
    assert parse_header(bytes(blob)) is None
