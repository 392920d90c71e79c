"""What deltalake, pyiceberg and Paimon users reach for first: one-line writes that create the table, create_table
from data and ``exist_ok``, a producer that lacks a nullable column added since, the table's read shortcuts, and
reprs that fit on a line."""

from __future__ import annotations

from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import InvalidOptionError, SchemaMismatchError, TableAlreadyExistsError


def _ids(t: lakefmt.Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def test_write_table_creates_appends_and_overwrites(store: Any) -> None:
    uri, so = store.uri(), store.storage_options
    t = lakefmt.write_table(uri, pa.table({"id": [1, 2], "dt": ["a", "b"]}), partition_by=["dt"], storage_options=so)
    assert t.partition_keys == ("dt",) and _ids(t) == [1, 2]
    lakefmt.write_table(uri, pa.table({"id": [3], "dt": ["a"]}), storage_options=so)
    assert _ids(lakefmt.open_table(uri, so)) == [1, 2, 3]
    lakefmt.write_table(uri, pa.table({"id": [9], "dt": ["c"]}), "overwrite", storage_options=so)
    assert _ids(lakefmt.open_table(uri, so)) == [9]
    assert [h["operation"] for h in t.history()] == ["OVERWRITE", "WRITE", "WRITE"]


@pytest.mark.parametrize("kind", ["pandas", "polars", "reader", "batches", "capsule"])
def test_write_table_takes_any_arrow_data(tmp_path: Any, kind: str) -> None:
    base = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["x", None, "z"], pa.large_string())})
    data: Any = {
        "pandas": base.to_pandas(),
        "polars": pl.from_arrow(base),
        "reader": pa.RecordBatchReader.from_batches(base.schema, base.to_batches(max_chunksize=1)),
        "batches": iter(base.to_batches(max_chunksize=2)),
        "capsule": _Capsule(base),
    }[kind]
    t = lakefmt.write_table(str(tmp_path / "t"), data)
    assert t.to_arrow().sort_by("id").to_pylist() == base.to_pylist()


