"""Overwrites racing: two committers that read the same latest snapshot and race to publish the next one.

A gate (a barrier in the FileIO, just before the publish of the snapshot file) holds both racers until both
are there, so every round is a real race for the same snapshot id, not two commits one after the other.
Outcomes allowed:

* two overwrites of the same partition (or of the whole table): exactly one lands; the other raises
  CommitConflictError and publishes nothing. Never both, never a mixture of their rows;
* an overwrite against an append to another partition: both land (the overwrite rebases: what it replaces
  did not change);
* an overwrite against an append to the same partition: if the append lands first the overwrite conflicts;
  if the overwrite lands first the append rebases on it (appends never conflict).

After every round each snapshot reads exactly what applying the landed commits in snapshot order to a model
gives. Ungated rounds (natural timing) are checked the same way. Processes on local disk, threads on memory,
threads and processes on S3 (moto).
"""

from __future__ import annotations

import queue
import threading
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import CommitConflictError
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

from .faultio import FaultIO
from .report import record

pytestmark = pytest.mark.slow

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
BASE_ROWS = [(1, "a"), (2, "a"), (3, "b"), (4, "c")]
TIMEOUT = 120

#: racer 0's action and racer 1's, per mode: ("overwrite", partition or None for the table) | ("append", dt)
MODES: dict[str, tuple[tuple[str, str | None], tuple[str, str | None]]] = {
    "partition-vs-partition": (("overwrite", "a"), ("overwrite", "a")),
    "table-vs-table": (("overwrite", None), ("overwrite", None)),
    "partition-vs-append-elsewhere": (("overwrite", "a"), ("append", "b")),
    "partition-vs-append-same": (("overwrite", "a"), ("append", "a")),
}

Row = tuple[int, str]


def racer_rows(who: int, rnd: int, action: tuple[str, str | None]) -> list[Row]:
    dt = action[1] or "a"
    return [(10_000 * (who + 1) + 100 * rnd + j, dt) for j in range(2)]


class Gate:
    """Hook of a FaultIO: holds the first publish of a snapshot file until the other racer is there too."""

    def __init__(self, barrier: Any) -> None:
        self.barrier = barrier
        self.passed = False

    def __call__(self, op: str, path: str) -> None:
        if op == "publish" and path.startswith(f"{layout.SNAPSHOT_DIR}/") and not self.passed:
            self.passed = True
            self.barrier.wait(timeout=TIMEOUT)


def racer(
    uri: str,
    options: dict[str, Any],
    who: int,
    mode: str,
    rounds: int,
    gated: bool,
    start: Any,
    gate: Any,
    results: Any,
) -> None:
    """Race ``rounds`` rounds as racer ``who`` of ``mode``; report [(outcome, detail)] per round."""
    outcomes: list[tuple[str, Any]] = []
    try:
        plain = lakefmt.open_table(uri, storage_options=options)
        io = FaultIO(plain.io)
        table = lakefmt.Table(io, MetaStore(io))
        action = MODES[mode][who]
        committer = table.new_committer(f"racer-{who}")
        for rnd in range(1, rounds + 1):
            start.wait(timeout=TIMEOUT)
            rows = racer_rows(who, rnd, action)
            with table.new_writer() as writer:
                writer.write(pa.table({"id": [r[0] for r in rows], "dt": [r[1] for r in rows]}, schema=SCHEMA))
                messages = [writer.prepare_commit()]
            io.hook = Gate(gate) if gated else None
            try:
                if action[0] == "append":
                    snap = committer.commit(messages, identifier=rnd)
                else:
                    partition = {"dt": action[1]} if action[1] else None
                    snap = committer.overwrite(messages, identifier=rnd, partition=partition)
                outcomes.append(("won", snap.id if snap else None))
            except CommitConflictError as exc:
                outcomes.append(("conflict", str(exc)))
                table.discard(messages)  # it did not land: its files are garbage
        results.put((who, "ok", outcomes))
    except BaseException:
        for barrier in (start, gate):
            barrier.abort()
        results.put((who, "error", traceback.format_exc()))


# -- the parent side -----------------------------------------------------------------------------------------


@dataclass
class Race:
    uri: str
    storage_options: dict[str, Any]
    mode: str
    rounds: int
    gated: bool


def run_race(race: Race, how: str, ctx: Any) -> dict[int, list[tuple[str, Any]]]:
    """Run both racers as threads or as processes of ``ctx``; return their outcomes per round."""
    if how == "threads":
        start, gate, results = threading.Barrier(2), threading.Barrier(2), queue.Queue()
        make = threading.Thread
    else:
        start, gate, results = ctx.Barrier(2), ctx.Barrier(2), ctx.Queue()
        make = ctx.Process
    workers = [
        make(
            target=racer,
            args=(race.uri, race.storage_options, who, race.mode, race.rounds, race.gated, start, gate, results),
        )
        for who in (0, 1)
    ]
    for w in workers:
        w.start()
    reports: dict[int, Any] = {}
    errors: list[str] = []
    for _ in workers:
        who, status, payload = results.get(timeout=TIMEOUT * 2)
        if status == "ok":
            reports[who] = payload
        else:
            errors.append(f"racer {who} failed:\n{payload}")
    for w in workers:
        w.join(timeout=TIMEOUT)
    assert not errors, "\n".join(errors)
    return reports


