"""The native read path (``pyspark_lakefmt.read``): what Spark's own Parquet reader returns over lakefmt's plan
equals ``Table.scan(...).to_arrow()``, for random histories (appends, upserts, deletes by key and by filter,
MERGE, compaction, renames, drops, re-adds, widenings), at every retained snapshot, with pushed filters."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark_lakefmt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as sortable tuples (maps as sorted pairs, timestamps as UTC instants) so both sides compare."""

    def norm(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(norm(x) for x in v)
        if isinstance(v, datetime.datetime) and v.tzinfo is not None:
            return v.astimezone(datetime.UTC)
        return v

    out = [tuple(norm(r[c]) for c in table.column_names) for r in table.to_pylist()]
    return sorted(out, key=repr)


def _same(df: Any, expected: pa.Table) -> None:
    got = df.toArrow()
    assert got.column_names == expected.column_names
    assert _rows(got) == _rows(expected)


_SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("a", pa.int32()), ("b", pa.float32())])


def _batch(draw: Any, ids: list[int], schema: pa.Schema) -> pa.Table:
    cols: dict[str, list[Any]] = {}
    for f in schema:
        if f.name == "id":
            cols["id"] = ids
        elif f.name == "k":
            cols["k"] = [f"p{i % 3}" for i in ids]
        elif pa.types.is_floating(f.type):
            cols[f.name] = [draw(st.none() | st.floats(-1e3, 1e3, width=32)) for _ in ids]
        elif pa.types.is_integer(f.type):
            cols[f.name] = [draw(st.none() | st.integers(-1000, 1000)) for _ in ids]
        else:
            cols[f.name] = [draw(st.none() | st.text("xyz", max_size=3)) for _ in ids]
    return pa.table(cols, schema=schema)


