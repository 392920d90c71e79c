"""Overwrite scopes in the core: ``Table.overwrite(data, where=...)`` (a predicate on partition columns),
``dynamic=True`` (the partitions written) and the committer's own check of what tasks wrote; each replaces
exactly what it names, refuses rows outside it before writing anything, and conflicts with a concurrent commit
that changed what it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import file_listing

import lakefmt
from lakefmt import hooks
from lakefmt.errors import CommitConflictError, InvalidPartitionError, InvalidPredicateError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("country", pa.string())])


def rows(ids: list[int], dt: str | None, country: str = "FR") -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids), "country": [country] * len(ids)}, schema=SCHEMA)


def content(t: lakefmt.Table) -> list[tuple[int, str | None, str]]:
    return sorted((r["id"], r["dt"], r["country"]) for r in t.to_arrow().to_pylist())


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt", "country"])
    t.append(pa.concat_tables([rows([1], "2026-10-31"), rows([2], "2026-11-01"), rows([3], "2026-11-01", "DE"),
                               rows([4], "2026-11-02"), rows([5], None)]))
    return t


def test_where_replaces_exactly_the_matching_partitions(table: lakefmt.Table) -> None:
    snap = table.overwrite(rows([20], "2026-11-01"), where="dt = '2026-11-01'")
    assert snap is not None and snap.commit_kind is lakefmt.CommitKind.OVERWRITE and snap.delta_record_count == -1
    assert [r[0] for r in content(table)] == [1, 4, 5, 20]
    table.overwrite(rows([30], "2026-11-02", "DE"), where="dt >= '2026-11-01' AND dt < '2026-12-01' AND country = 'DE'")
    assert [r[0] for r in content(table)] == [1, 4, 5, 20, 30]
    table.overwrite(pa.concat_tables([rows([40], "2026-10-31"), rows([41], "2026-11-02")]),
                    where="dt IN ('2026-10-31', '2026-11-02')")
    assert [r[0] for r in content(table)] == [5, 20, 40, 41]
    table.overwrite(rows([50], None), where="dt IS NULL")
    assert [r[0] for r in content(table)] == [20, 40, 41, 50]
    table.overwrite(rows([], "x"), where="country = 'FR' AND dt = '2026-11-01'")  # no data: the rows go
    assert [r[0] for r in content(table)] == [40, 41, 50]
    assert [r["id"] for r in table.to_arrow(snapshot_id=1).to_pylist()] == [1, 2, 3, 4, 5]  # history intact


def test_a_predicate_on_a_data_column_is_refused_and_nothing_is_written(table: lakefmt.Table) -> None:
    before = file_listing(table.io)
    # a committer's scope replaces whole files: it refuses a data column (Table.overwrite replaces those rows
    # instead: tests/integration/test_replace_where.py)
    with pytest.raises(InvalidPredicateError, match="'id > 3' refers to id, which is not a partition column"):
        table.overwrite_scope(where="id > 3")
    with pytest.raises(InvalidPartitionError, match="not true"):  # row 2 does not satisfy id > 3
        table.overwrite(rows([2], "2026-11-01"), where="id > 3")
    with pytest.raises(InvalidPredicateError, match="expected a value"):
        table.overwrite(rows([9], "2026-11-01"), where="dt =")
    assert file_listing(table.io) == before


def test_a_row_outside_the_scope_fails_before_anything_is_committed_and_leaves_no_file(tmp_path: Path) -> None:
    # write.buffer-size 1b: every batch is flushed to a file at once, so the first (inside) batch is on disk when
    # the second (outside) one is refused; the writer deletes it
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options={"write.buffer-size": "1b"})
    t.append(rows([1], "a"))
    before, snaps = file_listing(t.io), len(t.snapshots())
    flushed: list[bool] = []

    def batches() -> Any:
        yield rows([2], "a")
        flushed.append(len(file_listing(t.io)) > len(before))  # the inside rows are in a file by now
        yield rows([3], "b")

    for scope in ({"where": "dt = 'a'"}, {"partition": {"dt": "a"}}):
        with pytest.raises(InvalidPartitionError, match=r"has 1 row\(s\) outside it \(the first in partition "
                           r"\{'dt': 'b'\}\); nothing was committed"):
            t.overwrite(batches(), **scope)
        assert file_listing(t.io) == before and len(t.snapshots()) == snaps
    assert flushed == [True, True]


def test_the_committer_checks_what_tasks_wrote(table: lakefmt.Table) -> None:
    """A task that did not check its rows: the committer refuses its files by their partition values."""
    writer = table.new_writer()
    writer.write(pa.concat_tables([rows([7], "2026-11-01"), rows([8], "2026-11-09")]))
    message = writer.prepare_commit()
    latest = table.latest_snapshot()
    with pytest.raises(InvalidPartitionError, match=r"has 1 file\(s\) outside it \(the first in partition "
                       r"\{'dt': '2026-11-09', 'country': 'FR'\}\)"):
        table.new_committer().overwrite(message, identifier=0, where="dt = '2026-11-01'")
    assert table.latest_snapshot() == latest


def test_dynamic_replaces_exactly_the_partitions_written(table: lakefmt.Table) -> None:
    table.overwrite(pa.concat_tables([rows([20], "2026-11-01"), rows([21], None)]), dynamic=True)
    # 2026-11-01/FR and null/FR replaced; 2026-11-01/DE (another partition) and the others kept
    assert content(table) == [(1, "2026-10-31", "FR"), (3, "2026-11-01", "DE"), (4, "2026-11-02", "FR"),
                              (20, "2026-11-01", "FR"), (21, None, "FR")]
    assert table.overwrite(rows([], "2026-10-31"), dynamic=True) is None  # no rows: no partition, no commit
    assert len(content(table)) == 5


def test_dynamic_on_an_unpartitioned_table_replaces_the_table(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "u"), SCHEMA)
    t.append(rows([1, 2], "a"))
    t.overwrite(rows([3], "b"), dynamic=True)
    assert content(t) == [(3, "b", "FR")]


@pytest.mark.parametrize(("scope", "other_dt", "conflicts"), [
    ({"dynamic": True}, "2026-11-01", True),
    ({"dynamic": True}, "2026-11-02", False),
    ({"where": "dt >= '2026-11-01'"}, "2026-11-05", True),
    ({"where": "dt >= '2026-11-01'"}, "2026-10-01", False),
])
def test_a_concurrent_commit_into_the_scope_is_a_conflict(
    table: lakefmt.Table, scope: dict[str, Any], other_dt: str, conflicts: bool
) -> None:
    """An append lands between the overwrite's read of the latest snapshot and its publish: if it added files
    to what the overwrite replaces, the overwrite fails and publishes nothing; else it lands after it."""
    other = lakefmt.open_table(table.uri)
    fired: list[str] = []

    def race(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and not fired:
            fired.append(phase)
            other.append(rows([99], other_dt))

    remove = hooks.add_publish_hook(race)
    try:
        if conflicts:
            with pytest.raises(CommitConflictError, match="a concurrent commit changed"):
                table.overwrite(rows([20], "2026-11-01"), **scope)
            assert [s.commit_kind for s in table.snapshots()][-1] is lakefmt.CommitKind.APPEND
        else:
            table.overwrite(rows([20], "2026-11-01"), **scope)
            assert 99 in [r[0] for r in content(table)] and 20 in [r[0] for r in content(table)]
    finally:
        remove()
