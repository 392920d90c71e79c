"""MERGE (issue 25): ``Table.merge(source, predicate, source_alias=, target_alias=)`` with deltalake's clause
builder, on tables without a key (copy-on-write and deletion vectors) and on key tables: each clause, clause
order, SQL null rules, several source rows for one target row, partitions and pruning, the report's counts,
concurrent commits, bad input, and random merges against an independent pandas computation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.errors import (
    InvalidPredicateError,
    KeyTableError,
    MergeError,
    MergeMultipleMatchesError,
    RewriteConflictError,
)
from lakefmt.rewrite.merge import run as merge_mod

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("dt", pa.string())])
MODES = ["cow", "dv", "key"]


def make(path: Path, mode: str, *, partitioned: bool = False) -> lakefmt.Table:
    # no automatic compaction: the tests look at the merge's own snapshot
    opts: dict[str, str] = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"} if mode == "dv" else {}
    if mode == "key":
        opts["bucket"] = "2"
    return lakefmt.create_table(
        str(path), SCHEMA, partition_by=["dt"] if partitioned else None, options=opts,
        primary_key=(["id", "dt"] if partitioned else ["id"]) if mode == "key" else None,
    )


def rows(ids: list[int], xs: list[int | None], dt: str = "a") -> pa.Table:
    return pa.table({"id": ids, "x": xs, "dt": [dt] * len(ids)}, schema=SCHEMA)


def content(t: lakefmt.Table) -> list[tuple[Any, ...]]:
    d = t.to_arrow().to_pydict()
    return sorted(zip(d["id"], d["x"], d["dt"], strict=True), key=repr)


def merger(t: lakefmt.Table, source: Any, on: str = "t.id = s.id") -> lakefmt.TableMerger:
    return t.merge(source, on, source_alias="s", target_alias="t")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_each_clause_and_report(tmp_path: Path, mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]))
    src = pa.table({"id": [2, 3, 4, 6, 7], "x": [200, 300, 400, 600, 700], "dt": ["b"] * 5,
                    "gone": [False, True, False, False, False]})
    report = (
        merger(t, src)
        .when_matched_delete(predicate="s.gone = true")
        .when_matched_update(updates={"x": "s.x + t.x"}, predicate="t.x > 30")
        .when_matched_update_all()
        .when_not_matched_insert(updates={"id": "s.id", "x": "s.x * 2"}, predicate="s.id = 6")
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(predicate="t.x = 10")
        .execute()
    )
    assert content(t) == [(2, 200, "b"), (4, 440, "a"), (5, 50, "a"), (6, 1200, None), (7, 700, "b")]
    assert report.num_target_rows_inserted == 2 and report["num_target_rows_inserted"] == 2
    assert report.num_target_rows_updated == 2
    assert report.num_target_rows_deleted == 2  # 3 by the matched delete, 1 by the by-source delete
    assert report.num_source_rows == 5
    assert report.to_dict()["num_target_rows_updated"] == 2
    snap = t.latest_snapshot()
    assert snap is not None and report.snapshot_id == snap.id
    assert snap.properties["lakefmt.operation"] == "merge"
    assert len(t.snapshots()) == 2  # one commit
    if mode == "cow":
        assert report.num_target_rows_copied == 1 and report.num_target_files_removed == 1


@pytest.mark.parametrize("delete_mode", ["copy-on-write", "merge-on-read"])
def test_merge_on_every_store(store: Any, delete_mode: str) -> None:
    t = create_table_in(store, SCHEMA, options={"write.delete.mode": delete_mode})
    t.append(rows([1, 2], [1, 2]))
    report = merger(t, rows([2, 3], [20, 30])).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (1, 1)
    again = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    assert content(again) == [(1, 1, "a"), (2, 20, "a"), (3, 30, "a")]


def test_not_matched_by_source_update_and_first_clause_wins(tmp_path: Path, mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 2, 3], [1, 2, 3]))
    report = (
        merger(t, rows([1], [100]))
        .when_matched_update(updates={"x": "-1"})  # unconditional first: the later clause never applies
        .when_matched_delete()
        .when_not_matched_by_source_update(updates={"x": "t.x * 10"}, predicate="t.x >= 3")
        .execute()
    )
    assert content(t) == [(1, -1, "a"), (2, 2, "a"), (3, 30, "a")]
    assert (report.num_target_rows_updated, report.num_target_rows_deleted) == (2, 0)


def test_null_keys_never_match(tmp_path: Path) -> None:
    t = make(tmp_path / "t", "cow")
    t.append(pa.table({"id": [1, None], "x": [1, 2], "dt": ["a", "a"]}, schema=SCHEMA))
    src = pa.table({"id": [None, 1], "x": [9, 8], "dt": ["z", "z"]}, schema=SCHEMA)
    report = merger(t, src).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (1, 1)
    assert content(t) == [(1, 8, "z"), (None, 2, "a"), (None, 9, "z")]
    # a condition that is null is not true: x > NULL updates nothing
    report = merger(t, rows([1], [None])).when_matched_update_all(predicate="t.x > s.x").execute()
    assert report.num_target_rows_updated == 0 and report.snapshot_id is None


def test_extra_condition_in_on_and_null_inside(tmp_path: Path) -> None:
    t = make(tmp_path / "t", "dv")
    t.append(rows([1, 2, 3], [5, None, 7]))
    src = rows([1, 2, 3], [5, 5, 0])
    report = merger(t, src, "t.id = s.id AND t.x = s.x").when_matched_delete().when_not_matched_insert_all().execute()
    # id 1 matches; id 2 (t.x null) and id 3 (7 != 0) do not: their source rows are inserted
    assert (report.num_target_rows_deleted, report.num_target_rows_inserted) == (1, 2)
    assert content(t) == sorted([(2, 5, "a"), (2, None, "a"), (3, 0, "a"), (3, 7, "a")], key=repr)


def test_multiple_matches_refused_table_unchanged(tmp_path: Path, mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 2], [1, 2]))
    before = content(t)
    with pytest.raises(MergeMultipleMatchesError, match="more than one source row"):
        merger(t, rows([1, 1], [5, 6])).when_matched_update_all().execute()
    assert content(t) == before and len(t.snapshots()) == 1
    # an unconditional delete as the only matched clause takes the row either way
    report = merger(t, rows([1, 1], [5, 6])).when_matched_delete().execute()
    assert report.num_target_rows_deleted == 1 and content(t) == [(2, 2, "a")]


def test_partitions_are_pruned(tmp_path: Path, mode: str) -> None:
    t = make(tmp_path / "t", mode, partitioned=True)
    for i, dt in enumerate(["a", "b", "c"]):
        t.append(rows(list(range(i * 100, i * 100 + 50)), [1] * 50, dt))
    src = rows([110, 120, 160], [7, 7, 7], "b")  # ids 110..160: partition b's range only
    report = merger(t, src).when_matched_update_all().when_not_matched_insert_all().execute()
    # only partition b's files are read (a key table writes one file per bucket)
    assert report.num_target_files_scanned == (2 if mode == "key" else 1)
    assert report.num_target_files_skipped_during_scan == 2 * report.num_target_files_scanned
    # a condition on target columns alone prunes too: t.dt = 'c' leaves partition c's files only
    report = merger(t, rows([110, 210], [8, 8], "c"), "t.id = s.id AND t.dt = 'c'").when_matched_update_all().execute()
    assert report.num_target_rows_updated == 1 and report.num_target_files_skipped_during_scan >= 2
    got = {r[0]: r for r in content(t)}
    assert got[210] == (210, 8, "c")
    assert got[110] == (110, 7, "b") and got[160] == (160, 7, "b") and got[5] == (5, 1, "a")
    assert len(got) == 151


def test_except_cols_and_bare_names(tmp_path: Path) -> None:
    t = make(tmp_path / "t", "cow")
    t.append(rows([1, 2], [1, 2]))
    src = rows([1, 3], [10, 30], "new")
    merger(t, src).when_matched_update_all(except_cols=["dt"]).when_not_matched_insert_all(except_cols=["dt"]).execute()
    assert content(t) == [(1, 10, "a"), (2, 2, "a"), (3, 30, None)]
    # without aliases, bare names resolve to the side that has them
    t.merge(pa.table({"key": [2], "y": [5]}), "id = key").when_matched_update({"x": "x + y"}).execute()
    assert content(t) == [(1, 10, "a"), (2, 7, "a"), (3, 30, None)]
    with pytest.raises(InvalidPredicateError, match="in both the source and the target: qualify it"):
        t.merge(src, "id = s.id", source_alias="s")


def test_bad_input_is_refused(tmp_path: Path) -> None:
    t = make(tmp_path / "t", "cow")
    t.append(rows([1], [1]))
    src = rows([1], [2])
    with pytest.raises(MergeError, match="equality between a target and a source column"):
        merger(t, src, "t.x > s.x")
    with pytest.raises(InvalidPredicateError, match="no column"):
        merger(t, src, "t.id = s.nope")
    with pytest.raises(InvalidPredicateError, match="unknown alias"):
        merger(t, src, "q.id = s.id")
    with pytest.raises(MergeError, match="cannot see"):
        merger(t, src).when_not_matched_insert_all(predicate="t.x = 1").execute()
    with pytest.raises(MergeError, match="at least one when_"):
        merger(t, src).execute()
    with pytest.raises(InvalidPredicateError, match="functions are not supported"):
        merger(t, src).when_matched_update({"x": "abs(s.x)"}).execute()
    # a source without the nullable dt inserts null there (the one rule for missing columns): see
    # test_adversarial_issue26.test_merge_star_clauses_follow_the_missing_column_rule
    assert content(t) == [(1, 1, "a")] and len(t.snapshots()) == 1
    k = lakefmt.create_table(str(tmp_path / "k"), SCHEMA, primary_key=["id"], options={"merge-engine": "first-row"})
    with pytest.raises(KeyTableError, match="merge-engine=deduplicate"):
        merger(k, src)


def test_a_merge_replaces_the_rows_it_names_whatever_their_sequence_field(store: Any) -> None:
    """On a key table with ``sequence.field``, a MERGE replaces the rows it updates or deletes whatever their
    sequence values (it names them: an update of a smaller value, or of none, lands; a swap of two keys and a delete
    plus a move onto the deleted key land). A row it writes for a key whose live row it does not name, and whose
    value is larger, is refused as it is when the written row's value is larger (found: both rows of the key were
    lost, or the merge's own row, while the report counted it)."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("s", pa.int64()), ("v", pa.int64())])
    t = create_table_in(store, schema, primary_key=["k"], options={"sequence.field": "s", "bucket": "2"})
    t.upsert(pa.table({"k": [1, 2, 3, 4], "s": [10, 10, 10, 10], "v": [1, 1, 1, 1]}, schema=schema))

    def live() -> list[tuple[int, int | None, int]]:
        got = [(r["k"], r["s"], r["v"]) for r in t.scan().to_arrow().to_pylist()]
        assert len({k for k, _, _ in got}) == len(got), "a key with two live rows"
        return sorted(got)

    src = pa.table({"k": [1, 2, 3, 5], "s": [5, None, 10, 1], "v": [9, 9, 9, 9]}, schema=schema)
    report = (t.merge(src, "t.k = s.k", source_alias="s", target_alias="t")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    assert live() == [(1, 5, 9), (2, None, 9), (3, 10, 9), (4, 10, 1), (5, 1, 9)]
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (3, 1)
    swap = pa.table({"k": [1, 3], "nk": [3, 1], "s": [2, 2]})
    (t.merge(swap, "t.k = s.k", source_alias="s", target_alias="t")
     .when_matched_update({"k": "s.nk", "s": "s.s"}).execute())
    assert live() == [(1, 2, 9), (2, None, 9), (3, 2, 9), (4, 10, 1), (5, 1, 9)]
    moved = pa.table({"k": [5, 4], "nk": [4, None], "s": [0, None], "op": ["u", "d"]})
    report = (t.merge(moved, "t.k = s.k", source_alias="s", target_alias="t")
              .when_matched_delete(predicate="s.op = 'd'")
              .when_matched_update({"k": "s.nk", "s": "s.s"}, predicate="s.op = 'u'").execute())
    assert live() == [(1, 2, 9), (2, None, 9), (3, 2, 9), (4, 0, 9)]
    assert (report.num_target_rows_updated, report.num_target_rows_deleted) == (1, 1)
    before, snapshots = live(), len(t.snapshots())
    onto = pa.table({"k": [1], "nk": [3], "s": [1]})  # onto key 3, whose row (s 2) the merge does not name
    with pytest.raises(MergeError, match="another live row holds"):
        t.merge(onto, "t.k = s.k", source_alias="s", target_alias="t").when_matched_update(
            {"k": "s.nk", "s": "s.s"}).execute()
    unmatched = pa.table({"k": [3], "s": [1], "v": [7]}, schema=schema)  # the ON misses key 3's row
    with pytest.raises(MergeError, match="another live row holds"):
        (t.merge(unmatched, "t.k = s.k AND t.v = 0", source_alias="s", target_alias="t")
         .when_not_matched_insert_all().execute())
    assert live() == before and len(t.snapshots()) == snapshots


def test_a_merge_losing_to_a_concurrent_write_of_its_key_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key written by a concurrent commit with a larger ``sequence.field`` value than the merge's row for it:
    the merge's row would not land, so the merge fails with a conflict (found: it reported the row inserted)."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("s", pa.int64()), ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"], options={"sequence.field": "s"})
    t.upsert(pa.table({"k": [1], "s": [10], "v": [1]}, schema=schema))
    _race(monkeypatch, lambda: lakefmt.open_table(t.uri).upsert(pa.table({"k": [2], "s": [9], "v": [2]},
                                                                          schema=schema)))
    with pytest.raises(RewriteConflictError, match=r"larger sequence\.field"):
        (t.merge(pa.table({"k": [2], "s": [5], "v": [3]}, schema=schema), "t.k = s.k", source_alias="s",
                 target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute())
    assert sorted((r["k"], r["v"]) for r in t.scan().to_arrow().to_pylist()) == [(1, 1), (2, 2)]


@pytest.mark.parametrize("options", [{}, {"sequence.field": "s"}], ids=["plain", "sequence-field"])
def test_a_compaction_meanwhile_does_not_let_an_insert_replace_a_row_it_did_not_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str]
) -> None:
    """An insert of a key whose live row the ON condition did not match is refused (``MergeError``). Found: when a
    compaction moved that row to a new file while the merge ran, the row was taken for a concurrent write of the
    key and replaced (or, with ``sequence.field``, reported as a conflict with a concurrent write). The merge now
    runs again on the latest snapshot, where the row is one it read."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("s", pa.int64()), ("v", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"],
                             options={"bucket": "1", "compaction.auto": "false", **options})
    t.upsert(pa.table({"k": [1, 2], "s": [10, 10], "v": ["x", "b"]}, schema=schema))
    for s_value in (20, 5):
        t.upsert(pa.table({"k": [2], "s": [11], "v": ["b2"]}, schema=schema))  # two files: compaction rewrites them
        assert len(t.files()) == 2
        _race(monkeypatch, lambda: lakefmt.open_table(t.uri).compact())
        src = pa.table({"k": [1], "s": [s_value], "v": ["M"]}, schema=schema)
        with pytest.raises(MergeError, match="another live row holds"):
            (t.merge(src, "t.k = s.k AND t.v != 'x'", source_alias="s", target_alias="t")
             .when_not_matched_insert_all().execute())
        monkeypatch.undo()
        assert sorted((r["k"], r["v"]) for r in t.scan().to_arrow().to_pylist()) == [(1, "x"), (2, "b2")]
        assert len(t.files()) == 1, "the compaction landed while the merge ran"


def test_a_merge_writing_rows_that_are_changes_is_refused(tmp_path: Path) -> None:
    """On a key table with ``rowkind.field``, a MERGE that would write a delete or an update's before-image (read
    as a change of its key, not as a row) is refused, naming the column; the table is unchanged."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.int64()), ("op", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["k"], options={"rowkind.field": "op"})
    t.upsert(pa.table({"k": [1, 2], "v": [10, 10], "op": ["+I", "+I"]}, schema=schema))
    for kind in ("-D", "-U"):
        src = pa.table({"k": [1, 3], "v": [5, 3], "op": [kind, "+I"]}, schema=schema)
        with pytest.raises(MergeError, match=f"not a row's \\(the first: '{kind}' in column 'op'"):
            (t.merge(src, "t.k = s.k", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
    no_kind = pa.table({"k": [4], "v": [4]})  # the source has no row kind column: inserted rows would have none
    with pytest.raises(MergeError, match=r"1 row\(s\) this merge writes have no row kind: column 'op'"):
        t.merge(no_kind, "t.k = s.k", source_alias="s", target_alias="t").when_not_matched_insert_all().execute()
    assert len(t.snapshots()) == 1
    src = pa.table({"k": [1, 3], "v": [5, 3], "op": ["+U", "+I"]}, schema=schema)
    report = (t.merge(src, "t.k = s.k", source_alias="s", target_alias="t")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    assert (report.num_target_rows_updated, report.num_target_rows_inserted) == (1, 1)
    assert sorted((r["k"], r["v"]) for r in t.scan().to_arrow().to_pylist()) == [(1, 5), (2, 10), (3, 3)]


def test_sources_of_any_arrow_kind(tmp_path: Path) -> None:
    t = make(tmp_path / "t", "cow")
    t.append(rows([1], [1]))
    df = pd.DataFrame({"id": [1, 2], "x": [5, 6], "dt": ["a", "a"]})
    merger(t, df).when_matched_update_all().when_not_matched_insert_all().execute()
    reader = pa.RecordBatchReader.from_batches(SCHEMA, rows([3], [7]).to_batches())
    merger(t, reader).when_not_matched_insert_all().execute()
    assert content(t) == [(1, 5, "a"), (2, 6, "a"), (3, 7, "a")]


# -- concurrency ----------------------------------------------------------------------------------------------
def _race(monkeypatch: pytest.MonkeyPatch, action: Any) -> None:
    """Run ``action`` once, after the merge computed its rows and before it commits."""
    original = merge_mod.compute_changes
    done: list[bool] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if not done:
            done.append(True)
            action()
        return out

    monkeypatch.setattr(merge_mod, "compute_changes", racing)


@pytest.mark.parametrize("mode", ["cow", "dv"])
def test_concurrent_delete_of_a_merged_row_conflicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 2, 3], [1, 2, 3]))
    other = lakefmt.open_table(str(tmp_path / "t"))
    _race(monkeypatch, lambda: other.delete(pa.compute.field("id") == 2))
    with pytest.raises(RewriteConflictError):
        merger(t, rows([2], [20])).when_matched_update_all().execute()
    assert content(t) == [(1, 1, "a"), (3, 3, "a")]  # the delete stands; the update did not resurrect the row


