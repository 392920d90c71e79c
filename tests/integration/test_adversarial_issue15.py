"""Adversarial tests of issue 15 (compaction and row-level delete), each written from a finding: a delete removes
exactly the rows its filter is true for, as pyarrow evaluates that filter on the rows themselves."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt

ZEROS = pa.schema([("id", pa.int64()), ("f", pa.float64())])


@pytest.mark.parametrize(
    ("files", "literal"),
    [([[0.0, 0.0]], -0.0), ([[-0.0], [0.0]], 0.0), ([[-0.0], [0.0]], -0.0)],
    ids=["zeros-isin-minus-zero", "isin-zero", "isin-minus-zero"],
)
def test_a_delete_by_isin_tells_zero_from_minus_zero_as_pyarrow_does(
    tmp_path: Path, files: list[list[float]], literal: float
) -> None:
    """Found by attack: Parquet writes a column of zeros with min -0.0 and max +0.0 (its rule for signed zeros), so
    min == max and the proof took the file as ``f == -0.0``; ``is_in`` tells 0.0 from -0.0, so a file of 0.0 was
    dropped unread by ``f.isin([-0.0])`` (rows lost), and one of 0.0 skipped by ``f.isin([0.0])`` (rows left)."""
    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    n = 0
    for values in files:
        t.append(pa.table({"id": list(range(n, n + len(values))), "f": values}, schema=ZEROS))
        n += len(values)
    flt = pc.field("f").isin([literal])
    want = sorted(t.to_arrow().filter(~flt | flt.is_null()).column("id").to_pylist())
    t.delete(flt)
    assert sorted(t.to_arrow().column("id").to_pylist()) == want


@pytest.mark.parametrize("sort_by", [5, [1], ["id", None], {"id": 1}.values()])
def test_compaction_refuses_a_sort_by_that_names_no_columns(tmp_path: Path, sort_by: object) -> None:
    """Found by attack: ``sort_by=5`` failed with "'int' object is not iterable" from deep inside planning."""
    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    for i in range(3):
        t.append(pa.table({"id": [i], "f": [0.5]}, schema=ZEROS))
    latest = t.latest_snapshot()
    with pytest.raises(TypeError, match="sort_by must be a column name or a list of column names"):
        t.compact(min_files=2, sort_by=sort_by)  # type: ignore[arg-type]
    assert t.latest_snapshot() == latest


def test_a_compaction_racing_a_dropped_column_replans_instead_of_raising(tmp_path: Path) -> None:
    """Found by attack: a column dropped while a compaction rewrote its files made the commit fail with a
    SchemaConflictError, where a compaction promises never to raise a conflict (it re-plans once): its files held
    the dropped column. Re-planned, the files are written again under the new schema and the rows are the same."""
    from lakefmt import commit_compaction, plan_compaction, rewrite_group

    schema = pa.schema([("id", pa.int64()), ("w", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    for i in range(4):
        t.append(pa.table({"id": [i], "w": [str(i)]}, schema=schema))
    plan = plan_compaction(t, min_files=2)
    messages = [rewrite_group(t, g) for g in plan.groups]
    with lakefmt.open_table(t.uri).update_schema() as update:  # another process drops w meanwhile
        update.drop_column("w")
    report = commit_compaction(t, plan, messages)
    assert report.snapshot is not None and report.snapshot.commit_kind is lakefmt.CommitKind.COMPACT
    assert report.replanned == [{}] and not report.given_up
    assert len(t.files()) == 1
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]
    assert t.to_arrow().column_names == ["id"]


def test_a_delete_on_a_missing_nested_field_names_the_field(tmp_path: Path) -> None:
    """Found by attack: ``pc.field("id", "x")`` (a field of a column that is no struct) was refused as "no column
    'FieldRef.Name(id'", pyarrow's reference cut in the middle."""
    from lakefmt.errors import InvalidPredicateError

    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    t.append(pa.table({"id": [1], "f": [0.5]}, schema=ZEROS))
    latest = t.latest_snapshot()
    with pytest.raises(InvalidPredicateError, match=r"no column 'id\.x';"):
        t.delete(pc.field("id", "x") == 1)
    with pytest.raises(InvalidPredicateError, match=r"no column 'nope';"):
        t.delete(pc.field("nope") == 1)
    assert t.latest_snapshot() == latest


def test_compaction_takes_numpy_integers_for_sizes_and_counts(tmp_path: Path) -> None:
    """Found by attack: ``target_file_size=np.int64(...)`` (a size computed with numpy or pandas) was refused as
    "must be a positive number of bytes"; any integer is taken, a bool, a float or a text still is not."""
    import numpy as np  # in the dev extra (through pandas): a test that must run, not skip
    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    for i in range(3):
        t.append(pa.table({"id": [i], "f": [0.5]}, schema=ZEROS))
    report = t.compact(target_file_size=np.int64(1 << 20), min_files=np.int32(2))
    assert report.rewritten_files == 3 and report.written_files == 1
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2]


@pytest.mark.parametrize(
    "how", [{}, {"sort_by": "id"}, {"parallelism": 2}], ids=["together", "sorted", "threads"]
)
def test_compaction_refuses_a_file_that_holds_other_rows_than_its_entry_says(tmp_path: Path, how: dict) -> None:
    """Found by attack: a data file replaced by hand with one of 2 rows where its manifest entry says 1 was
    compacted without a word, and the COMPACT snapshot's record count went from 6 to 7: a compaction must not change
    what the metadata says the table holds. It is refused, as a delete refuses such a file, and nothing lands."""
    import pyarrow.parquet as pq
    from helpers import file_listing

    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, partition_by=["dt"])
    for i in range(6):
        t.append(pa.table({"id": [i], "dt": ["a" if i < 3 else "b"]}, schema=schema))
    bad = sorted(f.path for f in t.files() if f.partition == {"dt": "b"})[0]
    pq.write_table(pa.table({"id": [100, 101], "dt": ["b", "b"]}, schema=schema), str(tmp_path / "t" / bad))
    listing, latest = file_listing(t.io), t.latest_snapshot()
    with pytest.raises(lakefmt.CorruptMetadataError, match=rf"{bad} does not hold the 1 rows its manifest entry says"):
        t.compact(min_files=2, **how)
    assert file_listing(t.io) == listing and t.latest_snapshot() == latest


def test_the_cli_names_a_bad_target_size_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by attack: ``--target-file-size -1`` said "argument --target-file-size: --target-file-size: '-1' is not
    a size": the option named twice, and examples without the binary units the issue's own example uses."""
    from lakefmt.cli import main

    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    with pytest.raises(SystemExit) as exited:
        main(["compact", t.uri, "--target-file-size", "-1"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.count("--target-file-size") == 1 and "'-1' is not a size" in err and "128MiB" in err


@pytest.mark.parametrize("parallelism", [0, -1, 1.5, True, "2"])
def test_a_bad_parallelism_is_a_lakefmt_error(tmp_path: Path, parallelism: object) -> None:
    """Found by attack: ``parallelism=0`` was a bare ValueError, where every other bad argument of a compaction is
    a LakefmtError (callers catch that one type); it is an InvalidOptionError (a ValueError still)."""
    from lakefmt.errors import InvalidOptionError

    t = lakefmt.create_table(str(tmp_path / "t"), ZEROS)
    t.append(pa.table({"id": [1], "f": [0.5]}, schema=ZEROS))
    with pytest.raises(InvalidOptionError, match="parallelism must be a positive whole number"):
        t.compact(parallelism=parallelism)  # type: ignore[arg-type]
