"""Adversarial tests of key index files: hostile or damaged indexes, key types, and object-storage reads."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import create_table_in
from test_key_index_files import SCHEMA, data_paths, key_rows, state_of  # the rows and checks of the key index tests

import lakefmt
from lakefmt.rewrite.keys.planners import key_cache_clear
from lakefmt.spec import layout
from lakefmt.spec.keys.index_file import HEADER_SIZE, parse_header


def test_a_folder_named_like_an_index_falls_back(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(100), "a"))
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    t.io.delete(rel)
    os.makedirs(t.io.local_path(rel) or "")
    key_cache_clear()
    t.upsert(key_rows([5], "b"))
    assert state_of(t) == {i: f"a{i}" for i in range(100)} | {5: "b5"}


def test_an_unreadable_index_falls_back(local_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening the index fails (a permission refused, an I/O error): the key column is read instead."""
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(100), "a"))
    real_open = open

    def refusing(file: Any, *args: Any, **kwargs: Any) -> Any:
        mode = args[0] if args else kwargs.get("mode", "r")
        if str(file).endswith(layout.KEY_INDEX_SUFFIX) and "r" in mode:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    key_cache_clear()
    t.upsert(key_rows([5], "b"))
    monkeypatch.undo()
    assert state_of(t) == {i: f"a{i}" for i in range(100)} | {5: "b5"}


