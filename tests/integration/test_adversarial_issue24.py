"""Attacks on primary-key tables and deletion vectors (issue 24): hostile deletion-vector files and manifests,
hostile keys, interrupts inside an upsert's commit. Each test failed before its fix; the last ones are attacks
that held, kept as regression guards."""

from __future__ import annotations

import json
import os
import re
import struct
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import clear_read_caches

import lakefmt
from lakefmt.errors import CorruptMetadataError
from lakefmt.io.local import LocalFileIO
from lakefmt.read import masks
from lakefmt.spec import deletion_vector as dvm
from lakefmt.spec.keys.hashing import key_hash
from lakefmt.spec.manifest import decode_manifest, encode_manifest

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])
OPTIONS = {"bucket": "2", "compaction.auto": "false"}


_fresh_caches = pytest.fixture(autouse=True)(clear_read_caches)


def _table(tmp_path: Any, buckets: str = "2") -> tuple[str, lakefmt.Table]:
    root = str(tmp_path / "t")
    t = lakefmt.create_table(root, SCHEMA, primary_key=["k"], options={**OPTIONS, "bucket": buckets})
    t.upsert(pa.table({"k": list(range(20)), "v": list(range(20))}, schema=SCHEMA))
    return root, t


def _live_keys(t: lakefmt.Table) -> list[int]:
    keys: list[int] = t.to_arrow().column("k").to_pylist()
    return sorted(keys)


def _puffin_with_footer(vectors: list[tuple[str, list[int]]], cardinality: str) -> bytes:
    data = dvm.encode_puffin(vectors)
    size = struct.unpack_from("<I", data, len(data) - 12)[0]
    start = len(data) - 12 - size
    footer = json.loads(data[start : start + size])
    footer["blobs"][0]["properties"]["cardinality"] = cardinality
    raw = json.dumps(footer).encode()
    return data[:start] + raw + struct.pack("<I", len(raw)) + bytes(4) + dvm.PUFFIN_MAGIC


def _vector_of(t: lakefmt.Table) -> tuple[Any, Any]:
    task = next(f for f in t.files() if f.deletion_vector is not None)
    return task, task.deletion_vector


def _assert_refused(t: lakefmt.Table) -> None:
    masks._cache.clear()
    with pytest.raises(CorruptMetadataError):
        t.scan().count()
    with pytest.raises(CorruptMetadataError):
        t.to_arrow()


# ======================================================================================================================
# Defects (each failed before its fix)
# ======================================================================================================================


@pytest.mark.parametrize("cardinality", ["-5", "0", "7"])
def test_a_wrong_or_negative_cardinality_is_refused_by_count_too(tmp_path: Any, cardinality: str) -> None:
    """Found: ``Scan.count()`` answered from the Puffin footer's ``cardinality`` alone, so a footer saying 0 or 7
    for a vector of 2 positions gave a count that differs from ``to_arrow()`` (which refused), and a negative
    cardinality (``-5``, taken as "unknown") was accepted by every read and made ``count()`` larger than the
    table's rows. Fixed: a blob's cardinality is required and never negative (``puffin_blobs``), and a count
    decodes each vector and checks it (``masks.deleted_count``)."""
    root, t = _table(tmp_path, "1")
    t.delete_keys(pa.table({"k": [1, 2]}))
    task, vector = _vector_of(t)
    with open(os.path.join(root, vector.file), "wb") as out:
        out.write(_puffin_with_footer([(task.path, [1, 2])], cardinality))
    _assert_refused(t)


def test_a_vector_past_the_file_rows_is_refused_by_count_too(tmp_path: Any) -> None:
    """Found: a vector deleting row 100 of a 20-row file made ``count()`` return 17 while ``to_arrow()`` refused."""
    root, t = _table(tmp_path, "1")
    t.delete_keys(pa.table({"k": [1]}))
    task, vector = _vector_of(t)
    with open(os.path.join(root, vector.file), "wb") as out:
        out.write(dvm.encode_puffin([(task.path, [1, 2, 100])]))
    _assert_refused(t)


@pytest.mark.parametrize("damage", ["empty", "footer", "vector", "path"])
def test_a_damaged_deletion_vector_file_is_named(tmp_path: Any, damage: str) -> None:
    """Found (second review): a damaged deletion-vector file was refused with a message naming no file ("not a
    Puffin file", "a Puffin file's footer is not valid", "a framed deletion vector fails its CRC-32"): every read
    and write of the table now names the file (and a vector's offset in it). And a changed byte in the data file's
    path its footer lists left that file's vector out, unseen: the deleted rows were read again. The footer's
    ``lakefmt.blobs-crc32`` now covers the vectors' metadata."""
    root, t = _table(tmp_path, "1")
    t.delete_keys(pa.table({"k": [1, 2]}))
    _, vector = _vector_of(t)
    path = os.path.join(root, vector.file)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if damage == "empty":
        data = bytearray()
    elif damage == "footer":
        size = int.from_bytes(data[-12:-8], "little")  # the footer's JSON ends 12 bytes before the file's end
        data[len(data) - 12 - size] ^= 0x55  # its opening brace
    elif damage == "vector":
        data[vector.offset + vector.length - 1] ^= 0x01  # the vector's CRC
    else:
        data[data.rfind(b".parquet") - 1] ^= 0x01  # the last character of the data file's name, in the footer
    with open(path, "wb") as out:
        out.write(bytes(data))
    masks._cache.clear()
    for action in (lambda: t.scan().count(), t.to_arrow, lambda: t.upsert(pa.table({"k": [3], "v": [30]}))):
        with pytest.raises(CorruptMetadataError, match=re.escape(vector.file)):
            action()
        masks._cache.clear()


