"""Adversarial review of changelog-producer=lookup and of incremental scans of vector tables read from the feed."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])


def _rows(t: lakefmt.Table, sid: int) -> Counter[tuple[Any, ...]]:
    if sid == 0:
        return Counter()
    return Counter((r["k"], r["v"]) for r in t.to_arrow(snapshot_id=sid).to_pylist())


def _check(t: lakefmt.Table) -> None:
    ids = [s.id for s in t.snapshots()]
    for a in [0, *ids]:
        for b in ids:
            if b > a:
                got = Counter((r["k"], r["v"]) for r in t.scan(from_snapshot=a, to_snapshot=b).to_arrow().to_pylist())
                assert got == _rows(t, b) - _rows(t, a), f"range {a}..{b}"


def _tb(keys: list[int], tag: str) -> pa.Table:
    return pa.table({"k": keys, "v": [f"{tag}-{k}" for k in keys]}, schema=SCHEMA)


def test_an_incremental_scan_of_a_key_table_through_a_restore(tmp_path: Any) -> None:
    """A restore brings back rows from before the range (of files a compaction merged): not rows the range added."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={
        "bucket": "1", "num-sorted-run.compaction-trigger": "2", "compaction.async": "false",
        "snapshot.num-retained.min": "1000",
    })  # fmt: skip
    t.upsert(_tb([1, 2, 3], "a"))
    t.upsert(_tb([2], "b"))
    t.upsert(_tb([3, 4], "c"))
    t.restore(2)
    t.upsert(_tb([1], "d"))
    _check(t)


def test_an_incremental_scan_of_a_merge_on_read_table_through_a_restore(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={
        "write.delete.mode": "merge-on-read", "snapshot.num-retained.min": "1000", "compaction.async": "false",
        "compaction.min.file-num": "2",
    })  # fmt: skip
    t.append(_tb([1, 1, 2], "a"))
    t.append(_tb([1, 2], "b"))
    t.delete("k = 1")
    t.append(_tb([1, 1], "c"))
    t.append(_tb([2, 2], "d"))
    t.delete("v = 'd-2' OR v = 'a-2'")
    t.restore(3)
    t.append(_tb([1], "f"))
    _check(t)


def test_a_changelog_list_naming_a_data_file_is_refused_not_expired(tmp_path: Any) -> None:
    """A snapshot whose changelogManifestList names its delta list (ADD entries of live data files): expiring it
    once deleted those data files, live in every later snapshot (data loss)."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={
        "bucket": "1", "changelog-producer": "lookup", "compaction.auto": "false",
    })  # fmt: skip
    t.upsert(_tb([1, 2], "a"))
    t.upsert(_tb([2], "b"))
    t.upsert(_tb([3], "c"))
    path = tmp_path / "t" / "snapshot" / "snapshot-1"
    snap = json.loads(path.read_text())
    snap["changelogManifestList"] = snap["deltaManifestList"]
    snap["changelogManifestListSize"] = snap["deltaManifestListSize"]
    path.write_text(json.dumps(snap))
    with pytest.raises(CorruptMetadataError, match="not in the table's changelog/ folder"):
        t.changes(from_snapshot=0)
    with pytest.raises(CorruptMetadataError, match="not in the table's changelog/ folder"):
        t.expire_snapshots(retain_max=1)
    assert sorted(lakefmt.open_table(t.uri).to_arrow().column("k").to_pylist()) == [1, 2, 3]