def test_key_table_concurrent_upsert_of_a_merged_key_conflicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    t = make(tmp_path / "t", "key")
    t.append(rows([1, 2], [1, 2]))
    other = lakefmt.open_table(str(tmp_path / "t"))
    _race(monkeypatch, lambda: other.upsert(rows([2], [100])))
    with pytest.raises(RewriteConflictError):  # x = t.x + s.x was computed from the row the upsert replaced
        merger(t, rows([2], [5])).when_matched_update(updates={"x": "t.x + s.x"}).execute()
    assert content(t) == [(1, 1, "a"), (2, 100, "a")]


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_append_does_not_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 2], [1, 2]))
    other = lakefmt.open_table(str(tmp_path / "t"))
    _race(monkeypatch, lambda: other.append(rows([50], [50])))
    merger(t, rows([2], [20])).when_matched_update_all().execute()
    assert content(t) == [(1, 1, "a"), (2, 20, "a"), (50, 50, "a")]


@pytest.mark.parametrize("mode", ["cow", "dv"])
def test_concurrent_merges_inserting_one_key_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      mode: str) -> None:
    """Two merges that both insert id 7 (neither saw the other's row): the second fails rather than add a second
    row for the key; a blind append meanwhile would not conflict (test_concurrent_append_does_not_conflict)."""
    t = make(tmp_path / "t", mode)
    t.append(rows([1, 5, 9], [1, 5, 9]))
    other = lakefmt.open_table(str(tmp_path / "t"))
    _race(monkeypatch, lambda: merger(other, rows([7], [70])).when_not_matched_insert_all().execute())
    with pytest.raises(RewriteConflictError, match="added rows this merge may match"):
        merger(t, rows([7], [71])).when_matched_update_all().when_not_matched_insert_all().execute()
    assert content(t) == [(1, 1, "a"), (5, 5, "a"), (7, 70, "a"), (9, 9, "a")]