def test_a_vector_in_another_buckets_file_is_refused(tmp_path: Any) -> None:
    """Found: bucket 0's deletion-vector file holding a vector of bucket 1's data file was silently applied by
    every read (the spec puts a file's vector in its own bucket's file), and the next upsert to bucket 1 then
    committed a second vector for that file: a snapshot no read accepts. Fixed: reads check each vector's file
    against its data file's partition and bucket (``masks.load_vectors(data=...)``)."""
    root, t = _table(tmp_path)
    files = t.files()
    b0 = next(f for f in files if f.path.startswith("bucket-0/"))
    b1 = next(f for f in files if f.path.startswith("bucket-1/"))
    first = pa.Table.from_batches(list(t.read_files([b0]))).column("k")[0].as_py()
    t.delete_keys(pa.table({"k": [first]}))
    _, vector = _vector_of(t)
    with open(os.path.join(root, vector.file), "wb") as out:
        out.write(dvm.encode_puffin([(b0.path, [0]), (b1.path, [0, 1])]))
    _assert_refused(t)


def _forge_manifests(root: str, change: Callable[[pa.Table], pa.Table]) -> None:
    folder = os.path.join(root, "manifest")
    for name in os.listdir(folder):
        if name.startswith("manifest-list"):
            continue
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            entries = decode_manifest(f.read())
        with open(path, "wb") as f:
            f.write(encode_manifest(change(entries), 3))


def _set(name: str, fn: Callable[[Any], Any]) -> Callable[[pa.Table], pa.Table]:
    return lambda e: e.set_column(e.schema.get_field_index(name), name, fn(e.column(name)))


MANIFEST_FORGERIES: dict[str, Callable[[pa.Table], pa.Table]] = {
    "content as string": _set("content", lambda c: pc.cast(c, pa.string())),
    "content as int64": _set("content", lambda c: pc.cast(c, pa.int64())),
    "content 2": _set("content", lambda c: pc.if_else(pc.equal(c, 1), pa.scalar(2, pa.int8()), c)),
    "content null": _set("content", lambda c: pc.if_else(pc.equal(c, 1), pa.scalar(None, pa.int8()), c)),
    "content dropped": lambda e: e.drop(["content"]),
    "bucket as string": _set("bucket", lambda c: pc.cast(c, pa.string())),
    "bucket as int64": _set("bucket", lambda c: pc.cast(c, pa.int64())),
    "bucket past the count": _set("bucket", lambda c: pc.add(c, pa.scalar(7, pa.int32()))),
    "bucket negative": _set("bucket", lambda c: pc.subtract(c, pa.scalar(1, pa.int32()))),
    "bucket null": _set("bucket", lambda c: pa.nulls(len(c), pa.int32())),
    "bucket dropped": lambda e: e.drop(["bucket"]),
}


@pytest.mark.parametrize("forgery", list(MANIFEST_FORGERIES))
def test_manifest_content_and_bucket_columns_are_checked(tmp_path: Any, forgery: str) -> None:
    """Found: a manifest's ``content`` and ``bucket`` columns were never checked. A bucket of the wrong type,
    null, negative, past the bucket count or missing let the next upsert miss the live rows of its keys (two
    live rows per key); a content of another type, value or null made reads open a Puffin file as Parquet (raw
    ``ArrowInvalid``) or count it as rows; with ``content`` dropped an upsert left only its own rows live. Fixed:
    ``decode_manifest`` checks both columns' types, nulls and values, and ``live_entries`` the bucket count."""
    root, t = _table(tmp_path)
    t.delete_keys(pa.table({"k": [2, 3]}))
    _forge_manifests(root, MANIFEST_FORGERIES[forgery])
    again = lakefmt.open_table(root)
    _assert_refused(again)
    with pytest.raises(CorruptMetadataError):
        again.upsert(pa.table({"k": [1, 4], "v": [9, 9]}, schema=SCHEMA))


