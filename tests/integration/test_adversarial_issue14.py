"""Issue 14 attacked from outside, in the core: each test is an input a hostile or careless user gives, which once
made lakefmt replace more than the user named, or name another table, silently."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import InvalidLocationError, InvalidPartitionError, InvalidPredicateError

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
    [" /data/t", "/data/t ", "\t/data/t", "C:\\data\\t", "C:/data/t", "d:\\t", "\\\\server\\share\\t"],
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
