"""Adversarial checks of reads of files with deletion vectors: masks applied chunk by chunk
(``keep_rows``), a snapshot's live entries remembered by the table's store, and Polars' own reader applying the
vectors as it reads (``polars_vectors.masked_scan``).

The reference is ``Scan.to_arrow()``; the other read forms must return the same rows, and a broken or expired
file must surface as the same kind of error every read form gives."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import SnapshotNotFoundError
from lakefmt.read import masks, polars_vectors
from lakefmt.read.masks import keep_rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64()), ("name", pa.string())])
WAYS = pytest.mark.parametrize("way", ["as-read", "after-read"])


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "dt": ["a"] * n, "v": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def _keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "dt": ["a"] * len(ids)})


def _key_table(uri: str, **options: str) -> lakefmt.Table:
    return lakefmt.create_table(uri, SCHEMA, primary_key=["id", "dt"], options={"bucket": "1", **options})


def _ids(t: lakefmt.Table, **scan: Any) -> dict[str, list[int]]:
    s = lambda: t.scan(**scan)  # noqa: E731
    return {
        "to_arrow": sorted(s().to_arrow().column("id").to_pylist()),
        "to_batches": sorted(i for b in s().to_batches() for i in b.column("id").to_pylist()),
        "polars": sorted(s().to_polars().collect()["id"].to_list()),
        "duckdb": sorted(r[0] for r in s().to_duckdb(duckdb.connect()).select("id").fetchall()),
        "pandas": sorted(s().to_pandas()["id"].tolist()),
    }


def _same(t: lakefmt.Table, **scan: Any) -> list[int]:
    got = _ids(t, **scan)
    for form, ids in got.items():
        assert ids == got["to_arrow"], form
    assert t.scan(**scan).count() == len(got["to_arrow"])
    return got["to_arrow"]


def _clear_vector_cache() -> None:
    """Forget the Puffin files this process has read (as a cache full of other tables' vectors would have)."""
    masks._cache.clear()


# -- defects ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("way", ["as-read", "after-read", "duckdb"])
def test_a_scan_whose_deletion_vector_expired_says_which_snapshot(
    tmp_path: Any, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by attack: a scan planned at snapshot 2 (a data file with a vector deleting id 3), then two more deletes
    give that file a new vector, and an expiration keeping one snapshot deletes the old vector's Puffin file (the
    data file stays live). ``to_arrow``, ``to_batches`` and ``count`` of the planned scan raise
    :class:`SnapshotNotFoundError` naming snapshot 2; Polars (which reads the vector in its callback, or after the
    read) and DuckDB raised the storage's ``FileNotFoundError`` naming a Puffin path. They now name the snapshot."""
    if way == "after-read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    t = _key_table(str(tmp_path / "t"), **{"write-only": "true"})
    t.upsert(_rows(10))
    t.delete_keys(_keys([3]))
    scan = t.scan()
    assert len(scan.vectors()) == 1  # planned
    t.delete_keys(_keys([5]))
    t.delete_keys(_keys([6]))
    t.expire_snapshots(retain_max=1)
    _clear_vector_cache()
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 has expired"):
        scan.to_arrow()  # the reference behaviour
    _clear_vector_cache()
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 has expired"):
        if way == "duckdb":
            scan.to_duckdb(duckdb.connect()).fetchall()
        else:
            scan.to_polars().collect()


@pytest.mark.parametrize("damage", ["garbage", "empty"])
def test_polars_names_a_broken_masked_data_file(tmp_path: Any, damage: str) -> None:
    """Found by attack: a data file with a deletion vector overwritten by hand with bytes that are not Parquet.
    ``to_arrow`` and DuckDB name the file in their error; Polars masking as it reads checks the file's footer first
    and let pyarrow's error out as it was (``Couldn't deserialize thrift``, ``Parquet file size is 0 bytes``),
    naming no file. It now names the data file."""
    t = _key_table(str(tmp_path / "t"))
    t.upsert(_rows(10))
    t.delete_keys(_keys([3]))
    scan = t.scan()
    (masked,) = [f for f in scan.files() if f.deletion_vector is not None]
    full = scan.full_paths([masked.path])[0]
    with open(full, "wb") as out:
        out.write(b"PAR1" + b"\0" * 100 + b"PAR1" if damage == "garbage" else b"")
    with pytest.raises(Exception) as arrow_error:
        t.scan().to_arrow()
    assert masked.path in str(arrow_error.value)  # the reference names it
    with pytest.raises(Exception) as polars_error:
        t.scan().to_polars().collect()
    assert masked.path in str(polars_error.value), f"{type(polars_error.value).__name__}: {polars_error.value}"


# -- regression checks -----------------------------------------------------------------------------------------------
def test_keep_rows_equals_arrows_filter_on_every_flat_and_nested_type() -> None:
    """``keep_rows`` against ``Table.filter`` over sliced, unevenly chunked columns of every type lakefmt stores,
    with and without nulls, with and without an all-valid validity bitmap (what ``_without_validity`` drops)."""
    n = 40
    cols = {
        "i": pa.array([None if i % 7 == 0 else i for i in range(n)], pa.int32()),
        "u": pa.array(range(n), pa.uint64()),
        "f": pa.array([float(i) for i in range(n)]),
        "h": pa.array(np.arange(n, dtype=np.float16)),
        "b": pa.array([None if i % 5 == 0 else i % 2 == 0 for i in range(n)]),
        "bb": pa.array([i % 3 == 0 for i in range(n)]),
        "s": pa.array([str(i) * 3 for i in range(n)]),
        "ls": pa.array([None if i % 4 == 0 else str(i) for i in range(n)], pa.large_string()),
        "bin": pa.array([bytes([i]) * 2 for i in range(n)]),
        "lb": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
        "fsb": pa.array([bytes([i]) * 4 for i in range(n)], pa.binary(4)),
        "dec": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(10, 2)),
        "ts": pa.array([datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)]),
        "d": pa.array([datetime.date(2020, 1, 1 + i % 28) for i in range(n)]),
        "lst": pa.array([None if i % 6 == 0 else [i, i + 1] for i in range(n)]),
        "st": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        "nul": pa.nulls(n),
    }

    def with_bitmap(a: pa.Array) -> pa.Array:
        if a.null_count or a.buffers()[0] is not None or pa.types.is_null(a.type) or a.type.num_fields:
            return a
        bitmap = pa.array(np.ones(len(a) + a.offset, bool)).buffers()[1]
        return pa.Array.from_buffers(a.type, len(a), [bitmap, *a.buffers()[1:]], null_count=-1, offset=a.offset)

    rng = np.random.default_rng(0)
    for _ in range(60):
        off = int(rng.integers(0, 8))
        length = int(rng.integers(0, n - off))
        arrays = []
        for col in cols.values():
            col = col.slice(off, length)
            cuts = [*sorted(rng.integers(0, length + 1, size=int(rng.integers(0, 4))).tolist()), length]
            pieces, prev = [], 0
            for c in cuts:
                piece = col.slice(prev, c - prev)
                pieces.append(with_bitmap(piece) if rng.random() < 0.5 else piece)
                prev = c
            arrays.append(pa.chunked_array(pieces, type=col.type))
        table = pa.Table.from_arrays(arrays, names=list(cols))
        keep = rng.random(length) < rng.choice([0.0, 0.3, 0.9, 1.0])
        got = keep_rows(table, np.flatnonzero(~np.asarray(keep)))
        got.validate(full=True)
        assert got.equals(table.filter(pa.array(keep)))


