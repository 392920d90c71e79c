"""Overwrite by a condition on a data column (issue 36): ``Table.overwrite(data, where="x < 0.5")`` and
``write_table(..., mode="overwrite", predicate=...)`` delete the rows the condition selects and add the new rows in
one snapshot; new rows outside the condition are refused (Delta's replaceWhere); a crash or conflict leaves the
table as it was. Also ``write_table``'s deltalake modes ``error`` and ``ignore``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt
from lakefmt.errors import (
    InvalidOptionError,
    InvalidPartitionError,
    InvalidPredicateError,
    RewriteConflictError,
    TableAlreadyExistsError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("dt", pa.string())])


def rows(ids: list[int], xs: list[float | None], dt: str = "a") -> pa.Table:
    return pa.table({"id": ids, "x": xs, "dt": [dt] * len(ids)}, schema=SCHEMA)


def content(t: lakefmt.Table) -> list[tuple[Any, ...]]:
    d = t.to_arrow().to_pydict()
    return sorted(zip(d["id"], d["x"], d["dt"], strict=True), key=repr)


def test_overwrite_where_a_data_column_replaces_those_rows_in_one_commit(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    t.append(rows([1, 2, 3], [0.1, 0.7, None]))
    t.append(rows([4, 5], [0.2, 0.9], "b"))
    before = t.version()
    snap = t.overwrite(rows([10, 11], [0.3, 0.4], "b"), where="x < 0.5")
    assert snap is not None and snap.id == before + 1  # one snapshot
    # rows 1 (0.1) and 4 (0.2) replaced; 3 (x null: the condition is null, not true) stays, as in DELETE
    assert content(t) == sorted([(2, 0.7, "a"), (3, None, "a"), (5, 0.9, "b"), (10, 0.3, "b"), (11, 0.4, "b")],
                                key=repr)
    (h,) = t.history(limit=1)
    assert h["operation"] == "OVERWRITE" and h["commit_kind"] == "OVERWRITE"
    assert h["operation_parameters"] == {"mode": "overwrite", "predicate": "x < 0.5"}
    # the snapshot before still reads as it was (time travel)
    assert len(t.to_arrow(snapshot_id=before)) == 5


def test_new_rows_outside_the_condition_are_refused(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows([1, 2], [0.1, 0.7]))
    files = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet"))
    for bad in ([0.6], [None]):  # false, and null: neither is true
        with pytest.raises(InvalidPartitionError, match=r"1 row\(s\) for which that is not true"):
            t.overwrite(rows([9], bad), where="x < 0.5")
    assert t.version() == 1 and content(t) == [(1, 0.1, "a"), (2, 0.7, "a")]
    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet")) == files  # nothing left behind


def test_write_table_predicate_and_pyarrow_expression(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lakefmt.write_table(uri, rows([1, 2, 3], [0.1, 0.7, 0.2]))
    t = lakefmt.write_table(uri, rows([7], [0.0]), mode="overwrite", predicate="x < 0.5")
    assert content(t) == [(2, 0.7, "a"), (7, 0.0, "a")]
    t.overwrite(rows([8], [0.8]), where=pc.field("x") > 0.5)
    assert content(t) == [(7, 0.0, "a"), (8, 0.8, "a")]
    # nothing matches and nothing to add: no snapshot
    assert t.overwrite(rows([], []), where="x > 100") is None
    with pytest.raises(InvalidOptionError, match="needs mode='overwrite'"):
        lakefmt.write_table(uri, rows([1], [0.1]), predicate="x < 0.5")


def test_partition_only_condition_keeps_replacing_whole_partitions(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    t.append(rows([1], [0.1], "a"))
    t.append(rows([2], [0.2], "b"))
    t.overwrite(rows([3], [0.3], "b"), where="dt = 'b'")
    assert content(t) == [(1, 0.1, "a"), (3, 0.3, "b")]
    with pytest.raises(InvalidPartitionError, match="outside"):
        t.overwrite(rows([4], [0.4], "a"), where="dt = 'b'")


def test_schema_mode_merge_with_a_data_condition(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows([1, 2], [0.1, 0.7]))
    wider = rows([5], [0.2]).append_column("note", pa.array(["new"]))
    t.overwrite(wider, where="x < 0.5", schema_mode="merge")
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "x": 0.7, "dt": "a", "note": None}, {"id": 5, "x": 0.2, "dt": "a", "note": "new"}]


def test_tables_with_deletion_vectors_refuse_it_before_writing(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"write.delete.mode": "merge-on-read"})
    t.append(rows([1], [0.1]))
    with pytest.raises(InvalidPredicateError, match="not supported on a table with deletion vectors"):
        t.overwrite(rows([2], [0.2]), where="x < 0.5")
    assert t.version() == 1


def test_a_concurrent_rewrite_is_a_conflict_and_nothing_lands(tmp_path: Path, monkeypatch: Any) -> None:
    from lakefmt.rewrite import replace

    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows([1, 2], [0.1, 0.7]))
    real = replace.delete_in_files

    def racing(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        lakefmt.open_table(t.uri).delete("id = 2")  # another writer rewrites the same file meanwhile
        return out

    monkeypatch.setattr(replace, "delete_in_files", racing)
    with pytest.raises(RewriteConflictError):
        t.overwrite(rows([9], [0.3]), where="x < 0.5")
    assert content(t) == [(1, 0.1, "a")]  # the other delete landed, this overwrite did not
    referenced = {f.path for s in t.snapshots() for f in t.files(snapshot_id=s.id)}
    on_disk = {str(p.relative_to(tmp_path / "t")) for p in (tmp_path / "t").rglob("*.parquet")}
    assert on_disk == referenced  # its rewritten file and its new rows were removed


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, None]), max_size=8),
       new=st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.45]), max_size=4),
       cut=st.sampled_from([0.3, 0.5, 0.8]))
def test_result_is_kept_rows_plus_new_rows(tmp_path: Path, old: list[Any], new: list[float], cut: float) -> None:
    uri = str(tmp_path / f"t{abs(hash((tuple(map(repr, old)), tuple(new), cut)))}")  # a new table per example
    t = lakefmt.create_table(uri, SCHEMA)
    if old:
        t.append(rows(list(range(len(old))), old))
    new = [v for v in new if v < cut]
    t.overwrite(rows([100 + i for i in range(len(new))], new), where=f"x < {cut}")
    kept = [(i, v, "a") for i, v in enumerate(old) if v is None or not v < cut]
    assert content(t) == sorted(kept + [(100 + i, v, "a") for i, v in enumerate(new)], key=repr)


def test_write_table_mode_error_and_ignore(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = lakefmt.write_table(uri, rows([1], [0.1]), mode="error")  # no table yet: created and written
    assert content(t) == [(1, 0.1, "a")]
    with pytest.raises(TableAlreadyExistsError, match="mode='error'"):
        lakefmt.write_table(uri, rows([2], [0.2]), mode="error")
    again = lakefmt.write_table(uri, rows([2], [0.2]), mode="ignore")
    assert content(again) == [(1, 0.1, "a")] and again.version() == 1
    fresh = lakefmt.write_table(str(tmp_path / "u"), rows([3], [0.3]), mode="ignore")
    assert content(fresh) == [(3, 0.3, "a")]
    with pytest.raises(InvalidOptionError, match="'append', 'overwrite', 'error', 'ignore'"):
        lakefmt.write_table(uri, rows([2], [0.2]), mode="upsert")  # type: ignore[arg-type]


@pytest.mark.parametrize("partition_by", [None, ["dt"]])
def test_a_condition_on_no_column(tmp_path: Path, partition_by: list[str] | None) -> None:
    """Review: ``where="TRUE"`` on an unpartitioned table was a raw KeyError, ``"FALSE"`` spoke of partitions: TRUE
    (``NOT FALSE``) replaces the whole table; FALSE replaces no row and admits none, so it is refused."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by)
    t.append(rows([1], [0.1]))
    t.overwrite(rows([2], [0.2], "b"), where="TRUE")
    assert content(t) == [(2, 0.2, "b")]
    t.overwrite(rows([3], [0.3]), where="NOT FALSE")
    assert content(t) == [(3, 0.3, "a")]
    for where in ("FALSE", "TRUE AND FALSE"):
        with pytest.raises(InvalidPartitionError, match=f"overwrite where {where}: the condition is not true for any"):
            t.overwrite(rows([4], [0.4]), where=where)
    assert content(t) == [(3, 0.3, "a")] and t.version() == 3


