"""Model-based test of key tables: hypothesis drives random sequences of upserts (``Table.upsert``, ``append``, and a
job's committer with several writer tasks; keys repeat within a call and across calls, with and without
``sequence.field``, null values included), replays of a landed job commit, overwrites (of the table, a partition,
the partitions written), deletes by key (some keys without a
live row) and by filter, compactions, expiration, tags (read by ``scan(tag=)``, also after their snapshot expired),
restores of retained snapshots and reopening the table. After every step the table equals a plain dict of key ->
(value, sequence) per retained snapshot: the latest rows, at most one live row per key, the snapshot's record
count, by time travel every retained snapshot and every tag, and between retained snapshots the change feed
(``changes``: what each snapshot changed, for the changelog producers ``none``, ``lookup`` and ``input``) and the
incremental scan (the rows the later one holds that the earlier did not).

Tables get small bucket counts, tiny merge thresholds or tiny files (chosen per example).
``LAKEFMT_PROPERTY_EXAMPLES=N`` runs N examples (with more steps each, freshly random) instead of the few CI runs;
``LAKEFMT_KEY_MODEL_COMPACT=0`` leaves compaction out."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.read.changes import _Walker
from lakefmt.spec import layout

SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
KEY = ("k", "dt")
PARTS = ["a", "b", "c"]
OPTION_SETS = [
    {"bucket": "1"},
    {"bucket": "3"},
    {"bucket": "2", "sequence.field": "ts"},
    {"bucket": "4", "manifest.merge-min-count": "2", "manifest.full-compaction-threshold": "2"},
    {"bucket": "2", "sequence.field": "ts", "write.row-group-rows": "2", "target-file-size": "1"},
    {"bucket": "3", "changelog-producer": "lookup"},
    {"bucket": "2", "sequence.field": "ts", "changelog-producer": "lookup", "write.row-group-rows": "2"},
    {"bucket": "2", "changelog-producer": "input"},
    {"bucket": "3", "changelog-producer": "input", "write.row-group-rows": "2", "target-file-size": "1"},
]
USER = "key-job"
TAG_NAMES = ["t1", "t2"]
#: whether the compact rule runs (compaction of a key table folds deletion vectors into new files)
COMPACT = os.environ.get("LAKEFMT_KEY_MODEL_COMPACT", "1") != "0"
EXAMPLES = int(os.environ.get("LAKEFMT_PROPERTY_EXAMPLES", "0") or 0)

Key = tuple[int, str]
Version = tuple[int, int | None]  #: (v, ts)
State = dict[Key, Version]
Row = tuple[int, str, int | None]  #: (k, dt, ts); v is given when written

rows_st = st.lists(
    st.tuples(st.integers(0, 7), st.sampled_from(PARTS), st.one_of(st.none(), st.integers(0, 4))),
    min_size=1,
    max_size=8,
)


def _order(ts: int | None) -> tuple[bool, int]:
    """A sequence value's rank: null is smaller than any other."""
    return (ts is not None, ts or 0)


def as_table(rows: list[tuple[int, str, int, int | None]]) -> pa.Table:
    return pa.table(
        {"k": [r[0] for r in rows], "dt": [r[1] for r in rows], "v": [r[2] for r in rows], "ts": [r[3] for r in rows]},
        schema=SCHEMA,
    )


def read_state(table: lakefmt.Table, **scan: Any) -> State:
    """What a scan reads, by key; fails on two live rows for one key."""
    out: State = {}
    for r in table.scan(**scan).to_arrow().to_pylist():
        key = (r["k"], r["dt"])
        assert key not in out, f"two live rows for key {key}: {out[key]} and {(r['v'], r['ts'])}"
        out[key] = (r["v"], r["ts"])
    return out


def _difference(sid: int, before: State, after: State) -> list[tuple[int, str, Key, Version]]:
    """The change rows of snapshot ``sid``, which turned ``before`` into ``after``: (snapshot, type, key, row)."""
    out: list[tuple[int, str, Key, Version]] = []
    for key, row in before.items():
        if key not in after:
            out.append((sid, "delete", key, row))
        elif after[key] != row:
            out += [(sid, "update_preimage", key, row), (sid, "update_postimage", key, after[key])]
    out += [(sid, "insert", key, row) for key, row in after.items() if key not in before]
    return out


