"""Compaction (issue 15): rows unchanged, dedup state carried, small files merged and large ones left alone,
sorting, incremental reads, races with writers, expiry, automatic compaction, bad input."""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt import hooks
from lakefmt.errors import InvalidOptionError, InvalidPartitionError, SchemaMismatchError
from lakefmt.maintenance import referenced_files
from lakefmt.meta.store import MetaStore

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64()), ("s", pa.string())])
NOSYNC = {"write.fsync": "false"}
#: the tables of the tests of compaction on demand: small files pile up until a test compacts them
MANUAL = {**NOSYNC, "compaction.auto": "false"}


def rows(n: int, start: int, dts: tuple[str, ...] = ("a", "b")) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "dt": [dts[i % len(dts)] for i in ids],
            "v": [math.nan if i % 7 == 0 else (None if i % 5 == 0 else i / 3) for i in ids],
            "s": [None if i % 3 == 0 else f"s{i}" for i in ids],
        },
        schema=SCHEMA,
    )


def multiset(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """The rows as a multiset (NaN made comparable)."""
    out: Counter[tuple[Any, ...]] = Counter()
    for r in table.to_pylist():
        out[tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r.values())] += 1
    return out


def make(tmp_path: Any, appends: int = 12, n: int = 10, **options: str) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options={**MANUAL, **options})
    for i in range(appends):
        t.append(rows(n, i * n))
    return t


def data_files(t: lakefmt.Table) -> set[str]:
    return {p for p in file_listing(t.io) if p.endswith(".parquet")}


def test_compaction_keeps_every_row_and_merges_small_files(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options=MANUAL)
    for i in range(6):
        t.append(rows(10, i * 10))
    before = multiset(t.to_arrow())
    latest = t.latest_snapshot()
    assert latest is not None and len(t.files()) == 12
    report = t.compact()
    snap = report.snapshot
    assert snap is not None and snap.commit_kind is lakefmt.CommitKind.COMPACT and snap.id == latest.id + 1
    assert snap.properties.get("lakefmt.operation") == "compact"
    assert multiset(t.to_arrow()) == before
    assert snap.total_record_count == latest.total_record_count and snap.delta_record_count == 0
    assert len(t.files()) == 2 == snap.total_file_count
    assert (report.files_before, report.rewritten_files, report.written_files, report.files_after) == (12, 12, 2, 2)
    assert report.bytes_after == report.bytes_before - report.rewritten_bytes + report.written_bytes
    assert sorted(p["dt"] for p in report.partitions) == ["a", "b"] and report.rows == 60
    assert multiset(t.to_arrow(snapshot_id=latest.id)) == before  # the snapshot before still reads
    assert t.compact().snapshot is None  # nothing left to merge: no snapshot


def test_the_commit_user_map_and_dedup_survive_a_compaction(tmp_path: Any) -> None:
    t = make(tmp_path, appends=0, **{"commit.user-retention": "1s"})
    c = t.new_committer("stream-1")
    for ident in range(1, 7):
        w = t.new_writer()
        w.write(rows(5, ident * 5))
        assert c.commit([w.prepare_commit()], identifier=ident) is not None
    time.sleep(1.1)  # past commit.user-retention: stream-1 may be aged out by the next commits...
    for other in ("x", "y"):  # ...once most other users committed after it (see lakefmt.commit.users)
        w = t.new_writer()
        w.write(rows(1, 100))
        t.new_committer(other).commit([w.prepare_commit()], identifier=1)
    users = t.latest_snapshot().commit_users  # type: ignore[union-attr]
    assert "stream-1" in users
    assert t.compact().snapshot is not None  # ...but a compaction is no writer's commit: it ages no one out
    assert t.latest_snapshot().commit_users == users  # type: ignore[union-attr]
    assert t.commit_user_identifier("stream-1") == 6
    replay = t.new_writer()
    replay.write(rows(5, 30))
    assert c.commit([replay.prepare_commit()], identifier=6) is None  # a replay after the compaction: skipped
    assert c.last_result is not None and c.last_result.outcome is lakefmt.CommitOutcome.ALREADY_COMMITTED
    assert t.scan().count() == 32


