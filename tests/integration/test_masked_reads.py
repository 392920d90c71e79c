"""Reads of files with deletion vectors by Polars' own reader, both ways it can mask (as it reads, where this
Polars takes selection vectors; after the read otherwise), and the store's memory of a snapshot's live entries.

Both Polars ways are held to the rows of ``test_key_reads``' history (upserts, key deletes, a delete by filter, in
files of 8-row row groups whose deleted rows span row-group boundaries), with Polars' own predicate, projection,
slice and limit on top."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import create_table_in
from test_key_reads import LOCAL_AND_MEMORY, SCHEMA, History, _sorted_rows

import lakefmt
from lakefmt.read import engine_duckdb, polars_vectors

WAYS = pytest.mark.parametrize("way", ["as-read", "after-read"])


def test_this_polars_masks_as_it_reads() -> None:
    """The installed Polars takes selection vectors (if a release drops it, reads fall back, and this says so)."""
    assert polars_vectors.reader_masks(pl)


@WAYS
@LOCAL_AND_MEMORY
def test_polars_reads_only_live_rows(store: Any, way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if way == "after-read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    h = History(store)
    t = h.t
    expected = h.rows(h.s4)
    lazy = t.scan().to_polars()
    assert _sorted_rows(lazy.collect()) == expected
    got = lazy.filter((pl.col("v") >= 150) & (pl.col("dt") == "b")).select("id", "v").collect()
    assert _sorted_rows(got) == sorted((r[0], r[2]) for r in expected if r[1] == "b" and r[2] >= 150)
    for n in (1, 5, 9, 17):  # limits ending inside and past the first files' row groups
        head = _sorted_rows(lazy.head(n).collect())
        assert len(head) == n and set(head) <= set(expected)
    assert lazy.select(pl.len()).collect().item() == len(expected)
    assert sorted(lazy.select("id").collect()["id"].to_list()) == sorted(r[0] for r in expected)
    window = lazy.slice(3, 11).collect()
    assert window.height == 11 and set(_sorted_rows(window)) <= set(expected)
    # a predicate on a column the projection leaves out, and time travel to before the deletes
    got = lazy.filter(pl.col("name").str.starts_with("u")).select("id").collect()
    assert sorted(got["id"].to_list()) == sorted(r[0] for r in expected if r[3].startswith("u"))
    assert _sorted_rows(t.scan(snapshot_id=h.s2).to_polars().collect()) == h.rows(h.s2)


@WAYS
def test_a_masked_file_holding_other_rows_than_its_entry_is_refused(
    local_store: Any, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data file with a vector replaced by hand by one of another length: its positions no longer name its rows.
    Polars refuses to read it either way, as every other read does."""
    if way == "after-read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    t = create_table_in(local_store, SCHEMA, primary_key=["id", "dt"], options={"bucket": "1"})
    t.upsert(pa.table({"id": range(10), "dt": ["a"] * 10, "v": range(10), "name": ["n"] * 10}, schema=SCHEMA))
    t.upsert(pa.table({"id": [3], "dt": ["a"], "v": [30], "name": ["m"]}, schema=SCHEMA))
    scan = t.scan()
    (masked,) = [f for f in scan.files() if f.deletion_vector is not None]
    full = scan.full_paths([masked.path])[0]
    pq.write_table(pq.read_table(full).slice(0, 8), full)
    with pytest.raises(lakefmt.CorruptMetadataError, match=r"holds 8 rows, its manifest entry says 10"):
        t.scan().to_polars().collect()


@pytest.mark.parametrize("keys", ["one", "two"])
def test_duckdb_anti_joins_deleted_positions_on_one_key_or_two(
    local_store: Any, keys: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's reader leaves out the deleted (file, position) pairs: as one 64-bit key when every file holds fewer
    than 2**32 rows, as two keys otherwise (forced here by lowering that bound)."""
    if keys == "two":
        monkeypatch.setattr(engine_duckdb, "_ONE_KEY_ROWS", 0)
    h = History(local_store)
    expected = h.rows(h.s4)
    con = duckdb.connect()
    rel = h.t.scan().to_duckdb(con, name="live")
    assert "READ_PARQUET" in rel.explain().upper()
    assert _sorted_rows(rel) == expected
    got = con.sql("select id, v from live where v >= 150 and dt = 'b'").to_arrow_table()
    assert _sorted_rows(got) == sorted((r[0], r[2]) for r in expected if r[1] == "b" and r[2] >= 150)
    assert con.sql("select count(*) from live").fetchall() == [(len(expected),)]


def test_a_snapshot_is_planned_once_per_table(local_store: Any) -> None:
    """The live entries of a snapshot are remembered by the table's store: a second scan of the same snapshot
    reads no manifest, a new snapshot is planned afresh, and the memory stays bounded."""
    t = create_table_in(local_store, SCHEMA, primary_key=["id", "dt"], options={"bucket": "2"})
    for k in range(3):
        t.upsert(pa.table({"id": [k], "dt": ["a"], "v": [k], "name": ["n"]}, schema=SCHEMA))
    first = t.scan().entries()
    store = t._store
    reads: list[str] = []
    original = store.manifest

    def counted(name: str) -> pa.Table:
        reads.append(name)
        return original(name)

    store.manifest = counted  # type: ignore[method-assign]
    assert t.scan().entries().equals(first) and reads == []
    t.upsert(pa.table({"id": [9], "dt": ["a"], "v": [9], "name": ["n"]}, schema=SCHEMA))
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 9]
    for k in range(12):
        t.upsert(pa.table({"id": [100 + k], "dt": ["a"], "v": [k], "name": ["n"]}, schema=SCHEMA))
        t.scan().entries()
    assert len(store._live) <= store.LIVE_CACHE_SIZE