def _replayed(state: State, feed: pa.Table) -> State:
    """``state`` with the change rows of ``feed`` applied in order."""
    out = dict(state)
    for r in feed.to_pylist():
        key = (r["k"], r["dt"])
        if r["_change_type"] in ("insert", "update_postimage"):
            out[key] = (r["v"], r["ts"])
        else:
            out.pop(key, None)
    return out


def check_feed(uri: str, snapshots: dict[int, State], *, every_pair: bool, starts: int | None = None) -> None:
    """For retained snapshots ``a < b`` (``a`` 0 too while snapshot 1 is retained), with the model's rows of each
    retained snapshot in ``snapshots``: ``changes(a, b)`` holds, snapshot by snapshot, what each one changed
    (``input``: the feed replayed on ``a``'s rows gives ``b``'s, as it shows the input, not its effect), and
    ``scan(from_snapshot=a, to_snapshot=b)`` the rows of ``b`` that ``a`` did not hold. ``b`` is the latest
    snapshot unless ``every_pair``: every pair ends at the latest snapshot once, and the feed of a retained range
    never changes, so checking those after every step checks each pair. ``starts``: at most this many starts (the
    first, the middle one, the last)."""
    if not snapshots:
        return
    ids = sorted(snapshots)
    firsts = ([0] if ids[0] == 1 else []) + ids[:-1]
    if starts is not None and len(firsts) > starts:
        firsts = sorted({firsts[0], firsts[len(firsts) // 2], firsts[-1]})
    table = lakefmt.open_table(uri)
    stored_input = table.table_schema().table_options.changelog_producer == "input"

    def state(sid: int) -> State:
        return snapshots[sid] if sid else {}

    for b in ids if every_pair else ids[-1:]:
        for a in (a for a in firsts if a < b):
            feed = table.changes(a, b)
            if stored_input:
                assert _replayed(state(a), feed) == state(b), f"input feed changes({a}, {b}) replayed"
            else:
                expected = Counter(c for s in range(a + 1, b + 1) for c in _difference(s, state(s - 1), state(s)))
                got = Counter(
                    (r["_commit_snapshot"], r["_change_type"], (r["k"], r["dt"]), (r["v"], r["ts"]))
                    for r in feed.to_pylist()
                )
                assert got == expected, f"changes({a}, {b})"
            added = {k: r for k, r in state(b).items() if state(a).get(k) != r}
            assert read_state(table, from_snapshot=a, to_snapshot=b) == added, f"scan from {a} to {b}"


class KeyTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakefmt-key-model-")
        self.uri = f"{self.dir}/t"
        self.snapshots: dict[int, State] = {}  # the model: rows of every retained snapshot
        self.tags: dict[str, State] = {}
        self.next_v = 0
        self.identifier = 0
        self.landed: tuple[int, list[Any]] | None = None  # the job's last landed identifier and its rows
        self.sequenced = False

    @initialize(options=st.sampled_from(OPTION_SETS))
    def create(self, options: dict[str, str]) -> None:
        self.sequenced = "sequence.field" in options
        self.table = lakefmt.create_table(self.uri, SCHEMA, partition_by=["dt"], primary_key=list(KEY), options=options)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model --------------------------------------------------------------------------------------
    @property
    def latest(self) -> State:
        return self.snapshots[max(self.snapshots)] if self.snapshots else {}

    def settled(self, rows: list[tuple[int, str, int, int | None]]) -> State:
        """``rows`` written together (in order), one per key: the last, or with a sequence field the largest value
        (ties: the last)."""
        batch: State = {}
        for k, dt, v, ts in rows:
            old = batch.get((k, dt))
            if old is None or not self.sequenced or _order(ts) >= _order(old[1]):
                batch[(k, dt)] = (v, ts)
        return batch

    def upserted(self, rows: list[tuple[int, str, int, int | None]]) -> State:
        """The latest state after upserting ``rows``: :meth:`settled`, then against the live row the same rule, a
        tie to the new row."""
        state = dict(self.latest)
        batch = self.settled(rows)
        for key, (v, ts) in batch.items():
            live = state.get(key)
            if live is None or not self.sequenced or _order(ts) >= _order(live[1]):
                state[key] = (v, ts)
        return state

    def landed_snapshot(self, snap: lakefmt.Snapshot | None, state: State) -> None:
        """A write returned ``snap``: a new snapshot (the next id) with ``state``, or None (nothing changed). A key
        table compacts its buckets after commits: COMPACT snapshots may follow, with the same rows."""
        if snap is None:
            assert state == self.latest, "a commit that changes the table created no snapshot"
            return
        assert snap.id == max(self.snapshots, default=0) + 1
        self.snapshots[snap.id] = state
        latest = self.table.latest_snapshot()
        for sid in range(snap.id + 1, (latest.id if latest else 0) + 1):
            assert self.table.snapshot(sid).commit_kind is lakefmt.CommitKind.COMPACT, f"snapshot {sid}"
            self.snapshots[sid] = dict(state)

    def with_values(self, rows: list[Row]) -> list[tuple[int, str, int, int | None]]:
        out = [(k, dt, self.next_v + i, ts) for i, (k, dt, ts) in enumerate(rows)]
        self.next_v += len(rows)
        return out

    # -- rules ------------------------------------------------------------------------------------------
    @rule(rows=rows_st, how=st.sampled_from(["upsert", "append"]))
    def upsert(self, rows: list[Row], how: str) -> None:
        full = self.with_values(rows)
        expected = self.upserted(full)
        snap = getattr(self.table, how)(as_table(full))
        assert snap is not None, "an upsert of rows commits"
        self.landed_snapshot(snap, expected)

    @rule(rows=rows_st, tasks=st.integers(1, 3))
    def job_upsert(self, rows: list[Row], tasks: int) -> None:
        """A job: writer tasks, one committer under a stable commit user. Of two rows of one key in different
        tasks' messages, the later message's wins."""
        full = self.with_values(rows)
        parts = [full[i::tasks] for i in range(tasks) if full[i::tasks]]
        messages = []
        for part in parts:
            with self.table.new_writer() as writer:
                writer.write(as_table(part))
                messages.append(writer.prepare_commit())
        self.identifier += 1
        expected = self.upserted([r for part in parts for r in part])
        snap = self.table.new_committer(USER).commit(messages, identifier=self.identifier)
        assert snap is not None
        self.landed_snapshot(snap, expected)
        self.landed = (self.identifier, [r for part in parts for r in part])

    @rule(
        rows=st.lists(
            st.tuples(st.integers(0, 7), st.sampled_from(PARTS), st.one_of(st.none(), st.integers(0, 4))),
            max_size=6,
        ),
        scope=st.sampled_from(["table", "partition", "dynamic"]),
        dt=st.sampled_from(PARTS),
    )
    def overwrite(self, rows: list[Row], scope: str, dt: str) -> None:
        """An overwrite of the whole table, of one partition, or of the partitions written: the scope's rows are
        replaced by the new rows, settled among themselves (two rows of a key: as within an upsert)."""
        if scope == "partition":
            rows = [(k, dt, ts) for k, _, ts in rows]
        full = self.with_values(rows)
        batch = self.settled(full)
        gone = {r[1] for r in full} if scope == "dynamic" else {dt} if scope == "partition" else set(PARTS)
        expected = {key: r for key, r in self.latest.items() if key[1] not in gone}
        expected.update(batch)
        if scope == "partition":
            snap = self.table.overwrite(as_table(full), partition={"dt": dt})
        else:
            snap = self.table.overwrite(as_table(full), dynamic=scope == "dynamic")
        self.landed_snapshot(snap, expected)

    @precondition(lambda self: self.landed is not None)
    @rule()
    def replay_landed_commit(self) -> None:
        assert self.landed is not None
        identifier, rows = self.landed
        with self.table.new_writer() as writer:
            writer.write(as_table([(k, dt, v + 10_000, ts) for k, dt, v, ts in rows]))
            messages = [writer.prepare_commit()]
        assert self.table.new_committer(USER).commit(messages, identifier=identifier) is None
        self.table.discard(messages)

    @rule(keys=st.lists(st.tuples(st.integers(0, 9), st.sampled_from(PARTS)), min_size=1, max_size=6))
    def delete_keys(self, keys: list[Key]) -> None:
        expected = {k: v for k, v in self.latest.items() if k not in set(keys)}
        snap = self.table.delete_keys(pa.table({"k": [k for k, _ in keys], "dt": [d for _, d in keys]}))
        assert (snap is None) == (expected == self.latest)
        self.landed_snapshot(snap, expected)

    @rule(
        how=st.sampled_from(["k <", "dt ==", "dt == and k >=", "v odd", "ts null"]),
        n=st.integers(0, 8),
        dt=st.sampled_from(PARTS),
    )
    def delete(self, how: str, n: int, dt: str) -> None:
        filters = {
            "k <": (pc.field("k") < n, lambda k, r: k[0] < n),
            "dt ==": (pc.field("dt") == dt, lambda k, r: k[1] == dt),
            "dt == and k >=": ((pc.field("dt") == dt) & (pc.field("k") >= n), lambda k, r: k[1] == dt and k[0] >= n),
            "v odd": (pc.bit_wise_and(pc.field("v"), 1) == 1, lambda k, r: r[0] % 2 == 1),
            "ts null": (pc.field("ts").is_null(), lambda k, r: r[1] is None),
        }
        expression, matches = filters[how]
        expected = {k: r for k, r in self.latest.items() if not matches(k, r)}
        snap = self.table.delete(expression)
        assert (snap is None) == (expected == self.latest)
        if snap is not None:
            assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE
        self.landed_snapshot(snap, expected)

    @precondition(lambda self: COMPACT and bool(self.snapshots))
    @rule(min_files=st.integers(1, 3))
    def compact(self, min_files: int) -> None:
        """Compaction changes no row (deleted rows stay deleted, no key gets two rows); one COMPACT snapshot or
        none."""
        before = self.table.latest_snapshot()
        report = self.table.compact(min_files=min_files)
        self.landed_snapshot(report.snapshot, dict(self.latest))
        if report.snapshot is not None:
            assert before is not None and report.snapshot.commit_kind is lakefmt.CommitKind.COMPACT
            assert report.snapshot.commit_users == before.commit_users

    @rule(retain_max=st.integers(1, 4))
    def expire(self, retain_max: int) -> None:
        report = self.table.expire_snapshots(retain_max=retain_max)
        gone = sorted(self.snapshots)[:-retain_max]
        assert report.expired_snapshots == gone
        for sid in gone:
            del self.snapshots[sid]

    @precondition(lambda self: bool(self.snapshots))
    @rule(name=st.sampled_from(TAG_NAMES), pick=st.integers(0, 1 << 20))
    def create_tag(self, name: str, pick: int) -> None:
        ids = sorted(self.snapshots)
        sid = ids[pick % len(ids)]
        if name in self.tags:
            self.table.delete_tag(name)
        assert self.table.create_tag(name, sid).snapshot_id == sid
        self.tags[name] = dict(self.snapshots[sid])

    @precondition(lambda self: bool(self.snapshots))
    @rule(by_tag=st.booleans(), pick=st.integers(0, 1 << 20))
    def restore(self, by_tag: bool, pick: int) -> None:
        """Restore a retained snapshot or a tag: its rows again (its data and vector files), or no snapshot when
        the table holds exactly its files."""
        if by_tag and self.tags:
            name = sorted(self.tags)[pick % len(self.tags)]
            state, snap = self.tags[name], self.table.restore(tag=name)
        else:
            ids = sorted(self.snapshots)
            sid = ids[pick % len(ids)]
            state, snap = self.snapshots[sid], self.table.restore(sid)
        self.landed_snapshot(snap, dict(state))

    @rule()
    def orphan_clean(self) -> None:
        self.table.remove_orphan_files(older_than=0)
        files = {f.path for f in self.table.io.walk()}
        refs = referenced_files(MetaStore(self.table.io))
        assert unreferenced(files, refs) == set()

    @rule()
    def reopen(self) -> None:
        self.table = lakefmt.open_table(self.uri)

    # -- the invariants -----------------------------------------------------------------------------------
    @invariant()
    def equals_model(self) -> None:
        if not hasattr(self, "table"):
            return
        fresh = lakefmt.open_table(self.uri)
        assert [s.id for s in fresh.snapshots()] == sorted(self.snapshots)
        assert read_state(fresh) == self.latest
        for snap in fresh.snapshots():
            state = self.snapshots[snap.id]
            assert snap.total_record_count == len(state), f"snapshot {snap.id}'s record count"
            assert read_state(fresh, snapshot_id=snap.id) == state, f"time travel to snapshot {snap.id}"

    @invariant()
    def tags_read(self) -> None:
        if not hasattr(self, "table") or not self.tags:
            return
        fresh = lakefmt.open_table(self.uri)
        assert [t.name for t in fresh.tags()] == sorted(self.tags)
        for name, state in self.tags.items():
            assert read_state(fresh, tag=name) == state, f"tag {name}"

    @invariant()
    def stored_changes_are_the_derived_ones(self) -> None:
        """With ``changelog-producer=lookup``: the change rows the latest snapshot stored are those derived from its
        files and vectors."""
        if not hasattr(self, "table"):
            return
        store = MetaStore(self.table.io)
        latest = store.latest_snapshot()
        if latest is None or latest.changelog_manifest_list is None or store.try_snapshot(latest.id - 1) is None:
            return
        schema = store.latest_schema()
        if schema.table_options.changelog_producer != "lookup":  # ``input`` stores the input, not its effect
            return

        def rows(snap: Any) -> list[tuple[Any, ...]]:
            got = _Walker(self.table.io, store, schema).changes(snap)
            assert got is not None
            table, codes = got
            columns = [table.column(n).to_pylist() for n in table.column_names]
            return sorted(zip(codes.tolist(), *columns, strict=True), key=repr)

        assert rows(latest) == rows(dataclasses.replace(latest, changelog_manifest_list=None))

    @invariant()
    def feed_and_incremental_scans_are_the_differences(self) -> None:
        """:func:`check_feed`, from a few starts (among them the first and the last; every one on long runs)."""
        if hasattr(self, "table"):
            check_feed(self.uri, self.snapshots, every_pair=bool(EXAMPLES), starts=None if EXAMPLES else 3)

    @invariant()
    def live_files_exist(self) -> None:
        """Every file a retained snapshot or a tag references is there (expire and orphan-clean keep them)."""
        if not hasattr(self, "table"):
            return
        files = {f.path for f in self.table.io.walk()}
        missing = referenced_files(MetaStore(self.table.io)) - files - {layout.LATEST, layout.EARLIEST}
        assert not missing, f"referenced but missing: {sorted(missing)[:3]}"


KeyTableMachine.TestCase.settings = settings(
    max_examples=EXAMPLES or 20,
    stateful_step_count=40 if EXAMPLES else 30,
    deadline=None,
    derandomize=not EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow],
)
TestKeyTableModel = KeyTableMachine.TestCase


def test_model_counts_rows_like_the_table() -> None:
    """The model's rule for a sequence field (null smallest, ties to the later row), checked on one case."""
    machine = KeyTableMachine()
    try:
        machine.sequenced = True
        machine.snapshots = {1: {(1, "a"): (0, 3), (2, "a"): (1, None)}}
        got = machine.upserted([(1, "a", 5, 2), (1, "a", 6, None), (2, "a", 7, None), (3, "a", 8, 1), (3, "a", 9, 1)])
        assert got == {(1, "a"): (0, 3), (2, "a"): (7, None), (3, "a"): (9, 1)}
        assert Counter(map(_order, [None, 0, 1])) == Counter({(False, 0): 1, (True, 0): 1, (True, 1): 1})
    finally:
        machine.teardown()
