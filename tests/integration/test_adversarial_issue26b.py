"""Issue 26 attacked again (second pass): reads of snapshots that expire under engines, hand-made hints, SQL text
filters, history and one-line writes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import SnapshotNotFoundError

SCHEMA = pa.schema([("id", pa.int64())])
OPTS = {"write-only": "true"}  # one snapshot per commit, and nothing expires unless asked


def _table(uri: str, commits: int) -> lakefmt.Table:
    t = lakefmt.create_table(uri, SCHEMA, options=OPTS)
    for i in range(commits):  # each overwrite removes the previous file: expiring a snapshot deletes its file
        t.overwrite(pa.table({"id": [i]}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("engine", ["duckdb", "polars", "dataset"])
def test_an_engine_reading_a_scan_whose_snapshot_expired_names_it(tmp_path: Any, engine: str) -> None:
    t = _table(str(tmp_path / "t"), 5)
    scan = t.scan(snapshot_id=2)
    assert len(scan.files()) == 1  # planned: the file of snapshot 2, which snapshot 3 removed
    t.expire_snapshots(retain_max=1)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 has expired"):
        if engine == "duckdb":
            scan.to_duckdb().fetchall()
        elif engine == "polars":
            scan.to_polars().collect()
        else:
            scan.to_dataset().to_table()


def _filter_table(tmp_path: Any) -> lakefmt.Table:
    import datetime
    from decimal import Decimal

    schema = pa.schema([
        ("id", pa.int64()), ("date", pa.date32()), ("amount", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us")), ("tz", pa.timestamp("us", tz="UTC")),
    ])
    rows = [
        {"id": i, "date": datetime.date(2026, 1, i), "amount": Decimal(f"{i}.50"),
         "ts": datetime.datetime(2026, 1, i, 12), "tz": datetime.datetime(2026, 1, i, 12, tzinfo=datetime.UTC)}
        for i in range(1, 5)
    ]
    t = lakefmt.create_table(str(tmp_path / "f"), schema, options=OPTS)
    t.append(pa.Table.from_pylist(rows, schema=schema))
    t.append(pa.Table.from_pylist([{"id": 9}], schema=schema))  # nulls elsewhere
    return t


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("date = '2026-01-02'", [2]),  # a column named date, as Spark and Delta take it
        ("date >= DATE '2026-01-03'", [3, 4]),
        ("date IS NULL", [9]),
        ("date IN (DATE '2026-01-01', '2026-01-04')", [1, 4]),
        ("DATE '2026-01-02' = date", [2]),
        ("amount > 2", [2, 3, 4]),  # a whole number against a decimal column
        ("amount BETWEEN 1 AND 3", [1, 2]),
        ("amount IN (1.5, 4)", [1]),
        ("ts > TIMESTAMP '2026-01-02 12:00:00'", [3, 4]),
        ("ts = TIMESTAMP '2026-01-01T12:00:00'", [1]),
        ("tz <= TIMESTAMP '2026-01-02 12:00:00+00:00'", [1, 2]),
    ],
)
def test_sql_text_filters_spark_users_type(tmp_path: Any, text: str, ids: list[int]) -> None:
    t = _filter_table(tmp_path)
    got = sorted(t.scan(filter=text).to_arrow().column("id").to_pylist())
    assert got == ids
    assert t.scan(filter=text).count() == len(ids)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tz > '2026-01-02 12:00:00'", r"column tz of type .*: it has a time zone: give the value one"),
        ("tz > TIMESTAMP '2026-01-02 12:00:00'", r"column tz of type .*: it has a time zone: give the value one"),
        ("ts > TIMESTAMP '2026-13-01'", r"expected a timestamp"),
        ("date = TIMESTAMP '2026-01-02 05:00:00'", r"cannot be compared with column date"),  # never truncated
        ("id = \u0661", "no column '\u0661'"),  # a digit of another script is not a number in SQL
    ],
)
def test_sql_text_filters_refused_with_a_reason(tmp_path: Any, text: str, message: str) -> None:
    from lakefmt.errors import InvalidPredicateError

    t = _filter_table(tmp_path)
    with pytest.raises(InvalidPredicateError, match=message):
        t.scan(filter=text).to_arrow()


@pytest.mark.parametrize("how", ["write_table", "create_table", "append"])
def test_a_polars_object_column_is_refused_not_stored_as_addresses(tmp_path: Any, how: str) -> None:
    import polars as pl

    from lakefmt.errors import SchemaMismatchError

    frame = pl.DataFrame({"id": [1], "o": pl.Series([object()], dtype=pl.Object)})
    uri = str(tmp_path / "t")
    with pytest.raises(SchemaMismatchError, match="column 'o' has Polars type Object"):
        if how == "write_table":
            lakefmt.write_table(uri, frame)
        elif how == "create_table":
            lakefmt.create_table(uri, frame)
        else:
            t = lakefmt.create_table(uri, pa.schema([("id", pa.int64()), ("o", pa.binary(8))]))
            t.append(frame)
    if how == "append":
        assert t.to_arrow().num_rows == 0


class _Stop(BaseException):
    pass


def test_expire_with_default_arguments_after_an_interrupted_run_agrees_with_the_listing(tmp_path: Any) -> None:
    from lakefmt.maintenance.expire import apply_expiration, plan_expiration
    from lakefmt.maintenance.report import FileClass
    from lakefmt.meta.store import MetaStore

    t = _table(str(tmp_path / "t"), 8)
    store = MetaStore(t.io)
    plan = plan_expiration(store, retain_max=3)
    data = sum(d.kind is FileClass.DATA for d in plan.deletions)

    def progress(done: int, total: int, path: str) -> None:
        if done == data:
            raise _Stop

    with pytest.raises(_Stop):
        apply_expiration(t.io, store, plan, progress=progress)
    fresh = lakefmt.open_table(t.uri)
    assert [s.id for s in fresh.snapshots()] == [6, 7, 8]
    report = fresh.expire_snapshots()  # the defaults keep at least 10, but 1..5 are half-expired: finished
    assert report.kept_snapshots == (6, 8) and report.expired_snapshots == [1, 2, 3, 4, 5]
    assert MetaStore(t.io).snapshot_ids() == [6, 7, 8]


@pytest.mark.parametrize(("names", "message"), [(["a", "A"], "differ only in case"), (["id", " "], "name is empty")])
def test_a_new_table_refuses_names_spark_cannot_tell_apart(tmp_path: Any, names: list[str], message: str) -> None:
    data = pa.table({n: [1] for n in names})
    uri = str(tmp_path / "t")
    for make in (lambda: lakefmt.write_table(uri, data), lambda: lakefmt.create_table(uri, data.schema)):
        with pytest.raises(lakefmt.UnsupportedTypeError, match=message):
            make()
        assert not (tmp_path / "t").exists()


def test_a_float16_filter_says_pyarrow_cannot_compare_them(tmp_path: Any) -> None:
    """A pyarrow expression on a half-precision column is refused with the fix; SQL text compares it as doubles
    (docs/filters.md: a floating-point column compares as doubles), which is exact."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("h", pa.float16())]))
    with pytest.raises(lakefmt.InvalidPredicateError, match="no comparison of half-precision"):
        t.scan(filter=pc.field("h") > 1)
    assert t.scan(filter="h > 1").to_arrow().num_rows == 0
