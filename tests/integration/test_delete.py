"""Row-level delete (issue 15, "Delete by predicate"): ``Table.delete(filter)`` drops files by metadata, rewrites
files where some rows match and leaves the others; SQL's rule for nulls; WriteSerializable concurrency; bad input
leaves the table unchanged; a delete whose publish may have landed never deletes its files."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt import hooks
from lakefmt.commit.kinds import RewriteProducer
from lakefmt.commit.types import CommitRequest
from lakefmt.errors import InvalidPredicateError, RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.read.files import read_entries
from lakefmt.rewrite.delete import delete_in_files, plan_delete
from lakefmt.spec import CommitKind

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("dt", pa.string())])


def rows(ids: list[int], dt: str, x: list[float | None] | None = None) -> pa.Table:
    xs = x if x is not None else [float(i) for i in ids]
    return pa.table({"id": ids, "x": xs, "dt": [dt] * len(ids)}, schema=SCHEMA)


def ids(t: lakefmt.Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def live_paths(t: lakefmt.Table) -> set[str]:
    return {f.path for f in t.files()}


def three_partitions(t: lakefmt.Table) -> None:
    t.append(rows([1, 2, 3], "a"))
    t.append(rows([4, 5, 6], "b"))
    t.append(rows([7, 8, 9], "c"))


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    three_partitions(t)
    return t


class _Compaction(RewriteProducer):
    kind = CommitKind.COMPACT

    def carries_users_unchanged(self) -> bool:
        return True


def _compact(t: lakefmt.Table, dt: str) -> None:
    """A bare compaction of one partition (its live files into one), committed as COMPACT."""
    live = t.scan(filter=pc.field("dt") == dt).entries()
    with t.new_writer() as writer:
        for batch in read_entries(t.io, live, t.table_schema()):
            writer.write(batch)
        message = writer.prepare_commit()
    request = CommitRequest(None, f"oneoff-{uuid.uuid4().hex}", 0, list(message.manifests))
    _Compaction(t.io, t._store, request, clock=time.time, rewritten=live).commit()


def _during_publish(action: Callable[[], object]) -> Callable[[], None]:
    """Run ``action`` once, just before the next commit in this process publishes (a racing writer)."""
    fired: list[bool] = []

    def race(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and not fired:
            fired.append(True)
            action()

    return hooks.add_publish_hook(race)


def test_delete_drops_rewrites_and_leaves_files(store: Any) -> None:
    """One partition matches whole (dropped by metadata: its file is not even read), one in part (rewritten), one
    not at all (its file stays); on local disk, memory and S3."""
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    three_partitions(t)
    before = {f.partition["dt"]: f.path for f in t.files()}
    plan = plan_delete(t, (pc.field("dt") == "a") | (pc.field("id") == 5))
    assert ents.paths(plan.dropped) == [before["a"]] and ents.paths(plan.candidates) == [before["b"]]
    t.io.delete(before["a"])  # proof that it is dropped unread: a read of it would fail now

    snap = t.delete((pc.field("dt") == "a") | (pc.field("id") == 5))
    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    assert snap.properties == {
        "lakefmt.operation": "delete", "lakefmt.operation.predicate": '((dt == "a") or (id == 5))'
    }
    assert snap.delta_record_count == -4 and snap.total_record_count == 5
    assert ids(t) == [4, 6, 7, 8, 9]
    after = {f.partition["dt"]: f.path for f in t.files()}
    assert set(after) == {"b", "c"} and after["c"] == before["c"] and after["b"] != before["b"]
    assert t.delete(pc.field("id") == 5) is None  # nothing matches now: no snapshot
    assert t.latest_snapshot() == snap


def test_a_file_where_nothing_matches_after_reading_is_left_alone(table: lakefmt.Table) -> None:
    """``id == 5`` cannot be ruled out for partition b by min/max [4, 6]: it is read, then left as it is; for
    the others min/max rule it out. Nothing is committed."""
    table.append(rows([4, 6], "b"))
    latest, files = table.latest_snapshot(), live_paths(table)
    assert table.delete((pc.field("id") == 5) & (pc.field("dt") != "b")) is None
    assert table.delete((pc.field("x") > 4.5) & (pc.field("x") < 5.5) & (pc.field("dt") == "c")) is None
    assert table.latest_snapshot() == latest and live_paths(table) == files


def test_sql_null_rule_rows_where_the_filter_is_null_stay(table: lakefmt.Table) -> None:
    """``x > 5`` is null where ``x`` is null: those rows stay (SQL's DELETE); ``x IS NULL`` removes them, and a
    file holding only nulls goes by its statistics."""
    table.append(rows([10, 11, 12], "d", x=[None, 20.0, None]))
    table.append(rows([13, 14], "e", x=[None, None]))
    plan = plan_delete(table, pc.field("x") > 5)
    assert "e" not in {p["dt"] for p in plan.dropped.column("partition").to_pylist()}
    # partition d holds nulls: its stats cannot prove every row matches, so it is read
    assert "d" in {p["dt"] for p in plan.candidates.column("partition").to_pylist()}
    # but "in range or null" still rules a file out: no file of x in [20, 20] or null holds x = 100
    plan = plan_delete(table, pc.field("x") == 100)
    assert plan.nothing_to_do
    table.delete(pc.field("x") > 5)
    assert ids(table) == [1, 2, 3, 4, 5, 10, 12, 13, 14]
    plan = plan_delete(table, pc.field("x").is_null())  # d's rewritten file holds only nulls now
    assert sorted(p["dt"] for p in plan.dropped.column("partition").to_pylist()) == ["d", "e"]
    table.delete(pc.field("x").is_null())
    assert ids(table) == [1, 2, 3, 4, 5]
    table.delete(pc.scalar(True))  # every file proved by metadata
    assert ids(table) == [] and table.files() == []


def test_nan_is_never_taken_for_a_bound(table: lakefmt.Table) -> None:
    """A file holding NaN has no min/max for that column, so it is read; NaN compares false (kept by ``x > 0``),
    and ``is_nan`` deletes it. A NaN literal never drops a file by metadata."""
    table.append(rows([20, 21], "n", x=[float("nan"), 3.0]))
    assert plan_delete(table, pc.field("dt") == "n").dropped.num_rows == 1  # the partition value proves it
    plan = plan_delete(table, (pc.field("x") > 0) & (pc.field("dt") == "n"))
    assert plan.dropped.num_rows == 0 and plan.candidates.num_rows == 1
    assert plan_delete(table, ~(pc.field("x") < float("nan"))).dropped.num_rows == 0
    table.delete((pc.field("x") > 0) & (pc.field("dt") == "n"))
    assert ids(table) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 20]
    table.delete(pc.is_nan(pc.field("x")))
    assert ids(table) == [1, 2, 3, 4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (pc.field("id") == "x", InvalidPredicateError, "compared with a value of another type"),
        (pc.field("nope") == 1, InvalidPredicateError, "no column 'nope'"),
        (pc.field("id") + 1, InvalidPredicateError, "must evaluate to bool"),
        ("id = ", InvalidPredicateError, "the delete filter 'id = ': expected a value"),
        ("nope = 1", InvalidPredicateError, "no column 'nope'"),
        ("id = 'x'", InvalidPredicateError, "cannot be compared with column id"),
        (None, TypeError, "SQL predicate text.*or a pyarrow.compute.Expression"),
        (3, TypeError, "SQL predicate text.*or a pyarrow.compute.Expression"),
    ],
)
def test_bad_filters_are_refused_and_change_nothing(
    table: lakefmt.Table, bad: Any, error: type[Exception], match: str
) -> None:
    latest, listing = table.latest_snapshot(), file_listing(table.io)
    with pytest.raises(error, match=match):
        table.delete(bad)
    assert table.latest_snapshot() == latest and file_listing(table.io) == listing


def test_an_append_racing_a_delete_lands_and_its_rows_stay(store: Any) -> None:
    """WriteSerializable: the append commits first; the delete lands after it and removes only rows of the files
    it planned on (the appended row matches the filter too, and stays: the delete is ordered after nothing)."""
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    three_partitions(t)
    other = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    remove = _during_publish(lambda: other.append(rows([50], "b")))
    try:
        snap = t.delete(pc.field("id") >= 5)
    finally:
        remove()
    assert snap is not None and [s.commit_kind for s in t.snapshots()][-2:] == [
        CommitKind.APPEND,
        CommitKind.OVERWRITE,
    ]
    assert ids(t) == [1, 2, 3, 4, 50]


def test_a_delete_whose_file_an_overwrite_removed_fails_and_leaves_nothing(table: lakefmt.Table) -> None:
    """A concurrent overwrite of partition b removes the file the delete rewrites: RewriteConflictError, nothing
    committed, the delete's written file deleted."""
    other = lakefmt.open_table(table.uri)
    before = {p for p in file_listing(table.io) if p.endswith(".parquet")}
    remove = _during_publish(lambda: other.overwrite(rows([40], "b"), partition={"dt": "b"}))
    try:
        with pytest.raises(RewriteConflictError, match="removed by a concurrent commit") as info:
            table.delete(pc.field("id") == 5)
    finally:
        remove()
    assert len(info.value.gone) == 1
    assert table.latest_snapshot().commit_kind is CommitKind.OVERWRITE  # type: ignore[union-attr]
    assert ids(table) == [1, 2, 3, 7, 8, 9, 40]
    data = {p for p in file_listing(table.io) if p.endswith(".parquet")}
    assert data == before | live_paths(table)  # the delete's rewritten file is gone


def test_a_delete_racing_a_compaction_re_plans_and_lands(table: lakefmt.Table) -> None:
    """A compaction of partition b (and an append there) lands first: the delete re-plans once on the compacted
    file and lands; no row is lost or deleted twice, and the appended matching row goes too (it was there when
    the delete planned again)."""
    table.append(rows([5], "b"))
    other = lakefmt.open_table(table.uri)

    def append_and_compact() -> None:
        other.append(rows([55], "b", x=[5.0]))
        _compact(other, "b")

    remove = _during_publish(append_and_compact)
    try:
        snap = table.delete(pc.field("x") == 5.0)
    finally:
        remove()
    assert snap is not None
    kinds = [s.commit_kind for s in table.snapshots()][-3:]
    assert kinds == [CommitKind.APPEND, CommitKind.COMPACT, CommitKind.OVERWRITE]
    assert ids(table) == [1, 2, 3, 4, 6, 7, 8, 9]


def test_an_interrupt_before_publish_cleans_up_and_one_after_keeps_everything(table: lakefmt.Table) -> None:
    """Known not landed (interrupted before the publish): the rewritten file is deleted and the table unchanged.
    Maybe landed (interrupted after it): nothing is deleted, and the table reads."""

    def interrupt(when: str) -> Callable[[], None]:
        def hook(phase: str, snap: lakefmt.Snapshot) -> None:
            if phase == when:
                raise KeyboardInterrupt

        return hooks.add_publish_hook(hook)

    listing, latest = file_listing(table.io), table.latest_snapshot()
    remove = interrupt("before-publish")
    try:
        with pytest.raises(KeyboardInterrupt):
            table.delete(pc.field("id") == 5)
    finally:
        remove()
    assert table.latest_snapshot() == latest
    assert {p for p in file_listing(table.io) if p.endswith(".parquet")} == {
        p for p in listing if p.endswith(".parquet")
    }
    remove = interrupt("after-publish")
    try:
        with pytest.raises(KeyboardInterrupt):
            table.delete(pc.field("id") == 5)
    finally:
        remove()
    assert ids(lakefmt.open_table(table.uri)) == [1, 2, 3, 4, 6, 7, 8, 9]


def test_delete_after_a_rename_prunes_and_rewrites_by_field_id(table: lakefmt.Table) -> None:
    """Files written before ``x`` became ``y`` are pruned, proved and rewritten by field id."""
    with table.update_schema() as update:
        update.rename_column("x", "y")
    table.append(pa.table({"id": [30], "y": [30.0], "dt": ["c"]}))
    plan = plan_delete(table, pc.field("y") >= 7.0)
    assert plan.dropped.num_rows == 2  # partition c's two files: every y is at least 7, by their statistics
    assert plan.candidates.num_rows == 0  # a and b ruled out by min/max of the old x
    table.delete((pc.field("y") >= 7.0) | (pc.field("y") == 2.0))
    assert ids(table) == [1, 3, 4, 5, 6]
    assert table.to_arrow().column_names == ["id", "y", "dt"]


def test_a_plans_groups_keep_a_partitions_files_together(table: lakefmt.Table) -> None:
    """Engines run step 2 per group: groups of about the bytes asked for, a partition's files next to each other."""
    for dt in ("c", "a", "b"):
        table.append(rows([100, 101], dt))
    plan = plan_delete(table, pc.is_nan(pc.field("x")))  # no statistic decides it: every file is a candidate
    assert plan.candidates.num_rows == 6 and plan.candidate_bytes > 0
    one = plan.groups(1 << 40)
    assert len(one) == 1 and [p["dt"] for p in one[0].column("partition").to_pylist()] == list("aabbcc")
    each = plan.groups(1)
    assert [g.num_rows for g in each] == [1] * 6
    with pytest.raises(ValueError, match="positive"):
        plan.groups(0)


def test_a_file_whose_row_count_disagrees_with_its_entry_is_refused(table: lakefmt.Table) -> None:
    """The counting pass attributes rows to files by their entries' row counts: a file that holds more or fewer
    rows than its entry says is refused (a count taken for the wrong file could drop rows), nothing written."""
    plan = plan_delete(table, pc.field("id") == 5)
    entries = plan.candidates
    for wrong in (2, 4):
        bad = entries.set_column(
            entries.schema.get_field_index("row_count"), "row_count", pa.array([wrong], pa.int64())
        )
        with pytest.raises(lakefmt.CorruptMetadataError, match="does not hold the"):
            delete_in_files(table, bad, plan.filter)
    assert ids(table) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