def _history(draw: Any, root: Path) -> lakefmt.Table:
    """A random history, drawn step by step (``data.draw``): lakefmt's writes between the draws."""
    keyed = draw(st.booleans())
    parted = draw(st.booleans())
    t = lakefmt.create_table(
        str(root), _SCHEMA, primary_key=["id", "k"] if keyed else None, partition_by=["k"] if parted else None,
        options={"write.row-group-rows": "4", **({} if keyed else {"write.delete.mode": "merge-on-read"})},
    )
    t.append(_batch(draw, list(range(20)), t.schema()))
    for _ in range(draw(st.integers(2, 6))):
        op = draw(st.sampled_from(["append", "upsert", "delete_keys", "delete", "merge", "compact", "schema"]))
        schema = t.schema()
        if op == "append" and not keyed:
            t.append(_batch(draw, draw(st.lists(st.integers(0, 40), min_size=1, max_size=8)), schema))
        elif op in ("upsert", "append"):
            ids = sorted(set(draw(st.lists(st.integers(0, 40), min_size=1, max_size=8))))
            batch = _batch(draw, ids, schema)
            t.upsert(batch) if keyed else t.append(batch)
        elif op == "delete_keys" and keyed:
            ids = sorted(set(draw(st.lists(st.integers(0, 40), min_size=1, max_size=5))))
            t.delete_keys(pa.table({"id": ids, "k": [f"p{i % 3}" for i in ids]}))
        elif op == "delete":
            t.delete(f"id < {draw(st.integers(0, 40))} AND id > {draw(st.integers(0, 20))}")
        elif op == "merge" and keyed:
            ids = sorted(set(draw(st.lists(st.integers(0, 40), min_size=1, max_size=6))))
            (t.merge(_batch(draw, ids, schema), "t.id = s.id AND t.k = s.k", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        elif op == "compact":
            t.compact()
        elif op == "schema":
            names = schema.names
            change = draw(st.sampled_from(["rename", "drop_readd", "widen", "add"]))
            u = t.update_schema()
            if change == "rename" and "a" in names:
                u.rename_column("a", "a_new")
            elif change == "rename" and "a_new" in names:
                u.rename_column("a_new", "a")
            elif change == "drop_readd" and "b" in names:
                u.drop_column("b")
                u.commit()
                u = t.update_schema()
                u.add_column("b", pa.float64())
            elif change == "widen" and schema.field(names[2]).type == pa.int32():
                u.update_column(names[2], pa.int64())
            elif change == "add" and "c" not in names:
                u.add_column("c", pa.string())
            u.commit()
    return t


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_native_read_equals_to_arrow_for_random_histories(spark: Any, tmp_path_factory: Any, data: Any) -> None:
    root = tmp_path_factory.mktemp("native")
    t = _history(data.draw, root)
    uri = str(root)
    cut = data.draw(st.integers(0, 40))
    for snap in t.snapshots():
        _same(pyspark_lakefmt.read(spark, uri, snapshotId=snap.id), t.scan(snapshot_id=snap.id).to_arrow())
    _same(pyspark_lakefmt.read(spark, uri), t.to_arrow())
    # a filter Spark pushes into the Parquet scan (row groups of 4 rows skipped): positions must not shift
    _same(pyspark_lakefmt.read(spark, uri).where(f"id >= {cut}"), t.scan(filter=pc.field("id") >= cut).to_arrow())
    _same(pyspark_lakefmt.read(spark, uri, filter=f"id < {cut}"), t.scan(filter=pc.field("id") < cut).to_arrow())


def test_deleted_positions_survive_row_group_skipping(spark: Any, tmp_path: Path) -> None:
    """A key table's file of 100 row groups of 10 rows, every third row deleted: a pushed filter that skips most
    row groups still drops exactly the deleted rows (positions are physical, not counted after skipping)."""
    t = lakefmt.create_table(
        str(tmp_path), pa.schema([("id", pa.int64()), ("v", pa.int64())]), primary_key=["id"],
        options={"write.row-group-rows": "10"},
    )
    t.append(pa.table({"id": list(range(1000)), "v": list(range(1000))}))
    t.delete_keys(pa.table({"id": list(range(0, 1000, 3))}))
    (f,) = [f for f in t.files() if f.deletion_vector is not None]
    assert pq.ParquetFile(f.full_path).num_row_groups == 100
    df = pyspark_lakefmt.read(spark, str(tmp_path)).where("id >= 905 AND id < 925")
    executed = df._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters: [IsNotNull(id), GreaterThanOrEqual(id,905)" in executed
    assert sorted(r.id for r in df.collect()) == [i for i in range(905, 925) if i % 3]
    assert pyspark_lakefmt.read(spark, str(tmp_path)).count() == t.scan().count() == 666


def test_types_read_as_to_arrow_reads_them(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="America/New_York")),
        ("ntz", pa.timestamp("us")),
        ("ms", pa.timestamp("ms", tz="UTC")),
        ("day", pa.date32()),
        ("dec", pa.decimal128(20, 4)),
        ("big", pa.decimal128(38, 10)),
        ("s", pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))])),
        ("m", pa.map_(pa.string(), pa.float64())),
        ("bin", pa.binary()),
        ("flag", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
    ])
    t = lakefmt.create_table(str(tmp_path), schema, partition_by=["day"])
    ts = datetime.datetime(2026, 3, 8, 6, 59, 59, 123456, tzinfo=datetime.UTC)
    t.append(pa.table({
        "id": [1, 2, 3],
        "ts": [ts, None, ts + datetime.timedelta(hours=1)],
        "ntz": [datetime.datetime(2026, 1, 1, 12), None, datetime.datetime(1900, 1, 1)],
        "ms": [ts.replace(microsecond=123000), None, None],
        "day": [datetime.date(2026, 1, 1), datetime.date(2026, 1, 2), None],
        "dec": [decimal.Decimal("-12345.6789"), None, decimal.Decimal("0.0001")],
        "big": [decimal.Decimal("1234567890123456789012345678.0123456789"), None, decimal.Decimal(0)],
        "s": [{"x": 1, "y": ["a", None]}, None, {"x": None, "y": None}],
        "m": [[("a", 1.5), ("b", None)], None, []],
        "bin": [b"\x00\xff", None, b""],
        "flag": [True, None, False],
        "i8": [-128, None, 127],
        "i16": [-32768, None, 32767],
    }, schema=schema))
    _same(pyspark_lakefmt.read(spark, str(tmp_path)), t.to_arrow())
    _same(pyspark_lakefmt.read(spark, str(tmp_path)).where("day = '2026-01-02'"),
          t.scan(filter="day = '2026-01-02'").to_arrow())


def test_read_options_tag_as_of_and_view(spark: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path), pa.schema([("id", pa.int64())]))
    first = t.append(pa.table({"id": [1, 2]}))
    assert first is not None
    t.create_tag("v1", first.id)
    t.append(pa.table({"id": [3]}))
    uri = str(tmp_path)
    assert sorted(r.id for r in pyspark_lakefmt.read(spark, uri, tag="v1").collect()) == [1, 2]
    assert pyspark_lakefmt.read(spark, uri, timestampAsOf=str(first.time_millis)).count() == 2
    assert pyspark_lakefmt.read(spark, uri, VERSIONASOF=first.id).count() == 2
    pyspark_lakefmt.create_view(spark, "native_view_t", uri)
    assert spark.sql("SELECT sum(id) AS s FROM native_view_t").collect()[0].s == 6
    with pytest.raises(lakefmt.UnknownOptionError, match="snapshotIdd"):
        pyspark_lakefmt.read(spark, uri, snapshotIdd=1)
    with pytest.raises(lakefmt.InvalidOptionError, match="give one"):
        pyspark_lakefmt.read(spark, uri, snapshotId=1, tag="v1")


def test_types_spark_cannot_read_are_named(spark: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path), pa.schema([("id", pa.int64()), ("u", pa.uint16())]))
    t.append(pa.table({"id": [1, 2], "u": pa.array([7, 65535], pa.uint16())}))
    with pytest.raises(lakefmt.UnsupportedTypeError, match="column u holds uint16"):
        pyspark_lakefmt.read(spark, str(tmp_path))