class _Capsule:
    """Only the Arrow PyCapsule stream interface (as nanoarrow, DuckDB results and others offer it)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)


def test_write_table_on_a_key_table_upserts(tmp_path: Any) -> None:
    uri = str(tmp_path / "k")
    t = lakefmt.write_table(uri, pa.table({"id": [1, 2], "v": ["a", "b"]}), primary_key=["id"])
    lakefmt.write_table(uri, pa.table({"id": [2, 3], "v": ["B", "c"]}))
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "c"}]
    assert [h["operation"] for h in t.history()] == ["UPSERT", "UPSERT"]


def test_write_table_refuses_bad_modes_and_other_tables(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    data = pa.table({"id": [1], "dt": ["a"]})
    with pytest.raises(InvalidOptionError,
                       match="mode must be one of 'append', 'overwrite', 'error', 'ignore', got 'upsert'"):
        lakefmt.write_table(uri, data, mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(lakefmt.NotATableError):
        lakefmt.open_table(uri)  # a refused write creates nothing
    t = lakefmt.write_table(uri, data, partition_by=["dt"])
    with pytest.raises(TableAlreadyExistsError, match=r"partition keys: the table has \['dt'\], asked for \['id'\]"):
        lakefmt.write_table(uri, data, partition_by=["id"])
    with pytest.raises(TableAlreadyExistsError, match=r"primary key: the table has \[\], asked for \['id'\]"):
        lakefmt.write_table(uri, data, primary_key=["id"])
    with pytest.raises(InvalidOptionError, match="schema_mode"):
        lakefmt.write_table(uri, data, schema_mode="overwrite")  # type: ignore[arg-type]
    assert t.version() == 1 and _ids(t) == [1]
    lakefmt.write_table(uri, pa.table({"id": [2], "dt": ["b"], "extra": [1.5]}), schema_mode="merge")
    assert lakefmt.open_table(uri).schema().names == ["id", "dt", "extra"] and _ids(t) == [1, 2]


def test_create_table_from_data_takes_only_its_schema(tmp_path: Any) -> None:
    frame = pd.DataFrame({"id": [1, 2], "name": ["a", "b"]})
    t = lakefmt.create_table(str(tmp_path / "p"), frame)
    assert t.schema().names == ["id", "name"] and t.latest_snapshot() is None  # no rows written
    t2 = lakefmt.create_table(str(tmp_path / "l"), pl.DataFrame({"x": [1.5]}))
    assert t2.schema().field("x").type == pa.float64()
    with pytest.raises(TypeError, match=r"schema must be a pyarrow\.Schema or data that has one"):
        lakefmt.create_table(str(tmp_path / "bad"), {"id": [1]})


def test_create_table_exist_ok_returns_the_same_table_or_says_what_differs(store: Any) -> None:
    uri, so = store.uri(), store.storage_options
    data = pa.table({"id": [1], "dt": ["a"]})
    t = lakefmt.create_table(uri, data, ["dt"], storage_options=so, primary_key=["id", "dt"])
    t.append(data)
    again = lakefmt.create_table(uri, data.schema, ["dt"], storage_options=so, primary_key=["id", "dt"], exist_ok=True)
    assert again.uri == t.uri and _ids(again) == [1]
    with pytest.raises(TableAlreadyExistsError):
        lakefmt.create_table(uri, data.schema, ["dt"], storage_options=so, primary_key=["id", "dt"])
    differs = r"columns: the table has \(id int64 not null, dt string not null\), asked for \(id int32\)"
    with pytest.raises(TableAlreadyExistsError, match=differs):
        lakefmt.create_table(uri, pa.schema([("id", pa.int32())]), storage_options=so, exist_ok=True)
    with pytest.raises(TableAlreadyExistsError, match="option bucket: the table has"):
        lakefmt.create_table(uri, data, ["dt"], {"bucket": "7"}, so, primary_key=["id", "dt"], exist_ok=True)
    assert t.version() == 1


def test_a_fresh_producer_without_a_new_nullable_column_writes_nulls(store: Any) -> None:
    """One rule for every writer: a nullable column the data lacks is written as nulls, a column that is not
    nullable is refused by name, through a freshly opened table (and its writer and committer)."""
    uri, so = store.uri(), store.storage_options
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    t = lakefmt.create_table(uri, schema, storage_options=so)
    t.append(pa.table({"id": [1], "v": ["a"]}, schema=schema))
    with t.update_schema() as u:
        u.add_column("country", pa.string())
    old_rows = pa.table({"id": [2], "v": ["b"]})  # a producer that predates the column
    fresh = lakefmt.open_table(uri, so)
    fresh.append(old_rows)
    lakefmt.write_table(uri, pa.table({"id": [3]}), storage_options=so)
    writer = lakefmt.open_table(uri, so).new_writer()
    writer.write(pa.table({"id": [4], "country": ["fr"]}))
    lakefmt.open_table(uri, so).new_committer().commit([writer.prepare_commit()], identifier=0)
    got = lakefmt.open_table(uri, so).to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "v": "a", "country": None}, {"id": 2, "v": "b", "country": None},
        {"id": 3, "v": None, "country": None}, {"id": 4, "v": None, "country": "fr"},
    ]
    latest = fresh.version()
    with pytest.raises(SchemaMismatchError, match=r"missing column\(s\) id \(not nullable"):
        lakefmt.open_table(uri, so).append(pa.table({"v": ["x"]}))
    assert lakefmt.open_table(uri, so).version() == latest


def test_table_shortcuts_take_the_scan_keywords(tmp_path: Any) -> None:
    t = lakefmt.write_table(str(tmp_path / "t"), pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    lakefmt.write_table(t.uri, pa.table({"id": [4], "s": ["d"]}))
    assert t.to_arrow(filter="id >= 2", columns=["id"], snapshot_id=1).to_pylist() == [{"id": 2}, {"id": 3}]
    frame = t.to_pandas(filter="s <> 'a'", columns=["s"], snapshot_id=2, types_mapper=pd.ArrowDtype)
    assert sorted(frame["s"].tolist()) == ["b", "c", "d"] and str(frame["s"].dtype).startswith("string")
    lazy = t.to_polars(filter="id < 3", snapshot_id=1)
    assert sorted(lazy.collect()["id"].to_list()) == [1, 2]
    with pytest.raises(lakefmt.SnapshotNotFoundError):
        t.to_pandas(snapshot_id=9)


def test_reprs_fit_on_a_line(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), options={"compaction.auto": "false"})
    for i in range(6):
        t.append(pa.table({"id": [i]}))
    shown = [repr(t), repr(t.latest_snapshot()), repr(t.compact(min_files=2)), repr(t.plan_restore(2)),
             repr(t.expire_snapshots(retain_max=2)), repr(t.remove_orphan_files(older_than=0, dry_run=True))]
    assert all("\n" not in s and len(s) < 240 for s in shown), shown
    assert shown[1].startswith("Snapshot(id=6, WRITE, kind=APPEND, time=")
    assert shown[2].startswith("CompactionReport(snapshot=7, partitions=1, 6 file(s)")
    assert shown[3].startswith("RestorePlan(target=2, base=7, remove 1 file(s) / 6 rows, add 2 file(s) / 2 rows)")
    assert shown[4].startswith("MaintenanceReport(expire, expired_snapshots=5, kept=6..7, deleted ")
    assert shown[5].startswith("MaintenanceReport(orphan-clean (dry run)")