def test_a_deeply_truncated_index_on_object_storage_falls_back(store: Any) -> None:
    """Header and directory intact, key pages cut off: a sparse probe's page lies past the end of the file."""
    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(20000), "a"))
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    data = t.io.read(rel)
    pages = -(-20000 // 1024)
    t.io.write(rel, data[: HEADER_SIZE + 8 * pages + 16], sync=False)
    key_cache_clear()
    t.upsert(key_rows([19990], "b"))
    got = state_of(t)
    assert got[19990] == "b19990" and len(got) == 20000


_TYPES = {
    "int8": (pa.int8(), -128, 127),
    "int16": (pa.int16(), -(1 << 15), (1 << 15) - 1),
    "int32": (pa.int32(), -(1 << 31), (1 << 31) - 1),
    "int64": (pa.int64(), -(1 << 63), (1 << 63) - 1),
    "uint8": (pa.uint8(), 0, 255),
    "uint16": (pa.uint16(), 0, (1 << 16) - 1),
    "uint32": (pa.uint32(), 0, (1 << 32) - 1),
    "date32": (pa.date32(), -700000, 2900000),
    "time32s": (pa.time32("s"), 0, 86399),
    "time64ns": (pa.time64("ns"), 0, 86399 * 10**9),
    "ts_tz": (pa.timestamp("us", tz="Europe/Paris"), -(1 << 62), 1 << 62),
    "ts_ns": (pa.timestamp("ns"), -(1 << 62), 1 << 62),
}


@pytest.mark.parametrize("name", sorted(_TYPES))
def test_key_types_through_the_index(tmp_path: Any, name: str) -> None:
    typ, lo, hi = _TYPES[name]
    schema = pa.schema([pa.field("k", typ, nullable=False), ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"],
                             options={"bucket": "1", "compaction.auto": "false", "write.row-group-rows": "300"})
    rng = np.random.default_rng(7)
    n = min(5000, hi - lo + 1)
    ks = np.unique(np.concatenate([[lo, hi, lo + 1, hi - 1], rng.integers(lo, hi, n, endpoint=True)]))
    ks = rng.permutation(ks)
    def table(keys: Any, v: int) -> pa.Table:
        arr = pa.array(np.asarray(keys, np.int64)).cast(pa.int64()).cast(typ) if typ != pa.date32() and not (
            pa.types.is_time32(typ) or pa.types.is_integer(typ)) else pa.array(np.asarray(keys).tolist(), typ)
        return pa.table({"k": arr, "v": pa.array([v] * len(keys), pa.int64())}, schema=schema)
    t.append(table(ks, 0))
    key_cache_clear()
    pick = [*rng.choice(ks, 30, replace=False).tolist(), lo, hi]
    pick = list(dict.fromkeys(pick))
    t.upsert(table(pick, 1))
    key_cache_clear()
    t.delete_keys(table(pick[:5], 2).select(["k"]))
    got = t.scan().to_arrow()
    assert got.num_rows == len(ks) - len(set(pick[:5]))
    assert len(pa.compute.unique(got.column("k"))) == got.num_rows, "a key with two live rows"
    assert sum(got.column("v").to_pylist()) == len(set(pick)) - len(set(pick[:5]))


def test_first_row_key_repeated_over_three_pages_on_object_storage(store: Any) -> None:
    """A first-row table keeps a key's first row; one write holding a key 3000 times puts its live row on the first
    of three index pages. A sparse lookup must still find it, or a later row of the key becomes live too."""
    t = create_table_in(store, SCHEMA, primary_key=["id"],
                        options={"bucket": "1", "merge-engine": "first-row", "compaction.auto": "false"})
    ids = [5] * 3000 + list(range(10, 20000))
    t.upsert(pa.table({"id": ids, "v": [f"a{i}" for i in range(len(ids))]}, schema=SCHEMA))
    assert state_of(t)[5] == "a0"
    key_cache_clear()
    t.upsert(key_rows([5], "b"))
    got = state_of(t)
    assert got[5] == "a0"


_FD_SCRIPT = """
import os, sys
import pyarrow as pa
import lakefmt
from lakefmt.rewrite.keys.planners import key_cache_clear
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
t = lakefmt.create_table(sys.argv[1], schema, primary_key=["id"], options={"bucket": "400", "compaction.auto": "false"})
ids = list(range(40000))
t.append(pa.table({"id": ids, "v": ["a"] * len(ids)}, schema=schema))
key_cache_clear()
t.upsert(pa.table({"id": ids[::20], "v": ["b"] * len(ids[::20])}, schema=schema))
assert t.scan().to_arrow().num_rows == 40000
"""


_ROOT = os.path.dirname(os.path.dirname(lakefmt.__file__))


@pytest.mark.skipif(os.name != "posix", reason="file descriptor limits")
def test_many_mapped_indexes_under_a_small_descriptor_limit(tmp_path: Any) -> None:
    """macOS gives a process 256 file descriptors by default; a mapped index holds one, so an upsert over 400 data
    files must not keep one per file open."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _FD_SCRIPT, str(tmp_path / "t")], preexec_fn=limit, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_expire_deletes_indexes_after_the_key_is_widened_past_indexable(local_store: Any) -> None:
    """A uint32 key has indexes; widened to uint64 it has none. Expire must still delete the old files' indexes
    with their data files."""
    schema = pa.schema([pa.field("id", pa.uint32(), nullable=False), ("v", pa.string())])
    t = create_table_in(local_store, schema, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(pa.table({"id": pa.array(range(100), pa.uint32()), "v": ["a"] * 100}, schema=schema))
    old = data_paths(t)
    assert all(t.io.exists(layout.key_index_path(p)) for p in old)
    with t.update_schema() as u:
        u.update_column("id", pa.uint64())
    t.overwrite(pa.table({"id": pa.array(range(50), pa.uint64()), "v": ["b"] * 50}))
    t.expire_snapshots(retain_max=1)
    assert not any(t.io.exists(p) for p in old)
    assert not any(t.io.exists(layout.key_index_path(p)) for p in old), "an index outlived its data file"


@pytest.mark.parametrize("wide", [False, True])
def test_stored_positions_sparse_and_dense(store: Any, wide: bool) -> None:
    """A file written in batches (each sorted, the file not) stores positions; sparse and dense lookups through them
    on every store, narrow and wide keys."""
    t = create_table_in(store, SCHEMA, primary_key=["id"],
                        options={"bucket": "1", "compaction.auto": "false", "write.row-group-rows": "1000"})
    rng = np.random.default_rng(11)
    ids = rng.permutation(20000).astype(np.int64) * (1 << 20 if wide else 3) - 30000
    t.append([key_rows(ids[i : i + 1000], "a") for i in range(0, 20000, 1000)])
    (path,) = data_paths(t)
    head = parse_header(t.io.read(layout.key_index_path(path)))
    assert head is not None and head.has_positions and head.wide == wide
    model = {int(i): f"a{i}" for i in ids}
    for n in (3, 15000):
        key_cache_clear()
        pick = [int(i) for i in rng.choice(ids, n, replace=False)]
        t.upsert(key_rows(pick, f"b{n}-"))
        model |= {i: f"b{n}-{i}" for i in pick}
        assert state_of(t) == model


def _stray_indexes(t: lakefmt.Table) -> list[str]:
    """Index files whose data file is gone."""
    names = {f.path for f in t.io.walk()}
    return [p for p in names if p.endswith(layout.KEY_INDEX_SUFFIX) and layout.data_path_of_key_index(p) not in names]


def test_a_replayed_commit_discards_its_indexes(store: Any) -> None:
    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    committer = t.new_committer("job")
    w = t.new_writer()
    w.write(key_rows(range(100), "a"))
    assert committer.commit(w.prepare_commit(), 1) is not None
    replay = t.new_writer()
    replay.write(key_rows(range(100), "a"))
    message = replay.prepare_commit()
    assert committer.commit(message, 1) is None
    t.discard([message])
    assert _stray_indexes(t) == []
    live = data_paths(t)
    assert all(t.io.exists(layout.key_index_path(p)) for p in live)
    key_cache_clear()
    t.upsert(key_rows([1], "b"))
    assert state_of(t) == {i: f"a{i}" for i in range(100)} | {1: "b1"}


def test_a_tag_keeps_indexes_through_compaction_expire_orphan_clean_and_restore(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.upsert(key_rows(range(300), "a"))
    t.upsert(key_rows(range(100, 400), "b"))
    tagged = data_paths(t)
    snap = t.latest_snapshot()
    assert snap is not None
    t.create_tag("keep", snap.id)
    t.compact()
    t.upsert(key_rows(range(50), "c"))
    t.expire_snapshots(retain_max=1)
    t.remove_orphan_files(older_than=0)
    assert all(t.io.exists(layout.key_index_path(p)) for p in tagged)
    assert _stray_indexes(t) == []
    t.restore(tag="keep")
    key_cache_clear()
    t.upsert(key_rows([0, 150, 399, 500], "d"))
    model = {i: f"a{i}" for i in range(100)} | {i: f"b{i}" for i in range(100, 400)}
    model |= {0: "d0", 150: "d150", 399: "d399", 500: "d500"}
    assert state_of(t) == model


def test_fetched_index_bytes_count_the_positions_too(tmp_path: Any) -> None:
    """The process's bound on fetched indexes counts what they hold: keys and positions."""
    from lakefmt.rewrite.keys import stored as stored_keys

    t = lakefmt.create_table(f"memory://{tmp_path.name}-fetched", SCHEMA, primary_key=["id"],
                             options={"bucket": "1", "compaction.auto": "false", "write.row-group-rows": "1000"})
    ids = np.random.default_rng(5).permutation(8000)
    t.append([key_rows(ids[i : i + 1000], "a") for i in range(0, 8000, 1000)])
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    head = parse_header(t.io.read(rel))
    assert head is not None and head.has_positions
    key_cache_clear()
    t.upsert(key_rows(range(0, 8000, 2), "b"))  # most pages: the arrays are fetched whole and kept
    assert stored_keys._open.bytes == head.size - head.keys_offset


def test_an_index_deleted_after_its_header_was_read_falls_back(store: Any) -> None:
    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(30000), "a"))
    (path,) = data_paths(t)
    key_cache_clear()
    t.upsert(key_rows([7], "b"))  # a sparse lookup: the header and directory stay in the process
    t.io.delete(layout.key_index_path(path))
    t.upsert(key_rows([8, 29000], "c"))  # in the first file, whose pages must now be fetched: gone
    model = {i: f"a{i}" for i in range(30000)} | {7: "b7", 8: "c8", 29000: "c29000"}
    assert state_of(t) == model


@pytest.mark.parametrize("rows", [100, 5000])
def test_an_index_longer_than_its_header_says_is_not_used(store: Any, monkeypatch: pytest.MonkeyPatch,
                                                          rows: int) -> None:
    """The format says a reader must not use a key index whose size is not the one its header gives; on object
    storage too (a small index comes whole with its header; a large one's arrays when fetched whole)."""
    from lakefmt.rewrite.keys import stored as stored_keys

    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(rows), "a"))
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    t.io.write(rel, t.io.read(rel) + b"\x00" * 8, sync=False)
    used: list[bool] = []
    match = stored_keys.stored_match

    def spy(*args: Any) -> Any:
        out = match(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr("lakefmt.rewrite.keys.find.stored_match", spy)
    key_cache_clear()
    t.upsert(key_rows(range(0, rows, 2), "b"))  # most pages: fetched whole
    assert not any(used)
    assert state_of(t) == {i: ("b" if i % 2 == 0 else "a") + str(i) for i in range(rows)}
