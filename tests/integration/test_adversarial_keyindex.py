"""Adversarial tests of key index files: hostile or damaged indexes, key types, and object-storage reads."""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.rewrite.keys import key_cache_clear
from lakefmt.spec import layout
from lakefmt.spec.key_index import HEADER_SIZE, encode_key_index

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _rows(ids: Any, tag: str) -> pa.Table:
    ids = [int(i) for i in ids]
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def state_of(t: lakefmt.Table) -> dict[int, str]:
    got = t.scan().to_arrow().to_pylist()
    out = {r["id"]: r["v"] for r in got}
    assert len(out) == len(got), "a key with two live rows"
    return out


def _paths(t: lakefmt.Table) -> list[str]:
    return [f.path for f in t.files()]


def test_a_folder_named_like_an_index_falls_back(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(_rows(range(100), "a"))
    (path,) = _paths(t)
    rel = layout.key_index_path(path)
    t.io.delete(rel)
    os.makedirs(t.io.local_path(rel) or "")
    key_cache_clear()
    t.upsert(_rows([5], "b"))
    assert state_of(t) == {i: f"a{i}" for i in range(100)} | {5: "b5"}


def test_an_unreadable_index_falls_back(local_store: Any) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(_rows(range(100), "a"))
    (path,) = _paths(t)
    os.chmod(t.io.local_path(layout.key_index_path(path)) or "", 0)
    key_cache_clear()
    t.upsert(_rows([5], "b"))
    assert state_of(t) == {i: f"a{i}" for i in range(100)} | {5: "b5"}


def test_a_deeply_truncated_index_on_object_storage_falls_back(store: Any) -> None:
    """Header and directory intact, key pages cut off: a sparse probe's page lies past the end of the file."""
    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(_rows(range(20000), "a"))
    (path,) = _paths(t)
    rel = layout.key_index_path(path)
    data = t.io.read(rel)
    pages = -(-20000 // 1024)
    t.io.write(rel, data[: HEADER_SIZE + 8 * pages + 16], sync=False)
    key_cache_clear()
    t.upsert(_rows([19990], "b"))
    got = state_of(t)
    assert got[19990] == "b19990" and len(got) == 20000