def test_large_files_and_partitions_with_few_small_files_are_left_alone(tmp_path: Any) -> None:
    t = make(tmp_path, appends=0)
    t.append(rows(4000, 0, ("a",)))  # one large file in a
    big = {f.path for f in t.files()}
    for i in range(5):
        t.append(rows(10, 10_000 + 10 * i, ("a",)))
    for i in range(3):
        t.append(rows(10, 20_000 + 10 * i, ("b",)))
    size = max(f.file_size for f in t.files() if f.path in big)
    plan = lakefmt.plan_compaction(t, target_file_size=size)  # the large file is the target: left alone
    assert [g.partition for g in plan.groups] == [{"dt": "a"}] and plan.groups[0].num_files == 5
    assert not big & set(plan.groups[0].paths)
    report = t.compact(target_file_size=size)
    files = t.files()
    assert big <= {f.path for f in files}
    assert Counter(f.partition["dt"] for f in files) == {"a": 2, "b": 3}  # b: 3 small files < min 5
    assert report.files_before == 9 and report.files_after == 5
    assert len(t.compact(min_files=3).partitions) == 1  # b now qualifies
    assert Counter(f.partition["dt"] for f in t.files()) == {"a": 2, "b": 1}


def test_bins_stay_near_the_target(tmp_path: Any) -> None:
    t = make(tmp_path, appends=20, n=40)
    sizes = [f.file_size for f in t.files() if f.partition["dt"] == "a"]
    target = sum(sizes) // 3
    plan = lakefmt.plan_compaction(t, {"dt": "a"}, target_file_size=target)
    assert len(plan.groups) >= 3
    assert all(g.num_bytes <= target for g in plan.groups)
    before = multiset(t.to_arrow())
    t.compact({"dt": "a"}, target_file_size=target, parallelism=2)
    assert multiset(t.to_arrow()) == before
    assert Counter(f.partition["dt"] for f in t.files())["b"] == 20  # only the partition asked for


def test_sort_by_makes_min_max_ranges_disjoint(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options=MANUAL)  # unpartitioned
    for i in range(8):  # every file spans the whole id range
        ids = list(range(i, 8000, 8))
        t.append(pa.table({"id": ids, "dt": ["x"] * len(ids), "v": [1.0] * len(ids), "s": ["y"] * len(ids)}))
    before = multiset(t.to_arrow())
    total = sum(f.file_size for f in t.files())
    calls: list[tuple[int, int, str]] = []
    t.compact(sort_by=["id"], target_file_size=total // 3, progress=lambda d, n, w: calls.append((d, n, w)))
    assert multiset(t.to_arrow()) == before
    assert calls[0][:2] == (0, 1) and calls[-1][:2] == (1, 1)
    ranges = []
    for f in t.files():
        ids = pq.read_table(f.full_path, columns=["id"]).column("id")
        ranges.append((pc.min(ids).as_py(), pc.max(ids).as_py()))
    ranges.sort()
    assert len(ranges) >= 2
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))  # disjoint: pruning is sharp
    assert len(t.scan(filter=pc.field("id") < 100).files()) == 1


