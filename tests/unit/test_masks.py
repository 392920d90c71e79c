"""``lakefmt.read.masks``: ``keep_rows`` (the rows left once deleted positions are dropped, chunk by chunk) equals
Arrow's own filter of the same table for every column type, keeps chunks whole when no row of theirs goes, drops
them when all do, and leaves out the validity bitmap of a chunk without nulls only where that gives the same
values; ``keep_bitmap`` writes the mask's bits directly."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefmt.errors import CorruptMetadataError
from lakefmt.read import masks
from lakefmt.read.masks import keep_bitmap, keep_mask, keep_rows

N = 3_000


def _table(chunks: list[int]) -> pa.Table:
    """Every type a table may hold, nulls in some columns, cut in chunks of ``chunks`` rows."""
    rng = np.random.default_rng(7)
    n = sum(chunks)
    ints = rng.integers(-(10**12), 10**12, n)
    nulls = rng.random(n) < 0.1
    data = {
        "i64": pa.array(ints),
        "i32_nulls": pa.array(ints.astype(np.int32), mask=nulls),
        "f64": pa.array(rng.random(n)),
        "f32_nulls": pa.array(rng.random(n).astype(np.float32), mask=nulls),
        "b": pa.array(rng.random(n) < 0.5),
        "s": pa.array([f"s{x}" for x in ints]),
        "bin_nulls": pa.array([None if m else str(x).encode() for x, m in zip(ints, nulls, strict=True)]),
        "ls": pa.array([f"large{x}" for x in ints], pa.large_string()),
        "d": pa.array([decimal.Decimal(int(x)) / 100 for x in ints], pa.decimal128(20, 2)),
        "ts": pa.array(ints // 1000, pa.timestamp("us")),
        "date": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(x % 1000)) for x in ints]),
        "fsb": pa.array([int(x).to_bytes(8, "little", signed=True) for x in ints], pa.binary(8)),
        "lst": pa.array([[int(x), None] if m else [int(x)] for x, m in zip(ints, nulls, strict=True)]),
        "st": pa.array([{"a": int(x), "b": f"{x}"} for x in ints]),
        "nul": pa.nulls(n),
    }
    whole = pa.table(data)
    sink = pa.BufferOutputStream()  # through Parquet, as a read gets them: nullable columns come back with a
    with pq.ParquetWriter(sink, whole.schema) as writer:  # validity bitmap even where they hold no null
        start = 0
        for size in chunks:
            writer.write_table(whole.slice(start, size))
            start += size
    table = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert [len(c) for c in table.column("i64").chunks] == chunks
    return table


@pytest.mark.parametrize("chunks", [[N], [1000, 1000, 1000], [1, 999, 2000], [2048, 952]])
@pytest.mark.parametrize("share", [0.0, 0.01, 0.3, 1.0])
@pytest.mark.parametrize("threads", [1, 4])
def test_keep_rows_is_arrows_filter(
    chunks: list[int], share: float, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(masks, "_FILTER_THREADS", threads)
    monkeypatch.setattr(masks, "_SEGMENT_ROWS", 16)  # threads even for these few rows
    table = _table(chunks)
    assert table.column("f64").chunk(0).buffers()[0] is not None  # a bitmap without a null: left out to filter
    rng = np.random.default_rng(int(share * 100) + len(chunks))
    keep = rng.random(N) >= share
    got = keep_rows(table, np.flatnonzero(~keep))
    assert got.schema == table.schema
    assert got.equals(table.filter(pa.array(keep)))
    assert got.num_rows == int(keep.sum())


def test_chunks_kept_whole_are_not_copied_and_dropped_ones_vanish() -> None:
    table = _table([1000, 1000, 1000])
    keep = np.ones(N, dtype=bool)
    keep[1000:2000] = False  # the middle chunk goes
    keep[2500] = False
    got = keep_rows(table, np.flatnonzero(~keep))
    column = got.column("s")
    assert [len(c) for c in column.chunks] == [1000, 999]
    assert column.chunk(0).buffers()[2].address == table.column("s").chunk(0).buffers()[2].address  # no copy
    assert got.equals(table.filter(pa.array(keep)))


def test_a_table_without_columns_keeps_its_row_count() -> None:
    table = pa.table({"x": range(10)}).select([])
    assert keep_rows(table, np.arange(1, 10, 2)).num_rows == 5


def test_positions_outside_the_table_are_refused() -> None:
    with pytest.raises(ValueError, match=r"deleted positions 1\.\.4 for a table of 4 rows"):
        keep_rows(pa.table({"x": range(4)}), np.array([1, 4]))


@pytest.mark.parametrize("rows", [0, 1, 7, 8, 9, 64, 1000, 4099])
def test_the_bitmap_is_a_bool_per_row(rows: int) -> None:
    """Positions that share a byte, the first and last rows, a length not a multiple of 8 (padding bits clear)."""
    rng = np.random.default_rng(rows)
    for share in (0.0, 0.02, 0.5, 1.0):
        positions = np.flatnonzero(rng.random(rows) < share) if share < 1 else np.arange(rows)
        keep = np.ones(rows, dtype=bool)
        keep[positions] = False
        mask = keep_bitmap(rows, positions)
        assert mask.to_pylist() == keep.tolist() and mask.null_count == 0
        if rows % 8:
            last = np.frombuffer(mask.buffers()[1], dtype=np.uint8)[-1]
            assert last >> (rows % 8) == 0


def test_a_position_past_the_file_is_corrupt() -> None:
    assert keep_mask(4, np.array([0, 3]), "f").to_pylist() == [False, True, True, False]
    with pytest.raises(CorruptMetadataError, match="the deletion vector of f deletes row 4, but the file holds 4 rows"):
        keep_mask(4, np.array([1, 4]), "f")