@pytest.mark.parametrize(
    ("predicate", "data", "error"),
    [("x > ", rows([1], [0.1]), InvalidPredicateError), ("x > 0.5", rows([1], [0.1]), InvalidPartitionError),
     ("dt = 'b'", rows([1], [0.1]), InvalidPartitionError), ("FALSE", rows([], []), InvalidPartitionError),
     ("nope = 1", rows([1], [0.1]), InvalidPredicateError)],
)
def test_write_table_refused_creates_no_table(tmp_path: Path, predicate: str, data: pa.Table, error: type) -> None:
    """Review: a refused predicate or row left a new table behind (its schema), and a later ``mode="error"`` write
    then said a table exists, though the refusal said nothing was committed."""
    uri = str(tmp_path / "t")
    with pytest.raises(error):
        lakefmt.write_table(uri, data, mode="overwrite", predicate=predicate, partition_by=["dt"])
    with pytest.raises(lakefmt.errors.NotATableError):
        lakefmt.open_table(uri)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*"))
    assert content(lakefmt.write_table(uri, rows([2], [0.9]), mode="error")) == [(2, 0.9, "a")]
    stream = pa.RecordBatchReader.from_batches(SCHEMA, rows([3], [0.7]).to_batches())
    assert content(lakefmt.write_table(str(tmp_path / "s"), stream, mode="overwrite", predicate="x > 0.5")) == [
        (3, 0.7, "a")]
