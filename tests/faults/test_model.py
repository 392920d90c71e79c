"""Model-based test: hypothesis drives random sequences of appends (one-off and by a job's committer, with
one or many writer tasks), replays of a landed commit, overwrites of the whole table and of a partition
(also with no rows), commits that trigger manifest merges, compactions (of the table or of a partition, and
automatic ones after commits in one option set), row-level deletes by a predicate on ``id`` or ``dt``, tags
(created on any retained snapshot, deleted), restores (of a retained snapshot or of a tag, whose snapshot may
have expired), expire, orphan-clean (age 0), abandoned writes and reopening the table. After every step the
table equals a plain in-memory model: the retained snapshot ids, the rows of the latest snapshot and, by time
travel, of every retained one and of every tag.

Tables get tiny merge thresholds (chosen per example) so minor and full manifest merges happen all the time.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakefmt
from lakefmt.errors import InvalidPartitionError
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
PARTS = ["a", "b", "c", None]
OPTION_SETS = [
    {"manifest.merge-min-count": "2", "manifest.full-compaction-threshold": "2"},
    {"manifest.merge-min-count": "3", "manifest.full-compaction-threshold": "100"},
    {"manifest.merge-min-count": "100", "manifest.full-compaction-threshold": "3"},
    {"manifest.merge-min-count": "100", "manifest.full-compaction-threshold": "1", "manifest.target-file-size": "2kb"},
    # every commit that fills a partition up is followed by an automatic compaction
    {"compaction.auto": "true", "compaction.min.file-num": "2", "compaction.max.file-num": "3"},
]
USER = "model-job"
TAG_NAMES = ["t1", "t2", "t3"]

Row = tuple[int, str | None]
partitions = st.sampled_from(PARTS)
row_dts = st.lists(partitions, min_size=1, max_size=5)


def as_table(rows: list[Row]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "dt": [r[1] for r in rows]}, schema=SCHEMA)


def rows_of(table: pa.Table) -> Counter[Row]:
    return Counter(zip(table.column("id").to_pylist(), table.column("dt").to_pylist(), strict=True))


class TableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakefmt-model-")
        self.uri = f"{self.dir}/t"
        self.snapshots: dict[int, Counter[Row]] = {}  # the model: rows of every retained snapshot
        self.next_row = 0
        self.identifier = 0  # the job's last identifier handed out
        self.landed: int | None = None  # the job's last identifier that landed, and its rows
        self.landed_rows: list[Row] = []
        self.tags: dict[str, Counter[Row]] = {}  # the model's tags: name -> rows of the tagged snapshot

    @initialize(options=st.sampled_from(OPTION_SETS))
    def create(self, options: dict[str, str]) -> None:
        self.table = lakefmt.create_table(self.uri, SCHEMA, partition_by=["dt"], options=options)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- model helpers ----------------------------------------------------------------------------------
    def new_rows(self, dts: list[str | None]) -> list[Row]:
        rows = [(self.next_row + i, dt) for i, dt in enumerate(dts)]
        self.next_row += len(dts)
        return rows

    @property
    def latest_rows(self) -> Counter[Row]:
        return self.snapshots[max(self.snapshots)] if self.snapshots else Counter()

    def landed_snapshot(self, snap: lakefmt.Snapshot | None, rows: Counter[Row]) -> None:
        """A commit returned ``snap``: a new snapshot (next id) with ``rows``, or None (nothing to commit)."""
        if snap is None:
            assert rows == self.latest_rows, "a commit that changes the table created no snapshot"
            return
        assert snap.id == max(self.snapshots, default=0) + 1
        self.snapshots[snap.id] = rows
        latest = self.table.latest_snapshot()  # with compaction.auto: a COMPACT snapshot may follow, same rows
        for sid in range(snap.id + 1, (latest.id if latest else 0) + 1):
            assert self.table.snapshot(sid).commit_kind is lakefmt.CommitKind.COMPACT, f"snapshot {sid}"
            self.snapshots[sid] = Counter(rows)

    def job_commit(self, tasks: list[list[Row]], partition: dict[str, str | None] | None = None) -> None:
        messages = []
        for rows in tasks:
            with self.table.new_writer() as writer:
                writer.write(as_table(rows))
                messages.append(writer.prepare_commit())
        self.identifier += 1
        committer = self.table.new_committer(USER)
        if partition is None:
            snap = committer.commit(messages, identifier=self.identifier)
        else:
            snap = committer.overwrite(messages, identifier=self.identifier, partition=partition)
        new = Counter(r for rows in tasks for r in rows)
        if partition is None:
            expected = self.latest_rows + new
        else:
            expected = Counter({r: n for r, n in self.latest_rows.items() if r[1] != partition["dt"]}) + new
        self.landed_snapshot(snap, expected)
        if snap is not None and partition is None:
            self.landed, self.landed_rows = self.identifier, [r for rows in tasks for r in rows]

    # -- rules ------------------------------------------------------------------------------------------
    @rule(dts=row_dts)
    def append(self, dts: list[str | None]) -> None:
        rows = self.new_rows(dts)
        self.landed_snapshot(self.table.append(as_table(rows)), self.latest_rows + Counter(rows))

    @rule(dts=row_dts, tasks=st.integers(1, 3))
    def job_append(self, dts: list[str | None], tasks: int) -> None:
        rows = self.new_rows(dts)
        self.job_commit([rows[i::tasks] for i in range(tasks) if rows[i::tasks]])

    @rule(n=st.integers(4, 10))
    def many_task_commit(self, n: int) -> None:
        """One row per writer task: many small per-task manifests to merge into the delta, and a growing base."""
        rows = self.new_rows([PARTS[i % len(PARTS)] for i in range(n)])
        self.job_commit([[r] for r in rows])

    @precondition(lambda self: self.landed is not None)
    @rule()
    def replay_landed_commit(self) -> None:
        """A restarted job commits its last landed identifier again (same rows, new files): a no-op."""
        with self.table.new_writer() as writer:
            writer.write(as_table(self.landed_rows))
            messages = [writer.prepare_commit()]
        assert self.table.new_committer(USER).commit(messages, identifier=self.landed) is None
        self.table.discard(messages)

    @rule(dts=st.lists(partitions, max_size=4))
    def overwrite_table(self, dts: list[str | None]) -> None:
        rows = self.new_rows(dts)
        self.landed_snapshot(self.table.overwrite(as_table(rows)), Counter(rows))

    @rule(dt=partitions, n=st.integers(0, 3), by_job=st.booleans())
    def overwrite_partition(self, dt: str | None, n: int, by_job: bool) -> None:
        rows = self.new_rows([dt] * n)
        if by_job:
            self.job_commit([rows] if rows else [], partition={"dt": dt})
            return
        expected = Counter({r: c for r, c in self.latest_rows.items() if r[1] != dt}) + Counter(rows)
        self.landed_snapshot(self.table.overwrite(as_table(rows), partition={"dt": dt}), expected)

    @rule(dt=partitions, everywhere=st.booleans(), min_files=st.integers(2, 4))
    def compact(self, dt: str | None, everywhere: bool, min_files: int) -> None:
        """A compaction of the whole table or of one partition changes no row: one COMPACT snapshot with the latest
        rows, carrying the commit-user map (dedup) exactly, or none when no partition in scope holds ``min_files``
        files (all are small). A partition without rows has no live file: refused, nothing changes."""
        before = self.table.latest_snapshot()
        files = Counter(f.partition.get("dt") for f in self.table.files()) if before else Counter()
        if not everywhere and files[dt] == 0:
            with pytest.raises(InvalidPartitionError):
                self.table.compact({"dt": dt}, min_files=min_files)
            return
        report = self.table.compact(None if everywhere else {"dt": dt}, min_files=min_files)
        due = {p for p, n in files.items() if n >= min_files and (everywhere or p == dt)}
        assert {p["dt"] for p in report.partitions} == due
        assert (report.snapshot is None) == (not due)
        self.landed_snapshot(report.snapshot, Counter(self.latest_rows))
        if report.snapshot is not None:
            assert before is not None and report.snapshot.commit_kind is lakefmt.CommitKind.COMPACT
            assert report.snapshot.commit_users == before.commit_users
            after = Counter(f.partition.get("dt") for f in self.table.files(snapshot_id=report.snapshot.id))
            assert all(after[p] == 1 for p in due), f"{dict(files)} -> {dict(after)}"

    @rule(
        how=st.sampled_from(["id <", "id ==", "dt ==", "dt !=", "dt is null", "dt == and id <"]),
        n=st.integers(0, 60),
        dt=st.sampled_from(["a", "b", "c"]),
    )
    def delete(self, how: str, n: int, dt: str) -> None:
        """A row-level delete removes exactly the rows where the predicate is true: a null ``dt`` is kept by
        ``dt == x`` and ``dt != x`` alike (SQL). No matching row: no snapshot."""
        filters = {
            "id <": (pc.field("id") < n, lambda r: r[0] < n),
            "id ==": (pc.field("id") == n, lambda r: r[0] == n),
            "dt ==": (pc.field("dt") == dt, lambda r: r[1] == dt),
            "dt !=": (pc.field("dt") != dt, lambda r: r[1] is not None and r[1] != dt),
            "dt is null": (pc.field("dt").is_null(), lambda r: r[1] is None),
            "dt == and id <": ((pc.field("dt") == dt) & (pc.field("id") < n), lambda r: r[1] == dt and r[0] < n),
        }
        expression, matches = filters[how]
        kept = Counter({r: c for r, c in self.latest_rows.items() if not matches(r)})
        snap = self.table.delete(expression)
        assert (snap is None) == (kept == self.latest_rows), f"delete {expression} returned {snap}"
        if snap is not None:
            assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE
            assert snap.properties.get("lakefmt.operation") == "delete"
        self.landed_snapshot(snap, kept)

    @precondition(lambda self: bool(self.snapshots))
    @rule(name=st.sampled_from(TAG_NAMES), pick=st.integers(0, 1 << 20))
    def create_tag(self, name: str, pick: int) -> None:
        """Tag any retained snapshot; a name already taken is refused and changes nothing."""
        ids = sorted(self.snapshots)
        sid = ids[pick % len(ids)]
        if name in self.tags:
            with pytest.raises(lakefmt.TagAlreadyExistsError):
                self.table.create_tag(name, sid)
            return
        assert self.table.create_tag(name, sid).snapshot_id == sid
        self.tags[name] = Counter(self.snapshots[sid])

    @precondition(lambda self: bool(self.tags))
    @rule(pick=st.integers(0, 1 << 20))
    def delete_tag(self, pick: int) -> None:
        name = sorted(self.tags)[pick % len(self.tags)]
        self.table.delete_tag(name)
        del self.tags[name]

    @precondition(lambda self: bool(self.snapshots))
    @rule(by_tag=st.booleans(), pick=st.integers(0, 1 << 20), expire_after=st.sampled_from([None, 1, 2]))
    def restore(self, by_tag: bool, pick: int, expire_after: int | None) -> None:
        """Restore a retained snapshot, or a tag (its snapshot may have expired): a new snapshot with its rows, or
        none when the table holds exactly its files already. The job's dedup marks are carried forward (the
        replay rule then checks a replay is still skipped). Often an expiration follows at once: the window it
        expires holds the snapshots that deleted the files the restore adds again (the trap of path reuse)."""
        marks = self.table.commit_user_identifier(USER)
        if by_tag and self.tags:
            name = sorted(self.tags)[pick % len(self.tags)]
            rows, snap = self.tags[name], self.table.restore(tag=name)
        else:
            ids = sorted(self.snapshots)
            sid = ids[pick % len(ids)]
            rows, snap = self.snapshots[sid], self.table.restore(sid)
        if snap is not None:
            assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE
            assert snap.properties.get("lakefmt.operation") == "restore"
            assert self.table.commit_user_identifier(USER) == marks
        self.landed_snapshot(snap, Counter(rows))
        if expire_after is not None:
            self.expire(expire_after)

    @rule(retain_max=st.integers(1, 4))
    def expire(self, retain_max: int) -> None:
        report = self.table.expire_snapshots(retain_max=retain_max)
        gone = sorted(self.snapshots)[:-retain_max]
        assert report.expired_snapshots == gone
        for sid in gone:
            del self.snapshots[sid]

    @rule()
    def orphan_clean(self) -> None:
        self.table.remove_orphan_files(older_than=0)
        files = {f.path for f in self.table.io.walk()}
        refs = referenced_files(MetaStore(self.table.io))
        assert unreferenced(files, refs) == set()
        assert refs - files <= {layout.LATEST, layout.EARLIEST}

    @rule(dts=row_dts)
    def abandoned_write(self, dts: list[str | None]) -> None:
        """A writer task whose commit never comes: garbage, invisible to readers."""
        with self.table.new_writer() as writer:
            writer.write(as_table(self.new_rows(dts)))
            writer.prepare_commit()

    @rule()
    def reopen(self) -> None:
        self.table = lakefmt.open_table(self.uri)

    # -- the invariant ----------------------------------------------------------------------------------
    @invariant()
    def equals_model(self) -> None:
        if not hasattr(self, "table"):
            return
        fresh = lakefmt.open_table(self.uri)
        assert [s.id for s in fresh.snapshots()] == sorted(self.snapshots)
        assert rows_of(fresh.to_arrow()) == self.latest_rows
        for sid, rows in self.snapshots.items():
            assert rows_of(fresh.to_arrow(snapshot_id=sid)) == rows, f"time travel to snapshot {sid}"


    @invariant()
    def tags_read(self) -> None:
        """Every tag reads its snapshot's rows, whatever expired and whatever orphan-clean removed."""
        if not hasattr(self, "table"):
            return
        fresh = lakefmt.open_table(self.uri)
        assert [t.name for t in fresh.tags()] == sorted(self.tags)
        for name, rows in self.tags.items():
            assert rows_of(fresh.to_arrow(tag=name)) == rows, f"tag {name}"


TableMachine.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTableModel = TableMachine.TestCase