def test_concurrent_compaction_replans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = make(tmp_path / "t", "cow")
    t.append(rows([1, 2], [1, 2]))
    t.append(rows([3, 4], [3, 4]))
    other = lakefmt.open_table(str(tmp_path / "t"))
    _race(monkeypatch, lambda: other.compact(min_files=2))
    report = merger(t, rows([2, 3], [20, 30])).when_matched_update_all().execute()
    assert report.num_target_rows_updated == 2
    assert content(t) == [(1, 1, "a"), (2, 20, "a"), (3, 30, "a"), (4, 4, "a")]


# -- exactness against pandas ---------------------------------------------------------------------------------
def _expected(target: pd.DataFrame, source: pd.DataFrame) -> pd.DataFrame:
    """The merge of the random test, computed by pandas: matched on id (non-null): delete where s.flag, update x to
    s.x + t.x where t.x > s.x, else update all; unmatched source rows with x not null inserted; unmatched target
    rows with x < -40 deleted."""
    t = target.reset_index(drop=True).assign(trow=lambda d: range(len(d)))
    s = source.reset_index(drop=True)
    m = t.dropna(subset=["id"]).merge(s.dropna(subset=["id"]), on="id", suffixes=("_t", "_s"))
    out = []
    for _, r in m.iterrows():
        if r["flag"]:
            continue
        if pd.notna(r["x_t"]) and pd.notna(r["x_s"]) and r["x_t"] > r["x_s"]:
            out.append((r["id"], r["x_s"] + r["x_t"], r["dt_t"]))
        else:
            out.append((r["id"], r["x_s"], r["dt_s"]))
    matched_t = set(m["trow"])
    for _, r in t.iterrows():
        if r["trow"] in matched_t:
            continue
        if pd.notna(r["x"]) and r["x"] < -40:
            continue
        out.append((r["id"], r["x"], r["dt"]))
    matched_ids = set(m["id"])
    for _, r in s.iterrows():
        if (pd.isna(r["id"]) or r["id"] not in matched_ids) and pd.notna(r["x"]):
            out.append((r["id"], r["x"], r["dt"]))
    return pd.DataFrame(out, columns=["id", "x", "dt"])


