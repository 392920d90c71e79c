"""Key index files on real tables (local disk, memory, S3): which data files get one, that an upsert by a writer
that never saw the table finds the live rows through them without reading a key column, that a missing or damaged
one costs only speed, and that expire and orphan-clean treat each as part of its data file."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.maintenance.report import FileClass
from lakefmt.rewrite.keys import find as finder_module
from lakefmt.rewrite.keys.planners import key_cache_clear
from lakefmt.spec import layout
from lakefmt.spec.keys.hashing import key_hash

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def key_rows(ids: Any, tag: str) -> pa.Table:
    """Rows of ``SCHEMA``: each id, and ``v`` the tag followed by the id."""
    ids = [int(i) for i in ids]
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def state_of(t: lakefmt.Table) -> dict[int, str]:
    """The live rows as id -> v, checked to hold each key once."""
    got = t.scan().to_arrow().to_pylist()
    out = {r["id"]: r["v"] for r in got}
    assert len(out) == len(got), "a key with two live rows"
    return out


def data_paths(t: lakefmt.Table) -> list[str]:
    """The live data files' paths."""
    return [f.path for f in t.files()]


def _no_key_column_reads(monkeypatch: pytest.MonkeyPatch, t: lakefmt.Table) -> None:
    """Fail a lookup that reads the key column of a file the table held before (the files an upsert writes are
    read: their keys are the probe)."""
    old = set(data_paths(t))
    read = finder_module.read_columns

    def refuse(io: Any, store: Any, entry: pa.Table, *args: Any) -> Any:
        if entry.column("path")[0].as_py() in old:
            raise AssertionError("an old file's key column was read: its key index was not used")
        return read(io, store, entry, *args)

    monkeypatch.setattr(finder_module, "read_columns", refuse)


def test_files_of_integer_keys_get_one_and_upserts_use_it(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"bucket": "2", "compaction.auto": "false", "write.row-group-rows": "500"}
    t = create_table_in(store, SCHEMA, primary_key=["id"], options=options)
    rng = np.random.default_rng(3)
    t.append(key_rows(rng.permutation(5000), "a"))  # row groups each in key order, the file not: positions stored
    t.append(key_rows(range(5000, 6000), "b"))
    for path in data_paths(t):
        assert t.io.exists(layout.key_index_path(path)), path
    model = {i: f"a{i}" for i in range(5000)} | {i: f"b{i}" for i in range(5000, 6000)}
    key_cache_clear()
    _no_key_column_reads(monkeypatch, t)
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    changed = [*rng.choice(6000, 40, replace=False).tolist(), 7000, 7001]
    fresh.upsert(key_rows(changed, "c"))
    fresh.delete_keys(pa.table({"id": [changed[0], 6500]}))
    model.update({i: f"c{i}" for i in changed})
    model.pop(changed[0])
    assert state_of(fresh) == model


STRING_SCHEMA = pa.schema([pa.field("name", pa.string(), nullable=False), pa.field("n", pa.int32(), nullable=False),
                           ("v", pa.string())])


def named_rows(ids: Any, tag: str) -> pa.Table:
    """Rows of ``STRING_SCHEMA``: a name and a small number per id (the key of a composite-key table is both)."""
    ids = [int(i) for i in ids]
    return pa.table({"name": [f"user-{i:07d}" for i in ids], "n": [i % 5 for i in ids],
                     "v": [f"{tag}{i}" for i in ids]}, schema=STRING_SCHEMA)


def named_state(t: lakefmt.Table) -> dict[tuple[str, int], str]:
    got = t.scan().to_arrow().to_pylist()
    out = {(r["name"], r["n"]): r["v"] for r in got}
    assert len(out) == len(got), "a key with two live rows"
    return out


def named_model(ids: Any, tag: str) -> dict[tuple[str, int], str]:
    return {(f"user-{i:07d}", i % 5): f"{tag}{i}" for i in ids}


