"""The groundwork every rewrite commit stands on (:class:`RewriteProducer`, :func:`compactions_only`), driven here
through a bare compaction built in the test, so that the protocol's rules are checked apart from any planner:
a rewrite replaces named live files or nothing; a file removed under it is a conflict; a change made by
compactions alone never fails an overwrite, unless a compaction moved rows the overwrite never saw."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt import hooks
from lakefmt.commit.kinds import RewriteProducer
from lakefmt.commit.types import CommitOutcome, CommitRequest
from lakefmt.errors import CommitConflictError, RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.read.files import read_entries
from lakefmt.spec import CommitKind

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


class _Compaction(RewriteProducer):
    kind = CommitKind.COMPACT

    def carries_users_unchanged(self) -> bool:
        return True


def rows(ids: list[int], dt: str) -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids)}, schema=SCHEMA)


def content(t: lakefmt.Table) -> Counter[tuple[int, str]]:
    data = t.to_arrow()
    return Counter(zip(data.column("id").to_pylist(), data.column("dt").to_pylist(), strict=True))


def live_of(t: lakefmt.Table, dt: str) -> pa.Table:
    snap = t.latest_snapshot()
    assert snap is not None
    live = ents.live_entries(t._store, snap)
    return live.filter(pa.compute.equal(live.column("partition").combine_chunks().field("dt"), dt))


def rewrite(t: lakefmt.Table, rewritten: pa.Table, *, kind: type[RewriteProducer] = _Compaction) -> lakefmt.Snapshot:
    """Rewrite ``rewritten``'s files into one file with the same rows, as one commit of ``kind``."""
    schema = t.table_schema()
    with t.new_writer() as writer:
        for batch in read_entries(t.io, rewritten, schema):
            writer.write(pa.Table.from_batches([batch]))
        message = writer.prepare_commit()
    request = CommitRequest(None, f"oneoff-{uuid.uuid4().hex}", 0, list(message.manifests))
    result = kind(t.io, t._store, request, clock=time.time, rewritten=rewritten).commit()
    assert result.outcome is CommitOutcome.COMMITTED and result.snapshot is not None
    return result.snapshot


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    for i in range(3):
        t.append(rows([i], "a"))
    t.append(rows([10], "b"))
    return t


def test_a_rewrite_replaces_its_files_and_keeps_every_row(table: lakefmt.Table) -> None:
    before = content(table)
    snap = rewrite(table, live_of(table, "a"))
    assert snap.commit_kind is CommitKind.COMPACT
    assert content(table) == before
    assert len(live_of(table, "a")) == 1 and len(live_of(table, "b")) == 1
    assert snap.total_record_count == 4 and snap.total_file_count == 2


def test_a_rewrite_of_a_file_removed_under_it_is_a_conflict_and_commits_nothing(table: lakefmt.Table) -> None:
    stale = live_of(table, "a")
    table.overwrite(rows([7], "a"), partition={"dt": "a"})
    latest = table.latest_snapshot()
    with pytest.raises(RewriteConflictError, match="removed by a concurrent commit") as info:
        rewrite(table, stale)
    assert len(info.value.gone) == 3
    assert table.latest_snapshot() == latest
    assert content(table) == Counter({(7, "a"): 1, (10, "b"): 1})


def test_a_compaction_carries_the_commit_users_unchanged(table: lakefmt.Table) -> None:
    committer = table.new_committer("job", clock=lambda: 1_000.0)  # a commit long ago
    with table.new_writer() as w:
        w.write(rows([5], "b"))
        message = w.prepare_commit()
    committer.commit([message], identifier=4)
    users = table.latest_snapshot().commit_users  # type: ignore[union-attr]
    rewrite(table, live_of(table, "b"))
    assert table.latest_snapshot().commit_users == users  # type: ignore[union-attr]
    assert table.new_committer("job").already_committed(4)


def _during_publish(action: object) -> object:
    fired: list[bool] = []

    def race(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and not fired:
            fired.append(True)
            action()  # type: ignore[operator]

    return hooks.add_publish_hook(race)


def test_an_overwrite_racing_a_compaction_of_its_partition_re_plans_and_lands(table: lakefmt.Table) -> None:
    other = lakefmt.open_table(table.uri)
    remove = _during_publish(lambda: rewrite(other, live_of(other, "a")))
    try:
        snap = table.overwrite(rows([20], "a"), partition={"dt": "a"})
    finally:
        remove()
    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    kinds = [s.commit_kind for s in table.snapshots()][-2:]
    assert kinds == [CommitKind.COMPACT, CommitKind.OVERWRITE]
    assert content(table) == Counter({(20, "a"): 1, (10, "b"): 1})
    assert len(live_of(table, "a")) == 1


def test_an_overwrite_conflicts_when_a_compaction_moved_rows_it_never_saw(table: lakefmt.Table) -> None:
    """An append lands in the partition and a compaction merges it with the old files: the overwrite's files
    changed by compaction alone, but its rows did not stay the same, so it must fail as it would against the
    append."""
    other = lakefmt.open_table(table.uri)

    def append_then_compact() -> None:
        other.append(rows([99], "a"))
        rewrite(other, live_of(other, "a"))

    remove = _during_publish(append_then_compact)
    try:
        with pytest.raises(CommitConflictError, match="a concurrent commit changed"):
            table.overwrite(rows([20], "a"), partition={"dt": "a"})
    finally:
        remove()
    assert table.latest_snapshot().commit_kind is CommitKind.COMPACT  # type: ignore[union-attr]
    assert content(table)[(99, "a")] == 1


def test_an_append_racing_a_rewrite_never_conflicts(table: lakefmt.Table) -> None:
    other = lakefmt.open_table(table.uri)
    remove = _during_publish(lambda: other.append(rows([42], "a")))
    try:
        rewrite(table, live_of(table, "a"))
    finally:
        remove()
    assert content(table) == Counter({(0, "a"): 1, (1, "a"): 1, (2, "a"): 1, (42, "a"): 1, (10, "b"): 1})