def _norm(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(
        ((None if pd.isna(a) else int(a), None if pd.isna(b) else int(b), c) for a, b, c in df.itertuples(index=False)),
        key=repr,
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_random_merges_match_pandas(tmp_path: Path, mode: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = make(tmp_path / "t", mode, partitioned=seed == 2)
    ids = rng.permutation(400)[:200]
    target_ids: list[int | None] = [int(i) for i in ids]
    if mode != "key":
        target_ids[:5] = [None] * 5
    xs = [None if rng.random() < 0.1 else int(v) for v in rng.integers(-50, 50, len(ids))]
    dts = [str(d) for d in rng.choice(["a", "b"], len(ids))]
    target = pa.table({"id": target_ids, "x": xs, "dt": dts}, schema=SCHEMA)
    for part in (target.slice(0, 80), target.slice(80)):
        t.append(part)
    sids = rng.permutation(400)[:120]
    s_ids: list[int | None] = [int(i) for i in sids]
    if mode != "key":  # a key column holds no null
        s_ids[:3] = [None] * 3
    source = pa.table({
        "id": pa.array(s_ids, pa.int64()),
        "x": [None if rng.random() < 0.1 else int(v) for v in rng.integers(-50, 50, len(sids))],
        "dt": [str(d) for d in rng.choice(["a", "b"], len(sids))],
        "flag": [bool(f) for f in rng.random(len(sids)) < 0.2],
    })
    before = t.to_arrow()
    report = (
        merger(t, source)
        .when_matched_delete(predicate="s.flag")
        .when_matched_update(updates={"x": "s.x + t.x"}, predicate="t.x > s.x")
        .when_matched_update_all()
        .when_not_matched_insert_all(predicate="s.x IS NOT NULL")
        .when_not_matched_by_source_delete(predicate="t.x < -40")
        .execute()
    )
    want = _expected(before.to_pandas(), source.to_pandas())
    assert _norm(t.to_arrow().to_pandas()) == _norm(want)
    assert report.num_output_rows - report.num_target_rows_copied == (
        report.num_target_rows_updated + report.num_target_rows_inserted
    )
    assert t.to_arrow().num_rows == before.num_rows + report.num_target_rows_inserted - report.num_target_rows_deleted