def test_a_huge_string_key_hashes_in_reasonable_time() -> None:
    """Found: the bucket hash of a string key ran a Python loop over every byte of the longest key (the powers of
    P), about 1 s per MB: an upsert of one 10 MB key took over 10 s per hash, and an upsert hashes its keys
    several times (dedup, probe, index). Fixed: the powers are one wrapping ``cumprod``. The hash is unchanged."""
    table = pa.table({"k": ["x" * 8_000_000, "ab", "é", ""]})
    start = time.perf_counter()
    hashes = key_hash(table, ["k"])
    one_long = time.perf_counter() - start
    start = time.perf_counter()
    key_hash(pa.table({"k": ["x" * 1000] * 8000}), ["k"])  # as many bytes, in short keys
    many_short = time.perf_counter() - start
    assert one_long < 8 * many_short + 2.0, (one_long, many_short)
    small = key_hash(pa.table({"k": ["ab", "é", ""]}), ["k"])
    assert hashes[1:].tolist() == small.tolist()
    assert small.tolist()[2] == 0  # the empty string: length 0, no bytes, mix(0) = 0


# ======================================================================================================================
# Attacks that held (regression guards)
# ======================================================================================================================


@pytest.mark.parametrize("method", ["write", "publish"])
@pytest.mark.parametrize("after", [False, True])
def test_an_interrupt_inside_an_upserts_commit_keeps_one_row_per_key(
    tmp_path: Any, monkeypatch: Any, method: str, after: bool
) -> None:
    """A KeyboardInterrupt raised by each write or publish of an upsert (before or after the real I/O) leaves
    the table readable, with at most one live row per key and a count equal to the rows read."""
    for n in range(12):
        root, t = _table(tmp_path / f"{method}{after}{n}")
        original = getattr(LocalFileIO, method)
        calls = [0]

        def hostile(
            self: Any, *args: Any, _n: int = n, _orig: Any = original, _calls: list[int] = calls, **kwargs: Any
        ) -> Any:
            _calls[0] += 1
            if _calls[0] - 1 == _n:
                if after:
                    _orig(self, *args, **kwargs)
                raise KeyboardInterrupt(method)
            return _orig(self, *args, **kwargs)

        monkeypatch.setattr(LocalFileIO, method, hostile)
        try:
            t.upsert(pa.table({"k": [3, 7, 40], "v": [1, 1, 1]}, schema=SCHEMA))
            fired = False
        except KeyboardInterrupt:
            fired = True
        monkeypatch.setattr(LocalFileIO, method, original)
        again = lakefmt.open_table(root)
        keys = _live_keys(again)
        assert len(keys) == len(set(keys)) and again.scan().count() == len(keys)
        assert set(keys) >= set(range(20))
        if not fired:
            break


@pytest.mark.parametrize(
    "flt",
    [
        pc.field("f") > 1,
        pc.field("f") != pc.field("f"),
        pc.is_nan(pc.field("f")),
        pc.is_null(pc.field("f")),
        ~(pc.field("f") > 1),
        pc.field("f") == 0,
        pc.field("s") == "",
        pc.is_null(pc.field("s")),
        pc.field("f").isin([1.0, float("nan")]),
    ],
    ids=str,
)
def test_delete_by_filter_marks_exactly_what_pyarrow_selects(tmp_path: Any, flt: pc.Expression) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), ("f", pa.float64()), ("s", pa.string())])
    fs = [float("nan"), None, 1.0, -0.0, 2.5, float("inf"), -float("inf")]
    data = pa.table(
        {
            "k": list(range(28)),
            "f": [fs[i % 7] for i in range(28)],
            "s": [[None, "", "x", "é"][i % 4] for i in range(28)],
        },
        schema=schema,
    )
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"], options=OPTIONS)
    t.upsert(data)
    t.delete(flt)
    kept = data.filter(pc.invert(pc.is_in(data.column("k"), data.filter(flt).column("k"))))
    expected = sorted(kept.column("k").to_pylist())
    assert _live_keys(t) == expected
    assert t.scan().count() == len(expected)


def test_hostile_key_input_gets_specific_errors_and_leaves_the_table_unchanged(tmp_path: Any) -> None:
    _, t = _table(tmp_path)
    before = t.latest_snapshot()
    for bad in (
        pa.table({"k": pa.array([None], pa.int64()), "v": [1]}),
        pa.table({"k": [1.5], "v": [1]}),
        pa.table({"v": [1]}),
        pa.table({"k": [1], "v": [1], "z": [1]}),
    ):
        with pytest.raises(lakefmt.LakefmtError):
            t.upsert(bad)
    for bad in (pa.table({"v": [1]}), pa.table({"k": pa.array([None], pa.int64())}), pa.table({"k": ["1"]})):
        with pytest.raises(lakefmt.LakefmtError):
            t.delete_keys(bad)
    assert t.latest_snapshot() == before
    t.upsert(pa.table({"v": [5], "k": pa.array([3], pa.int32())}))  # other order, narrower key type
    t.delete_keys(pa.table({"k": pa.array([4], pa.int32())}))
    assert _live_keys(t) == [k for k in range(20) if k != 4]
