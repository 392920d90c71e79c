"""Adversarial checks of the bounded caches (``lakefmt.cache.BoundedCache`` and its users) and of the masks built
from deleted positions (``lakefmt.read.masks.keep_bitmap`` / ``keep_rows``).

The first tests are defects found by attack, now fixed: positions that are not sorted and distinct, or not
integers, are refused by ``keep_rows`` (its count of each chunk's deleted rows relies on them), and a negative row
count in the entries is corrupt metadata. The rest are regression checks of edge cases that held."""

from __future__ import annotations

import itertools
import pickle
import random
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakefmt.cache import BoundedCache
from lakefmt.read.masks import keep_bitmap, keep_rows


def _reference(table: pa.Table, deleted: Any) -> pa.Table:
    keep = np.ones(table.num_rows, dtype=bool)
    keep[np.asarray(deleted, dtype=np.int64)] = False
    return table.filter(pa.array(keep))


def _two_chunks() -> pa.Table:
    return pa.Table.from_arrays([pa.chunked_array([[0, 1], [2, 3]])], names=["x"])


# -- defects found by attack (fixed) ------------------------------------------------------------------------------
def test_keep_rows_duplicated_position_drops_a_live_row_of_its_chunk() -> None:
    """``keep_rows(table, [1, 1])`` on a table chunked [0, 1] | [2, 3] dropped the first chunk whole (two
    positions inside it, its length) and lost the live row 0; the answer depended on the chunk layout. Refused."""
    table = _two_chunks()
    try:
        got = keep_rows(table, np.array([1, 1], np.int64))
    except ValueError:
        return
    assert got.column("x").to_pylist() == [0, 2, 3]


def test_keep_rows_unsorted_positions_are_neither_refused_nor_applied() -> None:
    """``keep_rows(table, [3, 1])``: the range check read only the first and last positions, and the per-chunk
    counts of ``searchsorted`` over unsorted positions dropped a live row and kept a deleted one. Refused."""
    table = _two_chunks()
    try:
        got = keep_rows(table, np.array([3, 1], np.int64))
    except ValueError:
        return
    assert got.column("x").to_pylist() == [0, 2]


def test_keep_rows_silently_accepts_the_old_bool_mask_argument() -> None:
    """``keep_rows``'s second argument was a keep-mask (a bool per row) and is now the deleted positions: a
    caller still passing a mask got every row dropped without a word. A bool array is refused."""
    table = pa.table({"x": [0, 1, 2, 3]})
    with pytest.raises((TypeError, ValueError)):
        keep_rows(table, np.array([True, False, True, True]))


def test_mask_whole_with_a_negative_row_count_gives_chunk_dependent_rows(tmp_path: Any) -> None:
    """Hostile metadata: entries a (3 rows, deletes 2), b (row_count -1), c (2 rows, deletes 0) add up to the
    table's 4 rows, so the total check passed, and c's positions landed on a's: rows that depended on how the
    table was chunked. A negative row count is corrupt metadata (``decode_manifest`` refuses it too)."""
    from lakefmt.errors import CorruptMetadataError
    from lakefmt.io import file_io_for
    from lakefmt.read.masks import Vector, mask_whole
    from lakefmt.spec.deletion_vector import encode_puffin, puffin_blobs

    io = file_io_for(str(tmp_path))
    data = encode_puffin([("a", [2]), ("c", [0])])
    io.write("dv.puffin", data)
    vectors = {
        b.referenced_data_file: Vector("dv.puffin", b.offset, b.length, b.cardinality) for b in puffin_blobs(data)
    }
    entries = pa.table({"path": ["a", "b", "c"], "row_count": pa.array([3, -1, 2], pa.int64())})
    results = []
    for chunks in ([[0, 1, 2, 3]], [[0, 1], [2, 3]]):
        table = pa.Table.from_arrays([pa.chunked_array(chunks)], names=["x"])
        with pytest.raises(CorruptMetadataError):
            results.append(mask_whole(io, table, entries, vectors, "files").column("x").to_pylist())
    assert not results