@pytest.mark.parametrize("key", [["name"], ["name", "n"]])
def test_string_and_composite_keys_get_a_hashed_one_and_upserts_use_it(
    store: Any, monkeypatch: pytest.MonkeyPatch, key: list[str]
) -> None:
    """A cold writer finds the live rows of string and composite keys through the hashed key index: a few keys by
    pages and byte ranges, many by the whole index, never reading an old file's key columns."""
    options = {"bucket": "2", "compaction.auto": "false", "write.row-group-rows": "1000"}
    t = create_table_in(store, STRING_SCHEMA, primary_key=key, options=options)
    rng = np.random.default_rng(11)
    t.append(named_rows(rng.permutation(12_000), "a"))
    for path in data_paths(t):
        index = t.io.read(layout.key_index_path(path))
        assert index[:4] == b"LKIX" and int.from_bytes(index[6:8], "little") & 8, "a hashed index"
    model = named_model(range(12_000), "a")
    for k, wanted in enumerate(([5, 11_999, 20_000], rng.choice(12_000, 3000, replace=False).tolist())):
        key_cache_clear()
        _no_key_column_reads(monkeypatch, t)
        fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
        fresh.upsert(named_rows(wanted, f"u{k}"))
        model.update(named_model(wanted, f"u{k}"))
        monkeypatch.undo()
        assert named_state(fresh) == model
    key_cache_clear()
    _no_key_column_reads(monkeypatch, t)
    lakefmt.open_table(t.uri, storage_options=store.storage_options).delete_keys(
        named_rows([7, 30_000], "x").select(key))
    model.pop((f"user-{7:07d}", 7 % 5))
    monkeypatch.undo()
    assert named_state(t) == model
    assert all(t.io.exists(layout.key_index_path(p)) for p in data_paths(t)), "new files get one too"


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "key bytes", "other rows"])
def test_an_unusable_hashed_index_costs_only_speed(store: Any, damage: str) -> None:
    """A damaged hashed index is not used; damaged key bytes (their hash no longer theirs) make the lookup read the
    key columns: the upsert replaces the right rows either way."""
    t = create_table_in(store, STRING_SCHEMA, primary_key=["name"],
                        options={"bucket": "1", "compaction.auto": "false"})
    t.append(named_rows(range(3000), "a"))
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    blob = t.io.read(rel)
    if damage == "missing":
        t.io.delete(rel)
    elif damage == "garbage":
        t.io.write(rel, b"\x00" * 4096, sync=False)
    elif damage == "truncated":
        t.io.write(rel, blob[:-100], sync=False)
    elif damage == "key bytes":  # every stored key's last character changed: hashes and bytes disagree
        from lakefmt.spec.keys.index_file import parse_header

        h = parse_header(blob)
        assert h is not None and h.hashed
        body = bytearray(blob)
        ends = np.frombuffer(blob, "<u8", h.count + 1, h.offsets_offset).astype(np.int64)
        for end in ends[1:]:
            body[h.bytes_offset + end - 1] ^= 0x01
        t.io.write(rel, bytes(body), sync=False)
    else:  # a valid index of other rows
        from lakefmt.spec.keys.hashing import key_bytes, key_hash
        from lakefmt.spec.keys.index_file import encode_hashed_index

        other = named_rows(range(10), "z")
        blob = encode_hashed_index(key_hash(other, ["name"]), key_bytes(other, ["name"]), data_file=path)
        t.io.write(rel, blob, sync=False)
    key_cache_clear()
    t.upsert(named_rows([5, 2999, 4000], "b"))
    model = named_model(range(3000), "a") | named_model([5, 2999, 4000], "b")
    assert named_state(t) == model


