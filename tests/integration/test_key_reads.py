"""Every read of a table with deletion vectors returns its live rows only: ``to_arrow``, ``to_batches``, ``count``,
the Arrow stream (``pyarrow.table(scan)``), DuckDB, Polars, pandas and ``Table.read_files`` over a scan's files or
read tasks, for the latest snapshot, time travel (``snapshot_id``, ``as_of``), a tag and incremental ranges, with a
filter and a projection, and with an engine's own filter and limit on top.

The table is a key table after upserts, ``delete_keys`` and a delete by filter (and a plain table with
``write.delete.mode=merge-on-read``), held to a plain dict of key -> row. Its files have several small row groups
and the deleted rows of a file span their boundaries, so a mask applied below a row-group split or a filter would
drop the wrong rows. Runs over local disk and memory, and the read of the latest snapshot also over S3 (moto)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.read.engines import native_paths, output_schema
from lakefmt.read.masks import deleted_positions

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64()), ("name", pa.string())])
OPTIONS = {"bucket": "2", "write.row-group-rows": "8"}
Row = tuple[Any, ...]
Key = tuple[int, str]
#: the storage fixture over local disk and memory only (S3 reads the same way, slowly: the first test covers it)
LOCAL_AND_MEMORY = pytest.mark.parametrize("store", ["local", "memory"], indirect=True)


def _row(i: int, v: int | None = None, name: str | None = None) -> Row:
    return (i, "a" if i < 100 else "b", i if v is None else v, name or f"n{i}")


def _table_of(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


class History:
    """A key table after four commits, and the live rows after each (key -> (row, snapshot that wrote it))."""

    def __init__(self, store: Any) -> None:
        self.t = create_table_in(store, SCHEMA, partition_by=["dt"], primary_key=["id", "dt"], options=OPTIONS)
        self.states: dict[int, dict[Key, tuple[Row, int]]] = {}
        live: dict[Key, tuple[Row, int]] = {}

        def commit(snap: lakefmt.Snapshot | None) -> int:
            assert snap is not None
            self.states[snap.id] = dict(live)
            return snap.id

        first = [_row(i) for i in range(200)]
        live.update({(r[0], r[1]): (r, 1) for r in first})  # written by snapshot 1 (a new table's first)
        self.s1 = commit(self.t.upsert(_table_of(first)))
        # every third key replaced (vectors on the first files), ten new keys
        second = [_row(i, 1000 + i, f"u{i}") for i in range(0, 200, 3)] + [_row(i) for i in range(200, 210)]
        live.update({(r[0], r[1]): (r, 2) for r in second})
        self.s2 = commit(self.t.upsert(_table_of(second)))
        # a run of 40 keys: runs of positions across the row groups of partition a's files
        gone = [(i, "a") for i in range(40, 80)]
        for key in gone:
            live.pop(key)
        self.s3 = commit(self.t.delete_keys(pa.table({"id": [k[0] for k in gone], "dt": [k[1] for k in gone]})))
        # by filter: rows of both the first files and the second commit's
        for key in [k for k, (r, _) in live.items() if r[2] >= 1150 or 20 <= r[2] < 30]:
            live.pop(key)
        self.s4 = commit(self.t.delete((pc.field("v") >= 1150) | ((pc.field("v") >= 20) & (pc.field("v") < 30))))
        assert (self.s1, self.s2, self.s3, self.s4) == (1, 2, 3, 4)

    def rows(self, sid: int, after: int = 0, where: Callable[[Row], bool] = lambda r: True) -> list[Row]:
        """The live rows of snapshot ``sid`` written after snapshot ``after`` where ``where`` holds, sorted."""
        return sorted(r for r, wrote in self.states[sid].values() if wrote > after and where(r))


def _sorted_rows(data: Any) -> list[Row]:
    """The rows of an Arrow table, a Polars or pandas frame or a DuckDB relation, sorted."""
    if isinstance(data, duckdb.DuckDBPyRelation):
        data = data.to_arrow_table()
    elif isinstance(data, pl.DataFrame):
        data = data.to_arrow()
    elif isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, preserve_index=False)
    return sorted(tuple(r.values()) for r in data.to_pylist())


def _project(rows: list[Row], columns: list[str] | None) -> list[Row]:
    if columns is None:
        return sorted(rows)
    idx = [SCHEMA.names.index(c) for c in columns]
    return sorted(tuple(r[i] for i in idx) for r in rows)


def _every_form(t: lakefmt.Table, scan: lakefmt.Scan) -> dict[str, list[Row]]:
    """The rows each read form returns for ``scan``."""
    schema = output_schema(scan)
    files = t.read_files(scan.files(), schema=scan.schema, columns=scan.columns, filter=scan.filter)
    tasks = [
        b
        for task in scan.plan_tasks(1)  # one file per task
        for b in t.read_files(task.files, schema=scan.schema, columns=scan.columns, filter=scan.filter)
    ]
    return {
        "to_arrow": _sorted_rows(scan.to_arrow()),
        "to_batches": _sorted_rows(pa.Table.from_batches(list(scan.to_batches()), schema=schema)),
        "stream": _sorted_rows(pa.table(scan)),
        "duckdb": _sorted_rows(scan.to_duckdb(duckdb.connect())),
        "polars": _sorted_rows(scan.to_polars().collect()),
        "pandas": _sorted_rows(scan.to_pandas()),
        "read_files": _sorted_rows(pa.Table.from_batches(list(files), schema=schema)),
        "read_tasks": _sorted_rows(pa.Table.from_batches(tasks, schema=schema)),
    }


def _check(t: lakefmt.Table, scan: lakefmt.Scan, expected: list[Row]) -> None:
    got = _every_form(t, scan)
    for form, rows in got.items():
        assert rows == expected, form
    assert scan.count() == len(expected)


#: label -> (scan arguments, the rows they keep): no filter; a partition filter and a projection; a data filter
#: (applied to rows) and a projection
CASES: dict[str, tuple[dict[str, Any], Callable[[Row], bool]]] = {
    "all": ({}, lambda r: True),
    "partition": ({"filter": pc.field("dt") == "a", "columns": ["name", "id"]}, lambda r: r[1] == "a"),
    "data": (
        {"filter": (pc.field("v") >= 30) & (pc.field("v") < 1100), "columns": ["id", "v"]},
        lambda r: 30 <= r[2] < 1100,
    ),
}


def test_every_read_form_returns_the_live_rows(store: Any) -> None:
    h = History(store)
    t = h.t
    assert t.latest_snapshot().total_record_count == len(h.states[h.s4]) == t.scan().count()
    for label, (kwargs, where) in CASES.items():
        if store.kind == "s3" and label != "data":
            continue  # S3 reads slowly: a filter and a projection there
        scan = t.scan(**kwargs)
        assert scan.vectors(), label
        _check(t, scan, _project(h.rows(h.s4, where=where), kwargs.get("columns")))
    # a scan planned only when narrowed (Polars prunes that way) keeps its vectors
    narrowed = t.scan().narrowed(pc.field("id") < 1000, ["id"])
    assert narrowed.vectors() and _sorted_rows(narrowed.to_arrow()) == _project(h.rows(h.s4), ["id"])
    # the table itself as an Arrow stream
    assert _sorted_rows(pa.table(t)) == h.rows(h.s4)


@LOCAL_AND_MEMORY
def test_time_travel_tags_and_incremental_reads(store: Any) -> None:
    h = History(store)
    t = h.t
    for sid in (h.s1, h.s2, h.s3, h.s4):
        assert t.snapshot(sid).total_record_count == len(h.states[sid])
    # before any delete (snapshot 1 has no vector at all), before the deletes, by time, by tag
    assert not t.scan(snapshot_id=h.s1).vectors()
    _check(t, t.scan(snapshot_id=h.s1), h.rows(h.s1))
    _check(t, t.scan(snapshot_id=h.s2), h.rows(h.s2))
    _check(t, t.scan(as_of=t.snapshot(h.s2).time_millis, columns=["id"]), _project(h.rows(h.s2), ["id"]))
    t.create_tag("before-filter-delete", h.s3)
    _check(t, t.scan(tag="before-filter-delete"), h.rows(h.s3))
    kwargs, where = CASES["data"]
    _check(t, t.scan(snapshot_id=h.s3, **kwargs), _project(h.rows(h.s3, where=where), kwargs["columns"]))
    # incremental: the rows a range added that its last snapshot still holds
    for start, end in ((h.s1, h.s4), (h.s1, h.s2), (0, h.s3), (h.s2, h.s4)):
        _check(t, t.scan(from_snapshot=start, to_snapshot=end), h.rows(end, after=start))
    kwargs, where = CASES["partition"]
    expected = _project(h.rows(h.s4, after=h.s1, where=where), kwargs["columns"])
    _check(t, t.scan(from_snapshot=h.s1, **kwargs), expected)


@LOCAL_AND_MEMORY
def test_deleted_rows_span_row_groups_and_engines_filter_and_limit_above_the_mask(store: Any) -> None:
    h = History(store)
    t = h.t
    scan = t.scan()
    vectors = scan.vectors()
    spanning = 0
    for f in scan.files():
        vector = vectors.get(f.path)
        if vector is None:
            continue
        meta = pq.ParquetFile(pa.BufferReader(t.io.read(f.path))).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        groups = {max(i for i, s in enumerate(starts) if s <= p) for p in deleted_positions(t.io, vector).tolist()}
        spanning += len(groups) > 1
    assert spanning >= 2
    expected = h.rows(h.s4)

    # DuckDB's own filters and limit on top (on local disk its Parquet reader skips row groups by them)
    con = duckdb.connect()
    rel = scan.to_duckdb(con, name="live")
    if store.kind == "local":
        assert "READ_PARQUET" in rel.explain().upper()
    for lo, hi in ((0, 1000), (41, 90), (150, 1100), (1000, 2000)):
        got = con.sql(f"select * from live where v >= {lo} and v < {hi}").to_arrow_table()
        assert _sorted_rows(got) == [r for r in expected if lo <= r[2] < hi], (lo, hi)
    assert con.sql("select count(*) from live").fetchall() == [(len(expected),)]
    limited = _sorted_rows(con.sql("select * from live limit 7").to_arrow_table())
    assert len(limited) == 7 and set(limited) <= set(expected)
    projected = t.scan(filter=pc.field("dt") == "b", columns=["v"]).to_duckdb(con)
    assert _sorted_rows(projected.filter("v >= 150")) == sorted(
        (r[2],) for r in expected if r[1] == "b" and r[2] >= 150
    )

    # Polars' predicate (which also prunes files), projection and limit
    lazy = scan.to_polars()
    got = lazy.filter((pl.col("v") >= 150) & (pl.col("dt") == "b")).select("id", "v").collect()
    assert _sorted_rows(got) == sorted((r[0], r[2]) for r in expected if r[1] == "b" and r[2] >= 150)
    head = _sorted_rows(lazy.head(5).collect())
    assert len(head) == 5 and set(head) <= set(expected)
    assert lazy.select(pl.len()).collect().item() == len(expected)
    assert native_paths(scan) is None  # a file with a vector is never handed to an engine's reader as it is


@LOCAL_AND_MEMORY
def test_merge_on_read_delete_on_a_table_without_a_key(store: Any) -> None:
    t = create_table_in(
        store, SCHEMA, partition_by=["dt"], options={"write.delete.mode": "merge-on-read", "write.row-group-rows": "8"}
    )
    rows = [_row(i) for i in range(0, 200, 2)]
    t.append(_table_of(rows))
    t.append(_table_of([_row(i) for i in range(1, 200, 2)]))
    before = t.latest_snapshot().id
    t.delete(pc.field("v").isin(list(range(0, 200, 7))) | ((pc.field("v") > 50) & (pc.field("v") < 90)))
    live = sorted(_row(i) for i in range(200) if not (i % 7 == 0 or 50 < i < 90))
    assert t.scan().vectors() and t.latest_snapshot().total_record_count == len(live)
    _check(t, t.scan(), live)
    kwargs, where = CASES["data"]
    _check(t, t.scan(**kwargs), _project([r for r in live if where(r)], kwargs["columns"]))
    _check(t, t.scan(snapshot_id=before), sorted(_row(i) for i in range(200)))


def test_columns_named_like_duckdbs_row_columns(local_store: Any) -> None:
    """A table column named as DuckDB's added columns: DuckDB reads the masked stream instead."""
    schema = pa.schema([("file_row_number", pa.int64()), ("__lakefmt_file", pa.string()), ("x", pa.float64())])
    t = create_table_in(local_store, schema, primary_key=["file_row_number"], options={"write.row-group-rows": "4"})
    t.upsert(pa.table({"file_row_number": range(20), "__lakefmt_file": [f"f{i}" for i in range(20)], "x": [0.5] * 20}))
    t.upsert(pa.table({"file_row_number": [3, 9], "__lakefmt_file": ["g3", "g9"], "x": [math.inf, -1.0]}))
    t.delete_keys(pa.table({"file_row_number": [0, 10, 11]}))
    expected = sorted(
        (i, "g3" if i == 3 else "g9" if i == 9 else f"f{i}", math.inf if i == 3 else -1.0 if i == 9 else 0.5)
        for i in range(20)
        if i not in (0, 10, 11)
    )
    _check(t, t.scan(), expected)
    _check(t, t.scan(filter=pc.field("x") > 0), [r for r in expected if r[2] > 0])


@pytest.mark.parametrize("name", ["File_Index", "FILE_ROW_NUMBER", "__LAKEFMT_FILE", "__Lakefmt_File", "*", 'a"b'])
def test_columns_named_like_duckdbs_in_another_case(local_store: Any, name: str) -> None:
    """DuckDB's identifiers ignore case: a column ``File_Index`` is DuckDB's ``file_index`` to it, and
    ``__LAKEFMT_FILE`` the join key lakefmt adds. Such a table's masked DuckDB read leaves out exactly the deleted
    rows, as ``to_arrow`` does; and a column named ``*`` is that column, not every column."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), (name, pa.int64())])
    t = create_table_in(local_store, schema, primary_key=["k"])
    t.upsert(pa.table({"k": [1, 2, 3], name: [7, 7, 7]}, schema=schema))
    t.upsert(pa.table({"k": [1], name: [8]}, schema=schema))
    t.delete_keys(pa.table({"k": [2]}))
    assert t.scan().vectors(), "the premise: a masked read"
    expected = [(1, 8), (3, 7)]
    assert sorted(tuple(r.values()) for r in t.scan().to_arrow().to_pylist()) == expected
    assert sorted(t.scan().to_duckdb(duckdb.connect()).fetchall()) == expected