# -- edge cases that hold (regression checks) ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.uint32])
def test_keep_bitmap_edges(dtype: Any) -> None:
    cases = [(0, []), (1, []), (1, [0]), (8, [0, 7]), (9, [8]), (13, [0, 12]), (17, [3, 3, 5]), (17, [9, 2])]
    for n, positions in cases:
        got = keep_bitmap(n, np.array(positions, dtype=dtype))
        got.validate(full=True)
        expected = np.ones(n, dtype=bool)
        expected[positions] = False
        assert got.equals(pa.array(expected)), (n, positions)
        assert got.to_pylist() == expected.tolist()


def test_keep_rows_equals_filter_on_uneven_chunks_and_awkward_types() -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(0, 40))
        ints = np.arange(n + 5)
        base = {
            "i": pa.array(ints, mask=ints % 4 == 0),
            "b": pa.array(ints % 3 == 0, mask=np.zeros(n + 5, dtype=bool)),  # a validity bitmap, no null
            "s": pa.array([str(v) for v in ints], pa.large_string()),
            "n": pa.nulls(n + 5),
            "d": pa.array([str(v % 3) for v in ints]).dictionary_encode(),
            "l": pa.array([[int(v)] for v in ints]),
        }
        off = int(rng.integers(0, 5))
        columns = []
        for arr in base.values():
            arr = arr.slice(off, n)
            cuts = sorted(set(rng.integers(0, n + 1, int(rng.integers(0, 4))).tolist()) | {0, n})
            parts = [arr.slice(a, b - a) for a, b in itertools.pairwise(cuts)]
            parts.insert(int(rng.integers(0, len(parts) + 1)), arr.slice(0, 0))
            columns.append(pa.chunked_array(parts, type=arr.type))
        table = pa.Table.from_arrays(columns, names=list(base))
        k = int(rng.integers(0, n + 1))
        deleted = np.sort(rng.choice(n, k, replace=False)) if n else np.zeros(0, np.int64)
        for dtype in (np.int64, np.uint32):
            got = keep_rows(table, deleted.astype(dtype))
            got.validate(full=True)
            assert got.equals(_reference(table, deleted))
            assert keep_rows(table.select([]), deleted.astype(dtype)).num_rows == n - k


def test_bounded_cache_mixed_operations_from_threads_keep_the_bounds_and_the_byte_count() -> None:
    cache: BoundedCache[int, bytes | None] = BoundedCache(
        max_entries=20, max_bytes=300, sizeof=lambda v: 0 if v is None else len(v)
    )
    broken: list[str] = []

    def check() -> None:
        with cache._lock:
            held = sum(size for _, size in cache._items.values())
            if held != cache._bytes or len(cache._items) > 20 or cache._bytes > 300:
                broken.append(f"{len(cache._items)} entries, {cache._bytes} bytes counted, {held} held")

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(3000):
            key = rnd.randrange(40)
            op = rnd.random()
            value = None if rnd.random() < 0.2 else bytes(rnd.randrange(0, 40))
            if op < 0.35:
                cache.put(key, value)
            elif op < 0.6:
                cache.setdefault(key, value)
            elif op < 0.85:
                missing = object()
                got = cache.get(key, missing)
                if got is not missing and got is not None and not isinstance(got, bytes):
                    broken.append(f"get {key}: {got!r}")
            elif op < 0.99:
                cache.pop(key)
            else:
                cache.clear()
            check()

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not broken, broken[:3]


def test_a_pickled_store_arrives_with_empty_working_caches(tmp_path: Any) -> None:
    import lakefmt

    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["id"], options={"bucket": "1"})
    t.upsert(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}, schema=schema))
    t.delete_keys(pa.table({"id": [2]}))
    before = sorted(t.scan().to_arrow().column("id").to_pylist())
    store = t._store
    assert len(store._live) >= 1
    clone = pickle.loads(pickle.dumps(store))
    assert len(clone._live) == 0 and len(clone._manifests) == 0 and len(clone._lists) == 0
    snap = t.latest_snapshot()
    assert clone.live_of(snap) is None
    assert [m.file_name for m in clone.snapshot_manifests(snap)] == [
        m.file_name for m in store.snapshot_manifests(snap)
    ]
    assert before == [1, 3]