def test_partitioned_dates_and_a_changed_key_type(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket key (the key without the partition keys) is what is indexed; dates are integers too."""
    schema = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("day", pa.date32(), nullable=False),
                        ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["dt", "day"], partition_by=["dt"],
                             options={"bucket": "2", "compaction.auto": "false"})
    days = pa.array(np.arange(18000, 18400, dtype=np.int32), pa.date32())
    for dt in ("x", "y"):
        t.append(pa.table({"dt": [dt] * len(days), "day": days, "v": np.zeros(len(days), np.int64)}, schema=schema))
    assert all(t.io.exists(layout.key_index_path(p)) for p in data_paths(t))
    key_cache_clear()
    _no_key_column_reads(monkeypatch, t)
    t.upsert(pa.table({"dt": ["x", "y"], "day": pa.array([18005, 18005], pa.date32()), "v": [1, 2]}, schema=schema))
    got = t.scan().to_arrow()
    assert got.num_rows == 800
    assert sorted(got.filter(pa.compute.field("v") > 0).column("v").to_pylist()) == [1, 2]


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "other rows"])
def test_an_unusable_index_costs_only_speed(store: Any, damage: str) -> None:
    t = create_table_in(store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    t.append(key_rows(range(3000), "a"))
    (path,) = data_paths(t)
    rel = layout.key_index_path(path)
    if damage == "missing":
        t.io.delete(rel)
    elif damage == "garbage":
        t.io.write(rel, b"\x00" * 4096, sync=False)
    elif damage == "truncated":
        t.io.write(rel, t.io.read(rel)[:-100], sync=False)
    else:  # a valid index of another file's rows
        from lakefmt.spec.keys.index_file import encode_key_index

        t.io.write(rel, encode_key_index(np.arange(10, dtype=np.int64), data_file=path), sync=False)
    key_cache_clear()
    t.upsert(key_rows([5, 2999, 4000], "b"))
    model = {i: f"a{i}" for i in range(3000)} | {5: "b5", 2999: "b2999", 4000: "b4000"}
    assert state_of(t) == model


@pytest.mark.parametrize("key", ["id", "name"])
def test_another_files_index_beside_a_data_file_is_not_used(store: Any, key: str) -> None:
    """Found by attack: a valid index of another data file of the same row count, copied beside a data file,
    passed every check, so a cold upsert missed the key's live row and the key had two. The index's CRC now
    covers its data file's name."""
    schema = SCHEMA if key == "id" else STRING_SCHEMA
    rows = (lambda ids, tag: key_rows(ids, tag)) if key == "id" else named_rows
    t = create_table_in(store, schema, primary_key=[key], options={"bucket": "1", "compaction.auto": "false"})
    t.upsert(rows([1, 2], "a"))
    (first,) = data_paths(t)
    t.upsert(rows([3, 4], "b"))
    (second,) = [p for p in data_paths(t) if p != first]
    t.io.write(layout.key_index_path(first), t.io.read(layout.key_index_path(second)), sync=False)
    key_cache_clear()
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    fresh.upsert(rows([1], "c"))
    got = fresh.scan().to_arrow().to_pylist()
    assert len(got) == 4, f"a key with two live rows: {got}"
    assert sorted(r["v"] for r in got) == ["a2", "b3", "b4", "c1"]


def test_expire_and_orphan_clean_treat_it_as_part_of_its_data_file(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, primary_key=["id"], options={"bucket": "1", "compaction.auto": "false"})
    for k in range(4):
        t.upsert(key_rows(range(k * 10, k * 10 + 200), f"r{k}"))
    before = data_paths(t)
    t.compact()
    after = data_paths(t)
    assert set(after).isdisjoint(before)
    assert all(t.io.exists(layout.key_index_path(p)) for p in after)
    # an index without its data file (a writer killed before its commit) is an orphan; one of a live file is not
    stray = "bucket-0/data-stray-0.keyindex"
    t.io.write(stray, b"LKIX", sync=False)
    report = t.remove_orphan_files(older_than=0)
    assert report.count(FileClass.KEY_INDEX) == 1
    assert not t.io.exists(stray)
    assert all(t.io.exists(layout.key_index_path(p)) for p in before + after)  # the old files are still retained
    t.expire_snapshots(retain_max=1)
    assert all(t.io.exists(layout.key_index_path(p)) for p in after)
    assert not any(t.io.exists(layout.key_index_path(p)) for p in before)
    assert not any(t.io.exists(p) for p in before)
    assert t.scan().to_arrow().num_rows == 230


def test_merged_rows_of_a_merge_engine_keep_their_index(local_store: Any) -> None:
    """Files a planner writes during the commit (a partial-update merge's rows) keep their index once it lands."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("b", pa.string())])
    t = create_table_in(local_store, schema, primary_key=["id"],
                        options={"bucket": "1", "merge-engine": "partial-update", "compaction.auto": "false"})
    t.upsert(pa.table({"id": [1, 2], "a": ["x", "y"], "b": [None, None]}, schema=schema))
    t.upsert(pa.table({"id": [1], "a": [None], "b": ["z"]}, schema=schema))
    assert all(t.io.exists(layout.key_index_path(p)) for p in data_paths(t))
    rows = {r["id"]: (r["a"], r["b"]) for r in t.scan().to_arrow().to_pylist()}
    assert rows == {1: ("x", "z"), 2: ("y", None)}


@pytest.mark.parametrize("key", [["id"], ["name"]])
def test_a_writers_held_index_entries_are_bounded_by_the_buffer_size(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, key: list[str]
) -> None:
    """An open file of a key table holds its rows' keys (and, hashed, their key bytes) until it closes, to write
    its key index: ``write.buffer-size`` bounds them across the writer's open files, by closing the file that
    holds the most. Every file still gets its index, which a cold upsert uses."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string(), nullable=False),
                        ("v", pa.string())])
    budget = 64 << 10
    options = {"bucket": "2", "compaction.auto": "false", "write.row-group-rows": "500",
               "write.buffer-size": str(budget)}
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=key, options=options)

    def batch(ids: Any, tag: str) -> pa.Table:
        ids = [int(i) for i in ids]
        return pa.table({"id": ids, "name": [f"user-{i:07d}" for i in ids], "v": [f"{tag}{i}" for i in ids]},
                        schema=schema)

    writer = t.new_writer()
    held = []
    for lo in range(0, 40_000, 2_000):
        writer.write(batch(range(lo, lo + 2_000), "a"))
        held.append(writer._index_bytes)
        assert writer._index_bytes <= budget
    assert t.new_committer("job").commit(writer.prepare_commit(), 1) is not None
    assert max(held) > budget // 4, "the bound was never approached: the test proves nothing"
    files = data_paths(t)
    assert len(files) > 2, "no file was closed for the bound"
    assert all(t.io.exists(layout.key_index_path(p)) for p in files)
    key_cache_clear()
    _no_key_column_reads(monkeypatch, t)
    fresh = lakefmt.open_table(t.uri)
    fresh.upsert(batch([3, 39_999, 50_000], "u"))
    monkeypatch.undo()
    got = fresh.scan().to_arrow()
    assert got.num_rows == 40_001
    assert sorted(got.column("id").to_pylist()) == [*range(40_000), 50_000]
    kept = {r["id"]: r["v"] for r in got.to_pylist()}
    assert kept[3] == "u3" and kept[39_999] == "u39999" and kept[50_000] == "u50000" and kept[4] == "a4"


