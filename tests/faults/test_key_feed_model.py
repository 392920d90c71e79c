"""Model-based test of a key table's change feed and incremental scans through restores, rollbacks to a tag and
expiration (issue 36: the feed reused a file's decoded deletion vector for another one deleting as many rows, and a
restore had reset the file's vector in between).

A small key space in one bucket, no automatic compaction: upserts and deletes by key mark rows of the same few files
over and over, and restores (of a retained snapshot, or a rollback to a tag) give those files older vectors back.
After every step, for every retained start ``a`` and the latest snapshot ``b`` (each pair is the latest pair once,
and the feed of a retained range never changes), ``changes(a, b)`` and ``scan(from_snapshot=a, to_snapshot=b)``
equal the model's differences (:func:`faults.test_key_model.check_feed`), for the changelog producers ``none``,
``lookup`` and ``input``. ``LAKEFMT_PROPERTY_EXAMPLES=N`` runs N freshly random examples with more steps."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakefmt

from .test_key_model import EXAMPLES, SCHEMA, State, as_table, check_feed

keys_st = st.lists(st.integers(0, 2), min_size=1, max_size=3)


class KeyFeedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakefmt-key-feed-")
        self.uri = f"{self.dir}/t"
        self.snapshots: dict[int, State] = {}
        self.tags: dict[str, State] = {}
        self.next_v = 0

    @initialize(producer=st.sampled_from(["none", "none", "lookup", "input"]), small_groups=st.booleans())
    def create(self, producer: str, small_groups: bool) -> None:
        options = {"bucket": "1", "compaction.auto": "false", "changelog-producer": producer}
        if small_groups:
            options["write.row-group-rows"] = "2"
        self.table = lakefmt.create_table(self.uri, SCHEMA, partition_by=["dt"], primary_key=["k", "dt"],
                                          options=options)  # fmt: skip

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def latest(self) -> State:
        return self.snapshots[max(self.snapshots)] if self.snapshots else {}

    def landed(self, snap: lakefmt.Snapshot | None, state: State) -> None:
        if snap is None:
            assert state == self.latest
            return
        assert snap.id == max(self.snapshots, default=0) + 1
        self.snapshots[snap.id] = state

    @rule(keys=keys_st)
    def upsert(self, keys: list[int]) -> None:
        rows = [(k, "a", self.next_v + i, None) for i, k in enumerate(keys)]
        self.next_v += len(rows)
        state = dict(self.latest)
        state.update({(k, dt): (v, ts) for k, dt, v, ts in rows})
        self.landed(self.table.upsert(as_table(rows)), state)

    @rule(keys=keys_st)
    def delete_keys(self, keys: list[int]) -> None:
        state = {k: r for k, r in self.latest.items() if k[0] not in keys}
        self.landed(self.table.delete_keys(pa.table({"k": keys, "dt": ["a"] * len(keys)})), state)

    @precondition(lambda self: bool(self.snapshots))
    @rule(pick=st.integers(0, 1 << 10))
    def restore(self, pick: int) -> None:
        ids = sorted(self.snapshots)
        sid = ids[pick % len(ids)]
        self.landed(self.table.restore(sid), dict(self.snapshots[sid]))

    @precondition(lambda self: bool(self.snapshots))
    @rule(name=st.sampled_from(["t1", "t2"]), pick=st.integers(0, 1 << 10))
    def create_tag(self, name: str, pick: int) -> None:
        ids = sorted(self.snapshots)
        sid = ids[pick % len(ids)]
        if name in self.tags:
            self.table.delete_tag(name)
        self.table.create_tag(name, sid)
        self.tags[name] = dict(self.snapshots[sid])

    @precondition(lambda self: bool(self.tags))
    @rule(pick=st.integers(0, 1))
    def rollback_to_tag(self, pick: int) -> None:
        name = sorted(self.tags)[pick % len(self.tags)]
        self.landed(self.table.restore(tag=name), dict(self.tags[name]))

    @rule(retain_max=st.integers(2, 5))
    def expire(self, retain_max: int) -> None:
        report = self.table.expire_snapshots(retain_max=retain_max)
        gone = sorted(self.snapshots)[:-retain_max]
        assert report.expired_snapshots == gone
        for sid in gone:
            del self.snapshots[sid]

    @invariant()
    def feed_and_incremental_scans_are_the_differences(self) -> None:
        if hasattr(self, "table"):
            check_feed(self.uri, self.snapshots, every_pair=bool(EXAMPLES))


KeyFeedMachine.TestCase.settings = settings(
    max_examples=EXAMPLES or 40,
    stateful_step_count=40 if EXAMPLES else 14,
    deadline=None,
    derandomize=not EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow],
)
TestKeyFeedModel = KeyFeedMachine.TestCase


@pytest.mark.parametrize("producer", ["none", "lookup", "input"])
def test_the_issue_sequence(producer: str) -> None:
    """The steps of issue 36, the model checked after each: a restore gives file F back no vector, then a later
    commit deletes another row of F, as many as F's vector deleted before the restore."""
    machine = KeyFeedMachine()
    try:
        machine.create(producer, small_groups=False)
        steps = [
            lambda: machine.upsert([0, 3]),
            lambda: machine.delete_keys([3]),
            lambda: machine.upsert([3]),
            lambda: machine.restore(0),
            lambda: machine.create_tag("t1", 0),
            lambda: machine.delete_keys([0]),
            lambda: machine.rollback_to_tag(0),
            lambda: machine.upsert([3]),
            lambda: machine.expire(3),
            lambda: machine.delete_keys([0]),
        ]
        for step in steps:
            step()
            machine.feed_and_incremental_scans_are_the_differences()
    finally:
        machine.teardown()