@pytest.mark.parametrize("name", ["with space", "ha#sh", "pct%41", "pct%2Fx", "ünï", "a+b", "q=1&r"])
def test_polars_masks_files_under_odd_table_paths(tmp_path: Any, name: str) -> None:
    """Polars' callback matches the paths it asks about against the planned ones: odd characters must not make
    it refuse or skip a vector."""
    t = _key_table(str(tmp_path / name / "t"))
    t.upsert(_rows(10))
    t.delete_keys(_keys([3]))
    assert _same(t) == [0, 1, 2, 4, 5, 6, 7, 8, 9]


@WAYS
def test_polars_on_top_of_masked_files_with_every_type(
    tmp_path: Any, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nullable columns of many types in 8-row row groups, deletes spanning them, Polars' predicates, slices,
    row index and aggregates on top: the same rows as Polars over ``to_arrow``."""
    if way == "after-read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    schema = pa.schema(
        [
            ("id", pa.int64()), ("dt", pa.string()), ("f", pa.float64()), ("s", pa.string()), ("b", pa.binary()),
            ("dec", pa.decimal128(12, 3)), ("tz", pa.timestamp("us", "UTC")), ("bo", pa.bool_()),
            ("l", pa.list_(pa.int32())), ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ]
    )  # fmt: skip

    def rows(ids: list[int], gen: int) -> pa.Table:
        def nul(values: list[Any]) -> list[Any]:
            return [None if (i + gen) % 4 == 0 else v for i, v in zip(ids, values, strict=True)]

        utc = datetime.UTC
        return pa.table(
            {
                "id": ids, "dt": [["a", "b"][i % 2] for i in ids], "f": [i + gen / 10 for i in ids],
                "s": nul([f"s{i}" for i in ids]), "b": nul([bytes([i % 256, gen]) for i in ids]),
                "dec": nul([decimal.Decimal(f"{i}.{gen:03d}") for i in ids]),
                "tz": nul([datetime.datetime(2021, 1, 1, tzinfo=utc) + datetime.timedelta(hours=i) for i in ids]),
                "bo": nul([i % 3 == 0 for i in ids]), "l": nul([[i, gen] if i % 5 else [] for i in ids]),
                "st": nul([{"x": i, "y": None if i % 3 == 0 else str(i)} for i in ids]),
            },
            schema=schema,
        )  # fmt: skip

    t = lakefmt.create_table(
        str(tmp_path / "t"), schema, primary_key=["id", "dt"], partition_by=["dt"],
        options={"bucket": "2", "write.row-group-rows": "8"},
    )  # fmt: skip
    t.upsert(rows(list(range(80)), 1))
    t.upsert(rows(list(range(0, 80, 3)), 2))
    t.delete_keys(pa.table({"id": list(range(0, 80, 7)), "dt": [["a", "b"][i % 2] for i in range(0, 80, 7)]}))
    t.delete(pc.field("id") > 70)
    assert t.scan().vectors()
    ref = pl.from_arrow(t.scan().to_arrow())
    lazy = t.scan().to_polars()
    queries = {
        "all": lambda x: x,
        "f": lambda x: x.filter(pl.col("f") > 40.5),
        "null": lambda x: x.filter(pl.col("s").is_null()),
        "dec": lambda x: x.filter(pl.col("dec") > decimal.Decimal("20")),
        "list": lambda x: x.filter(pl.col("l").list.len() > 1),
        "struct": lambda x: x.filter(pl.col("st").struct.field("x") > 30),
        "group": lambda x: x.group_by("dt").agg(pl.len(), pl.col("id").sum(), pl.col("f").max()),
        "count": lambda x: x.select(pl.len()),
    }
    for label, q in queries.items():
        assert sorted(map(repr, q(lazy).collect().rows())) == sorted(map(repr, q(ref.lazy()).collect().rows())), label
    every = set(map(repr, ref.rows()))
    limits = {"head": lambda x: x.head(13), "tail": lambda x: x.tail(9), "slice": lambda x: x.slice(5, 20)}
    for label, q in limits.items():
        got = q(lazy).collect()
        assert got.height == q(ref.lazy()).collect().height and set(map(repr, got.rows())) <= every, label
    assert lazy.with_row_index().collect()["index"].to_list() == list(range(ref.height))


@WAYS
def test_fully_deleted_files_and_limits(tmp_path: Any, way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first file whose every row is deleted, then files partly deleted: limits, slices and a row index count
    live rows only; then every file fully deleted."""
    if way == "after-read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    t = _key_table(str(tmp_path / "t"), **{"write.row-group-rows": "8"})
    t.upsert(_rows(40))
    t.upsert(_rows(20, 40))
    t.upsert(_rows(10, 60))
    t.delete(pc.field("id") < 40)
    t.delete_keys(_keys(list(range(40, 70, 3))))
    live = _same(t)
    assert len(live) == 20
    lazy = t.scan().to_polars()
    for n in (1, 3, 13, 14, 25):
        head = lazy.head(n).collect()["id"].to_list()
        assert len(head) == min(n, 20) and set(head) <= set(live)
        window = lazy.slice(n, 5).collect()["id"].to_list()
        assert len(window) == max(0, min(5, 20 - n)) and set(window) <= set(live)
    assert lazy.with_row_index().collect()["index"].to_list() == list(range(20))
    assert lazy.filter(pl.col("id") > 10**9).collect().height == 0  # every file pruned
    t.delete(pc.field("id") >= 0)
    assert _same(t) == []


def test_two_snapshots_of_one_file_in_one_polars_query(tmp_path: Any) -> None:
    """The same data file read with two different vectors (two snapshots) in one Polars plan: each scan keeps its
    own selection vectors."""
    t = _key_table(str(tmp_path / "t"), **{"write.row-group-rows": "8"})
    t.upsert(_rows(20))
    s0 = t.latest_snapshot().id
    t.delete_keys(_keys([3]))
    s1 = t.latest_snapshot().id
    t.delete_keys(_keys([5, 17]))
    s2 = t.latest_snapshot().id
    frames = [t.scan(snapshot_id=s).to_polars() for s in (s0, s1, s2)]
    assert [f.height for f in pl.collect_all(frames)] == [20, 19, 17]
    assert pl.concat(frames).select(pl.len()).collect().item() == 56
    gone = frames[0].join(frames[2], on="id", how="anti").collect()
    assert sorted(gone["id"].to_list()) == [3, 5, 17]


def test_the_live_entries_memory_follows_restores_tags_and_other_writers(tmp_path: Any) -> None:
    """One Table object read again and again while it restores, while another Table object commits, and by tag
    and time travel: every read form agrees with ``to_arrow`` and sees the newest snapshot."""
    t = _key_table(str(tmp_path / "t"))
    t.upsert(_rows(8))
    t.delete_keys(_keys([3]))
    s2 = t.latest_snapshot().id
    t.create_tag("x", s2)
    assert _same(t) == [0, 1, 2, 4, 5, 6, 7]
    t.delete_keys(_keys([5]))
    s3 = t.latest_snapshot().id
    assert _same(t) == [0, 1, 2, 4, 6, 7]
    t.restore(s2)
    assert _same(t) == [0, 1, 2, 4, 5, 6, 7]
    other = lakefmt.open_table(t.uri)
    other.delete_keys(_keys([6]))
    assert _same(t) == [0, 1, 2, 4, 5, 7]
    other.upsert(_rows(1, 3))
    assert _same(t) == [0, 1, 2, 3, 4, 5, 7]
    t.restore(tag="x")
    assert _same(t) == [0, 1, 2, 4, 5, 6, 7]
    assert _same(t, snapshot_id=s3) == [0, 1, 2, 4, 6, 7]


def test_an_expired_snapshot_remembered_by_the_store_is_refused(tmp_path: Any) -> None:
    """A snapshot whose live entries the store remembers, then expired: every form says it expired."""
    t = _key_table(str(tmp_path / "t"), **{"write-only": "true"})
    t.upsert(_rows(10))
    t.delete_keys(_keys([3]))
    s2 = t.latest_snapshot().id
    assert _same(t, snapshot_id=s2) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    for i in range(3):
        t.overwrite(_rows(1, 100 + i))
    t.expire_snapshots(retain_max=1)
    for read in (
        lambda: t.scan(snapshot_id=s2).to_arrow(),
        lambda: t.scan(snapshot_id=s2).to_polars().collect(),
        lambda: t.scan(snapshot_id=s2).to_duckdb(duckdb.connect()).fetchall(),
    ):
        with pytest.raises(SnapshotNotFoundError, match="has expired"):
            read()