def test_binary_keys_that_share_a_hash_are_found_through_the_index(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short binary keys share the format's hash easily (``00 01``, ``02`` and ``00 00 00`` hash alike: a value's
    hash starts from its length plus a polynomial of its bytes). A cold upsert and delete of such keys find each
    one's row through the hashed index, never reading an old file's key column, and leave one live row per key."""
    schema = pa.schema([pa.field("k", pa.binary(), nullable=False), ("v", pa.string())])
    t = create_table_in(store, schema, primary_key=["k"], options={"bucket": "1", "compaction.auto": "false"})
    keys = [bytes([a, b]) for a in range(4) for b in range(4)] + [bytes([c]) for c in range(8)] + [b"", b"\x00"]
    t.append(pa.table({"k": keys, "v": [f"a{i}" for i in range(len(keys))]}, schema=schema))
    hashes = key_hash(pa.table({"k": pa.array(keys, pa.binary())}), ["k"]).tolist()
    assert len(set(hashes)) < len(keys), "the premise: keys of the file share hashes"
    model = {k: f"a{i}" for i, k in enumerate(keys)}
    key_cache_clear()
    _no_key_column_reads(monkeypatch, t)
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    changed = [b"\x00\x01", b"\x02", b"\x00\x00\x00", b"\x03\x03"]
    fresh.upsert(pa.table({"k": changed, "v": ["u0", "u1", "u2", "u3"]}, schema=schema))
    model.update(zip(changed, ["u0", "u1", "u2", "u3"], strict=True))
    fresh.delete_keys(pa.table({"k": pa.array([b"\x01\x01", b"\x05"], pa.binary())}))
    model.pop(b"\x01\x01")
    model.pop(b"\x05")
    monkeypatch.undo()
    got = fresh.scan().to_arrow().to_pylist()
    assert len(got) == len({r["k"] for r in got}), "a key with two live rows"
    assert {r["k"]: r["v"] for r in got} == model
