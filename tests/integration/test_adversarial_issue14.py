"""Issue 14 attacked from outside, in the core: each test is an input a hostile or careless user gives, which once
made lakefmt replace more than the user named, or name another table, silently."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import InvalidLocationError, InvalidPartitionError, InvalidPredicateError
from lakefmt.spec import TableSchema
from lakefmt.spec.scope import OverwriteScope

SCHEMA = pa.schema([("id", pa.int64()), ("h", pa.string())])


def content(t: lakefmt.Table) -> list[tuple[int, str]]:
    return sorted((r["id"], r["h"]) for r in t.to_arrow().to_pylist())


@pytest.fixture
def hours(tmp_path: Path) -> lakefmt.Table:
    """Partitioned by a string column holding numbers: '9', '10', '11'."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["h"])
    t.append(pa.table({"id": [9, 10, 11], "h": ["9", "10", "11"]}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("where", ["h > 10", "h >= 10.5", "h IN (10, 11)", "h = 11", "10 < h", "h BETWEEN 10 AND 12"])
def test_a_number_against_a_text_partition_column_is_refused(hours: lakefmt.Table, where: str) -> None:
    # Compared as text, '9' > '10': "h > 10" replaced partition 9 too (SQL compares numbers). Never guess.
    before = content(hours)
    with pytest.raises(InvalidPredicateError, match=r"column h is text: quote the value"):
        hours.overwrite(pa.table({"id": [99], "h": ["11"]}, schema=SCHEMA), where=where)
    assert content(hours) == before
    assert content(hours) == [(9, "9"), (10, "10"), (11, "11")]


def test_a_date_against_a_text_partition_column_is_refused(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, partition_by=["dt"])
    t.append(pa.table({"id": [1, 2], "dt": ["2026-1-5", "2026-02-01"]}, schema=schema))
    with pytest.raises(InvalidPredicateError, match=r"column dt is text: quote the value \('2026-02-01'\)"):
        t.overwrite(pa.table({"id": [3], "dt": ["2026-02-01"]}, schema=schema), where="dt >= DATE '2026-02-01'")
    # quoted, the comparison is the text one the user asked for
    t.overwrite(pa.table({"id": [3], "dt": ["2026-02-01"]}, schema=schema), where="dt = '2026-02-01'")
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 3]


def test_text_against_a_number_column_is_still_cast_to_the_column(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, partition_by=["n"])
    t.append(pa.table({"id": [9, 10], "n": [9, 10]}, schema=schema))
    t.overwrite(pa.table({"id": [20], "n": [10]}, schema=schema), where="n >= '10'")  # 10 as a number, as SQL
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [9, 20]


def test_an_empty_partition_is_refused_not_the_whole_table(hours: lakefmt.Table) -> None:
    # ``partition={}`` (say, a dict filtered down to nothing) used to replace the whole table
    with pytest.raises(InvalidPartitionError, match="an empty partition"):
        hours.overwrite(pa.table({"id": [99], "h": ["11"]}, schema=SCHEMA), partition={})
    with pytest.raises(InvalidPartitionError, match="an empty partition"):
        hours.overwrite_scope(partition={})
    writer = hours.new_writer()
    with writer:
        writer.write(pa.table({"id": [99], "h": ["11"]}, schema=SCHEMA))
        message = writer.prepare_commit()
    with pytest.raises(InvalidPartitionError, match="an empty partition"):
        hours.new_committer().overwrite([message], 0, partition={})
    assert content(hours) == [(9, "9"), (10, "10"), (11, "11")]
    hours.overwrite(pa.table({"id": [99], "h": ["11"]}, schema=SCHEMA))  # nothing given: the whole table
    assert content(hours) == [(99, "11")]


@pytest.mark.parametrize(
    "uri",
    [
        " /data/t", "/data/t ", "\t/data/t",
        "C:\\data\\t", "C:/data/t", "d:\\t", "\\\\server\\share\\t", "file:C:/data/t",
    ],
)
def test_a_location_that_would_be_another_folder_is_refused(uri: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # ' /data/t' was the folder ' /data/t' under the working folder; 'C:\data\t' a folder named so in it
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidLocationError):
        lakefmt.normalize_uri(uri)
    with pytest.raises(InvalidLocationError):
        lakefmt.create_table(uri, SCHEMA)
    assert list(tmp_path.iterdir()) == []


def test_a_scheme_in_capitals_is_the_same_table() -> None:
    assert lakefmt.normalize_uri("S3://bucket/t/") == lakefmt.normalize_uri("s3://bucket/t") == "s3://bucket/t"
    assert lakefmt.normalize_uri("MEMORY://t") == "memory://t"


# -- predicates and scopes at scale: a generated replaceWhere, a backfill's dynamic overwrite ---------------------
def test_long_generated_predicates_bind_and_match(tmp_path: Path) -> None:
    # an IN list of 20,000 values was a 20,000-deep chain of ORs (a segfault in Arrow); 3,000 ORs a RecursionError
    table = TableSchema(0, SCHEMA, ("h",))
    days = [f"d{i}" for i in range(20_000)]
    parts = pa.StructArray.from_arrays([pa.array([*days, None])], names=["h"])
    scope = OverwriteScope.bind(table, where="h IN (" + ", ".join(f"'{d}'" for d in days) + ")")
    assert len(scope.matching(parts)) == 20_000
    scope = pickle.loads(pickle.dumps(OverwriteScope.bind(table, where="h NOT IN ('d1', 'd2')")))
    assert len(scope.matching(parts)) == 19_998  # SQL: NULL NOT IN (...) is unknown, so not matched
    scope = OverwriteScope.bind(table, where=" OR ".join(f"h = '{d}'" for d in days[:3000]))
    assert len(scope.matching(parts)) == 3000
    scope = OverwriteScope.bind(table, where=" AND ".join(f"h != '{d}'" for d in days[:3000]))
    assert len(scope.matching(parts)) == 17_000
    with pytest.raises(InvalidPredicateError, match="nested too deeply"):
        OverwriteScope.bind(table, where="(" * 5000 + "h = 'a'" + ")" * 5000)
    with pytest.raises(InvalidPredicateError, match="nested too deeply"):
        OverwriteScope.bind(table, where="NOT " * 5000 + "h = 'a'")


def test_a_dynamic_overwrite_of_many_partitions_replaces_exactly_those() -> None:
    # one equality per partition, chained: a backfill of 20,000 partitions crashed the committing process
    one = TableSchema(0, SCHEMA, ("h",))
    written = pa.StructArray.from_arrays([pa.array([f"d{i}" for i in range(20_000)] + [None])], names=["h"])
    live = pa.StructArray.from_arrays([pa.array([f"d{i}" for i in range(0, 40_000, 2)] + [None, "x"])], names=["h"])
    scope = OverwriteScope.bind(one, dynamic=True).for_written(written)
    assert len(scope.matching(live)) == 10_001  # d0, d2, ... d19998 and the null partition; never x
    two = TableSchema(0, pa.schema([("id", pa.int64()), ("dt", pa.string()), ("n", pa.int32())]), ("dt", "n"))
    written = pa.StructArray.from_arrays(
        [
            pa.array([f"d{i // 3}" for i in range(6000)] + [None]),
            pa.array([i % 3 for i in range(6000)] + [None], pa.int32()),
        ],
        names=["dt", "n"],
    )
    live = pa.StructArray.from_arrays(
        [pa.array(["d0", "d0", "d1999", "d2000", None, None]), pa.array([0, 3, 2, 0, None, 1], pa.int32())],
        names=["dt", "n"],
    )
    scope = OverwriteScope.bind(two, dynamic=True).for_written(written)
    assert scope.matching(live).to_pylist() == [0, 2, 4]


def test_a_predicate_of_too_many_tests_is_refused_not_a_crash() -> None:
    table = TableSchema(0, pa.schema([("id", pa.int64()), ("h", pa.string()), ("n", pa.int64())]), ("h", "n"))
    where = " OR ".join(f"(h = 'd{i}' AND n = {i})" for i in range(12_000))  # no IN can say this
    with pytest.raises(InvalidPredicateError, match="more than 2000 tests; list the values with IN"):
        OverwriteScope.bind(table, where=where)
