"""Incremental scans of tables with deletion vectors through compactions that merged files of the range with older
ones: the scan returns exactly the rows the range added that its last snapshot still holds, never a replaced or
deleted version (once, such a scan read the merged in-range files without their vectors: 27% of a benchmark's rows
were stale versions of their keys). Values are unique per write, so "added in the range and still live" is the
end's live rows less the start's."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import DeletionVectorsError

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])


def _rows(t: lakefmt.Table, snapshot_id: int | None) -> set[tuple[Any, ...]]:
    if snapshot_id in (None, 0):
        return set()
    return {(r["k"], r["v"]) for r in t.to_arrow(snapshot_id=snapshot_id).to_pylist()}


def _check_ranges(t: lakefmt.Table) -> int:
    """Every range of the table's history against the model; how many of them had to be read from the feed."""
    ids = [s.id for s in t.snapshots()]
    by_feed = 0
    for start in [0, *ids]:
        for end in ids:
            if end <= start:
                continue
            scan = t.scan(from_snapshot=start, to_snapshot=end)
            want = _rows(t, end) - _rows(t, start)
            got = [(r["k"], r["v"]) for r in scan.to_arrow().to_pylist()]
            assert len(got) == len(set(got)) and set(got) == want, f"range {start}..{end}"
            assert scan.count() == len(want)
            if scan.feed_rows() is not None:
                by_feed += 1
                with pytest.raises(DeletionVectorsError, match="cannot be read file by file"):
                    scan.files()
    return by_feed


@pytest.mark.parametrize("seed", [5, 6])
def test_a_key_table_through_mixing_compactions(tmp_path: Any, seed: int) -> None:
    rng = random.Random(seed)
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={
        "bucket": "2", "num-sorted-run.compaction-trigger": "3", "snapshot.num-retained.min": "1000",
        "compaction.async": "false",
    })  # fmt: skip
    t.upsert(pa.table({"k": list(range(40)), "v": [f"0-{k}" for k in range(40)]}, schema=SCHEMA))
    for step in range(1, 12):
        keys = sorted(set(rng.sample(range(50), 8)))
        if step % 4 == 0:
            t.delete_keys(pa.table({"k": keys[:3]}))
        else:
            t.upsert(pa.table({"k": keys, "v": [f"{step}-{k}" for k in keys]}, schema=SCHEMA))
    assert any(s.commit_kind is lakefmt.CommitKind.COMPACT for s in t.snapshots())
    assert _check_ranges(t) > 0  # some ranges were read from the change feed


def test_a_merge_on_read_table_through_mixing_compactions(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={
        "write.delete.mode": "merge-on-read", "snapshot.num-retained.min": "1000", "compaction.async": "false",
        "compaction.min.file-num": "3",
    })  # fmt: skip
    for step in range(10):
        if step % 3 == 2:
            t.delete(f"k = {(step - 1) * 10 + 3} OR k = {step % 5}")  # a row of the last append, and an old one
        else:
            t.append(pa.table({"k": [step * 10 + i for i in range(10)], "v": [f"{step}-{i}" for i in range(10)]},
                              schema=SCHEMA))  # fmt: skip
    assert any(s.commit_kind is lakefmt.CommitKind.COMPACT for s in t.snapshots())
    assert _check_ranges(t) > 0


def test_engines_read_a_range_from_the_feed(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={
        "bucket": "1", "num-sorted-run.compaction-trigger": "2", "compaction.async": "false",
    })  # fmt: skip
    t.upsert(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    t.upsert(pa.table({"k": [2], "v": ["B"]}, schema=SCHEMA))
    t.upsert(pa.table({"k": [3], "v": ["C"]}, schema=SCHEMA))
    scan = t.scan(from_snapshot=1, columns=["k", "v"], filter="k > 1")
    assert scan.feed_rows() is not None  # the compaction merged snapshot 1's file with the range's: read by feed
    want = sorted((r["k"], r["v"]) for r in scan.to_arrow().to_pylist())
    assert want == [(2, "B"), (3, "C")]
    assert sorted(scan.to_duckdb().fetchall()) == want
    assert sorted(scan.to_polars().collect().rows()) == want
