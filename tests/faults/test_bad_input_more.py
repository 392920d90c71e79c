"""Bad input that tests/integration/test_bad_input.py does not try: a live data file gone missing and a
corrupt schema file. Both fail loudly with the file named, commit nothing, and lose nothing: once the file is
back the table reads exactly as before."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError
from lakefmt.metastore import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _table(store: Any) -> lakefmt.Table:
    t = lakefmt.create_table(store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options)
    t.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=SCHEMA))
    t.append(pa.table({"id": [3], "dt": ["a"]}, schema=SCHEMA))
    return t


def _ids(t: lakefmt.Table, **kwargs: Any) -> list[int]:
    return sorted(t.to_arrow(**kwargs).column("id").to_pylist())


def test_a_missing_data_file_is_named_and_nothing_else_is_lost(store: Any) -> None:
    t = _table(store)
    missing = [f for f in t.files() if f.partition == {"dt": "a"}][-1]  # the second snapshot's file
    data = t.io.read(missing.path)
    t.io.delete(missing.path)
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    with pytest.raises(FileNotFoundError, match=missing.path.rsplit("/", 1)[-1]):
        fresh.to_arrow()
    assert _ids(fresh, snapshot_id=1) == [1, 2]  # snapshots without it still read
    assert _ids(fresh, filter=pc.field("dt") == "b") == [2]  # and so do reads that prune it away
    snap = fresh.append(pa.table({"id": [4], "dt": ["c"]}, schema=SCHEMA))  # commits do not read data files
    assert snap is not None and snap.id == 3
    t.io.write(missing.path, data)
    assert _ids(lakefmt.open_table(t.uri, storage_options=store.storage_options)) == [1, 2, 3, 4]


@pytest.mark.parametrize("mangle", [b"", b"{", b"\x00\xff garbage"], ids=["empty", "truncated", "garbage"])
def test_a_corrupt_schema_file_is_named_and_nothing_is_committed(local_store: Any, mangle: bytes) -> None:
    t = _table(local_store)
    original = t.io.read(layout.schema_path(0))
    t.io.delete(layout.schema_path(0))
    t.io.write(layout.schema_path(0), mangle)
    for action in (
        lambda: lakefmt.open_table(t.uri),
        lambda: lakefmt.Table(t.io, MetaStore(t.io)).append(pa.table({"id": [9], "dt": ["a"]}, schema=SCHEMA)),
    ):
        with pytest.raises(CorruptMetadataError, match="schema/schema-0"):
            action()
    assert [s.id for s in t.snapshots()] == [1, 2]
    t.io.delete(layout.schema_path(0))
    t.io.write(layout.schema_path(0), original)
    assert _ids(lakefmt.open_table(t.uri)) == [1, 2, 3]