def test_dry_run_changes_nothing(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    listing = file_listing(t.io)
    report = t.compact(dry_run=True)
    assert report.dry_run and report.snapshot is None and report.rewritten_files == 12
    assert file_listing(t.io) == listing


# -- incremental reads ---------------------------------------------------------------------------------------
def ids_between(t: lakefmt.Table, a: int, b: int) -> list[int]:
    return sorted(t.scan(from_snapshot=a, to_snapshot=b).to_arrow().column("id").to_pylist())


def test_incremental_reads_skip_compactions(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)  # snapshots 1..6, ids 0..59
    t.compact()  # 7: merges everything
    t.append(rows(10, 60))  # 8
    assert ids_between(t, 6, 7) == []  # the compaction alone adds no row
    assert ids_between(t, 6, 8) == list(range(60, 70))
    assert ids_between(t, 3, 8) == list(range(30, 70))  # a compaction of rows from before and within the range
    assert ids_between(t, 0, 8) == list(range(70))
    for _ in range(5):
        t.append(rows(10, 100 + 10 * _))  # 9..13
    t.compact()  # 14: merges 8's output of 7 with 8..13 in each partition (mixed)
    assert ids_between(t, 7, 14) == list(range(60, 70)) + list(range(100, 150))
    assert ids_between(t, 8, 14) == list(range(100, 150))
    assert ids_between(t, 13, 14) == []


def test_incremental_reads_follow_removals_of_compacted_files(tmp_path: Any) -> None:
    t = make(tmp_path, appends=3)  # 1..3, ids 0..29
    for i in range(5):
        t.append(rows(10, 30 + 10 * i))  # 4..8
    t.compact()  # 9: mixed for a range from 3 (pre-range files of 1..3 and files of 4..8)
    t.overwrite(rows(4, 500, ("a",)), partition={"dt": "a"})  # 10: replaces the compaction's output in a
    assert ids_between(t, 3, 10) == sorted([i for i in range(30, 80) if i % 2] + list(range(500, 504)))
    t.delete(pc.field("id") == 31)  # 11: rewrites the compacted file of b
    got = ids_between(t, 3, 11)
    assert 31 not in got and len(got) == len(set(got))  # never a row twice
    # every row the range added and kept; the delete's rewritten file also holds b's rows from before the range
    # (a rewritten file counts as added, as it does for a file from before the range without a compaction)
    assert set(got) >= {i for i in range(30, 80) if i % 2 and i != 31} | set(range(500, 504))
    assert set(got) <= {i for i in range(80) if i % 2 and i != 31} | set(range(500, 504))


# -- races -----------------------------------------------------------------------------------------------------
def test_an_append_racing_a_compaction_lands_and_the_compaction_too(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    other = lakefmt.open_table(t.uri)
    fired: list[int] = []

    def hook(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and snap.commit_kind is lakefmt.CommitKind.COMPACT and not fired:
            fired.append(snap.id)
            other.append(rows(10, 1000))  # takes the id the compaction is about to publish

    remove = hooks.add_publish_hook(hook)
    try:
        report = t.compact()
    finally:
        remove()
    assert fired and report.snapshot is not None and report.snapshot.id == fired[0] + 1
    assert t.snapshot(fired[0]).commit_kind is lakefmt.CommitKind.APPEND
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(60)) + list(range(1000, 1010))
    assert report.given_up == [] and report.replanned == []


def test_an_overwrite_racing_a_compaction_of_its_partition_replans_and_lands(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    fired: list[int] = []

    def hook(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and snap.commit_kind is lakefmt.CommitKind.OVERWRITE and not fired:
            fired.append(snap.id)
            assert lakefmt.open_table(t.uri).compact().snapshot is not None  # moves the files it replaces

    remove = hooks.add_publish_hook(hook)
    try:
        snap = t.overwrite(rows(3, 900, ("a",)), partition={"dt": "a"})
    finally:
        remove()
    assert snap is not None and snap.id == fired[0] + 1
    assert t.snapshot(fired[0]).commit_kind is lakefmt.CommitKind.COMPACT
    got = sorted(t.to_arrow().column("id").to_pylist())
    assert got == sorted([i for i in range(60) if i % 2] + [900, 901, 902])  # b intact, a overwritten, once


def test_a_compaction_that_loses_its_files_to_an_overwrite_gives_up_cleanly(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    plan = lakefmt.plan_compaction(t)
    messages = [lakefmt.rewrite_group(t, g, plan.sort_by) for g in plan.groups]
    t.overwrite(rows(2, 900, ("a",)), partition={"dt": "a"})
    report = lakefmt.commit_compaction(t, plan, messages)  # never raises a conflict
    assert report.replanned == [{"dt": "a"}] and [p["dt"] for p in report.partitions] == ["b"]
    assert report.snapshot is not None and report.snapshot.commit_kind is lakefmt.CommitKind.COMPACT
    assert sorted(t.to_arrow().column("id").to_pylist()) == sorted([i for i in range(60) if i % 2] + [900, 901])
    assert data_files(t) <= referenced_files(MetaStore(t.io))  # the files written for a lost: deleted


def test_a_compaction_losing_to_another_compaction_replans_then_gives_up(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    first = lakefmt.plan_compaction(t, {"dt": "a"})
    second = lakefmt.plan_compaction(t)
    m1 = [lakefmt.rewrite_group(t, g) for g in first.groups]
    m2 = [lakefmt.rewrite_group(t, g) for g in second.groups]
    assert lakefmt.commit_compaction(t, first, m1).snapshot is not None
    before = multiset(t.to_arrow())
    report = lakefmt.commit_compaction(t, second, m2, replan=False)
    assert [p["dt"] for p in report.partitions] == ["b"] and [g.partition for g in report.given_up] == [{"dt": "a"}]
    assert "concurrent commit removed" in report.given_up[0].reason
    assert multiset(t.to_arrow()) == before and len(t.files()) == 2


# -- expiry ----------------------------------------------------------------------------------------------------
def test_expire_deletes_replaced_files_when_the_last_snapshot_reading_them_goes(tmp_path: Any) -> None:
    t = make(tmp_path, appends=6)
    old = {f.path for f in t.files()}
    snap = t.compact().snapshot
    assert snap is not None
    t.expire_snapshots(retain_max=2)  # keeps snapshot 6, which reads the old files
    assert old <= data_files(t)
    t.expire_snapshots(retain_max=1)
    assert not old & data_files(t) and data_files(t) == {f.path for f in t.files()}
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(60))


# -- automatic compaction -------------------------------------------------------------------------------------
def test_automatic_compaction_keeps_partitions_small(tmp_path: Any) -> None:
    t = make(tmp_path, appends=40, n=4, **{"compaction.auto": "true"})
    kinds = Counter(s.commit_kind for s in t.snapshots())
    assert kinds[lakefmt.CommitKind.APPEND] == 40 and kinds[lakefmt.CommitKind.COMPACT] >= 5
    per_part = Counter(f.partition["dt"] for f in t.files())
    assert max(per_part.values()) < 10  # 40 without it
    last = next(s for s in reversed(t.snapshots()) if s.commit_kind is lakefmt.CommitKind.COMPACT)
    assert len(MetaStore(t.io).snapshot_manifests(last)) <= 3  # the small manifests merged too (one base + delta)
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(160))


def test_write_only_turns_automatic_compaction_off(tmp_path: Any) -> None:
    t = make(tmp_path, appends=0, **{"compaction.auto": "true"})
    c = t.new_committer("w", write_only=True)
    for i in range(8):
        w = t.new_writer()
        w.write(rows(4, 4 * i))
        c.commit([w.prepare_commit()], identifier=i + 1)
    assert {s.commit_kind for s in t.snapshots()} == {lakefmt.CommitKind.APPEND}
    t.append(rows(4, 100))  # another writer compacts
    assert t.latest_snapshot().commit_kind is lakefmt.CommitKind.COMPACT  # type: ignore[union-attr]
    t2 = make(tmp_path / "2", appends=8, n=4, **{"compaction.auto": "true", "write-only": "true"})
    assert {s.commit_kind for s in t2.snapshots()} == {lakefmt.CommitKind.APPEND}


def test_a_failed_automatic_compaction_never_fails_the_append(tmp_path: Any, caplog: Any) -> None:
    t = make(tmp_path, appends=4, n=4, **{"compaction.auto": "true"})

    def hook(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and snap.commit_kind is lakefmt.CommitKind.COMPACT:
            raise OSError("injected: the compaction's publish fails")

    remove = hooks.add_publish_hook(hook)
    try:
        with caplog.at_level(logging.WARNING, logger="lakefmt"):
            snap = t.append(rows(4, 100))
    finally:
        remove()
    assert snap is not None and snap.commit_kind is lakefmt.CommitKind.APPEND
    assert t.latest_snapshot() == snap and "automatic compaction" in caplog.text
    assert t.scan().count() == 20
    t.append(rows(4, 200))  # the next commit compacts
    assert t.latest_snapshot().commit_kind is lakefmt.CommitKind.COMPACT  # type: ignore[union-attr]


# -- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"partition": {"nope": "a"}}, InvalidPartitionError, "not a partition key"),
        ({"partition": {"dt": "zz"}}, InvalidPartitionError, "no live file in partition dt=zz"),
        ({"partition": {}}, InvalidPartitionError, "empty partition"),
        ({"target_file_size": 0}, InvalidOptionError, "target_file_size must be a positive"),
        ({"target_file_size": -5}, InvalidOptionError, "target_file_size must be a positive"),
        ({"min_files": 0}, InvalidOptionError, "min_files must be a positive"),
        ({"sort_by": ["id", "missing"]}, SchemaMismatchError, "unknown column(s) 'missing'"),
        ({"parallelism": 0}, ValueError, "parallelism must be a positive"),
    ],
)
def test_bad_input_is_refused_and_the_table_is_unchanged(
    tmp_path: Any, kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    t = make(tmp_path, appends=6)
    listing, latest = file_listing(t.io), t.latest_snapshot()
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        t.compact(**kwargs)
    assert file_listing(t.io) == listing and t.latest_snapshot() == latest


def test_compaction_options_are_checked(tmp_path: Any) -> None:
    with pytest.raises(InvalidOptionError, match=r"compaction\.min\.file-num"):
        lakefmt.create_table(
            str(tmp_path / "a"), SCHEMA, options={"compaction.min.file-num": "9", "compaction.max.file-num": "3"}
        )
    with pytest.raises(InvalidOptionError, match=r"compaction\.auto"):
        lakefmt.create_table(str(tmp_path / "b"), SCHEMA, options={"compaction.auto": "yes"})
    with pytest.raises(InvalidOptionError, match=r"compaction\.min\.file-num"):
        lakefmt.create_table(str(tmp_path / "c"), SCHEMA, options={"compaction.min.file-num": "0"})