def check_race(race: Race, reports: dict[int, list[tuple[str, Any]]]) -> Counter[str]:
    """Replay the landed commits in snapshot order on a model; every snapshot must read as the model says."""
    table = lakefmt.open_table(race.uri, storage_options=race.storage_options)
    actions = MODES[race.mode]
    model: dict[int, Counter[Row]] = {1: Counter(BASE_ROWS)}
    tally: Counter[str] = Counter()
    for rnd in range(1, race.rounds + 1):
        outcome = {who: reports[who][rnd - 1] for who in (0, 1)}
        landed = sorted((detail, who) for who, (what, detail) in outcome.items() if what == "won")
        conflicts = [who for who, (what, _) in outcome.items() if what == "conflict"]
        tally["+".join(sorted(what for what, _ in outcome.values()))] += 1
        assert landed, f"round {rnd}: nothing landed {outcome}"
        for who in conflicts:
            assert actions[who][0] == "overwrite", f"round {rnd}: an append conflicted"
            assert "did not land" in outcome[who][1]
        if race.mode in ("partition-vs-partition", "table-vs-table") and race.gated:
            assert len(landed) == 1 and len(conflicts) == 1, f"round {rnd}: {outcome}"
        if race.mode == "partition-vs-append-elsewhere":
            assert not conflicts, f"round {rnd}: the overwrite did not rebase over an unrelated append"
        if race.mode == "partition-vs-append-same" and conflicts:
            assert landed[0][1] == 1, f"round {rnd}: the overwrite conflicted although it landed first"
        for snapshot_id, who in landed:
            assert snapshot_id == max(model) + 1, f"round {rnd}: snapshot {snapshot_id} is not the next one"
            rows = model[max(model)]
            kind, dt = actions[who]
            new = Counter(racer_rows(who, rnd, actions[who]))
            if kind == "append":
                rows = rows + new
            elif dt is None:
                rows = new
            else:
                rows = Counter({r: n for r, n in rows.items() if r[1] != dt}) + new
            model[snapshot_id] = rows
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == sorted(model)
    for sid, rows in model.items():
        got = table.to_arrow(snapshot_id=sid)
        assert Counter(zip(got.column("id").to_pylist(), got.column("dt").to_pylist(), strict=True)) == rows, sid
    table.remove_orphan_files(older_than=0)
    files = {f.path for f in table.io.walk()}
    assert unreferenced(files, referenced_files(MetaStore(table.io))) == set()
    return tally


def new_race(store: Any, mode: str, rounds: int, gated: bool) -> Race:
    t = lakefmt.create_table(  # every snapshot is one of the racers' commits: no automatic compaction
        store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options,
        options={"compaction.auto": "false"},
    )
    t.append(pa.table({"id": [r[0] for r in BASE_ROWS], "dt": [r[1] for r in BASE_ROWS]}, schema=SCHEMA))
    return Race(t.uri, store.storage_options, mode, rounds, gated)


class _Memory:
    """A memory store (one process: threads only)."""

    kind = "memory"
    storage_options: dict[str, Any] = {}

    def uri(self) -> str:
        return f"memory://race-{uuid.uuid4().hex}"


@pytest.fixture(
    params=[
        ("local", "processes", 8),
        ("memory", "threads", 8),
        pytest.param(("s3", "threads", 2), marks=pytest.mark.s3),
        pytest.param(("s3", "processes", 2), marks=pytest.mark.s3),
    ],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def setup(request: pytest.FixtureRequest) -> tuple[Any, str, int]:
    kind, how, rounds = request.param
    if kind == "memory":
        return _Memory(), how, rounds
    return request.getfixturevalue(f"{kind}_store"), how, rounds


@pytest.mark.parametrize("mode", list(MODES))
def test_racing_overwrites(setup: tuple[Any, str, int], mode: str, fault_ctx: Any) -> None:
    store, how, rounds = setup
    race = new_race(store, mode, rounds, gated=True)
    tally = check_race(race, run_race(race, how, fault_ctx))
    record("overwrite_race", f"{store.kind}-{how}/{mode}/gated", dict(tally))
    if mode in ("partition-vs-partition", "table-vs-table"):
        assert tally == {"conflict+won": rounds}
    if mode == "partition-vs-append-elsewhere":
        assert tally == {"won+won": rounds}


@pytest.mark.parametrize("mode", ["partition-vs-partition", "table-vs-table"])
def test_racing_overwrites_without_a_gate(local_store: Any, mode: str, fault_ctx: Any) -> None:
    """Natural timing: the second may start after the first landed (then it overwrites it, serially), or race
    it (then it conflicts); either way no snapshot holds a mixture, and each reads as the model says."""
    race = new_race(local_store, mode, 12, gated=False)
    tally = check_race(race, run_race(race, "processes", fault_ctx))
    record("overwrite_race", f"local-processes/{mode}/no gate", dict(tally))
