"""A key's changes spread over several writer tasks of one commit: the commit settles each key on its own, whichever
task wrote each change and in whichever order the tasks' messages reach the committer. After every commit the key
table equals a plain dict that applied the commit's changes in ``sequence.field`` order to the state before it:
for change-data input (``rowkind.field``: a winning delete removes the key, an update's before-image is ignored)
and for rowkind-less upserts (the largest ``sequence.field`` value wins)."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("op", pa.string()), ("lsn", pa.int64())])
Change = tuple[int, int, str, int]  #: (id, qty, op, lsn)
State = dict[int, tuple[int, int]]  #: id -> (qty, lsn) of its live row

#: docs/spark.md's "Change data into a key table": three micro-batches of a Debezium change log
DOC_LOG: list[list[Change]] = [
    [(1, 1, "r", 1), (2, 2, "r", 2), (3, 3, "r", 3)],
    [(1, 5, "u", 4), (2, 2, "d", 5), (4, 1, "c", 6), (1, 6, "u", 7)],
    [(4, 9, "u", 8), (3, 3, "d", 9), (5, 2, "c", 10), (4, 9, "d", 11)],
]
DELETES = {"d", "-D"}
IGNORED = {"-U"}


def _rows(changes: list[Change]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, c, strict=True)) for c in changes], SCHEMA)


def _create(root: str, *, rowkind: str | None, bucket: int) -> lakefmt.Table:
    options = {"bucket": str(bucket), "sequence.field": "lsn"}
    if rowkind is not None:
        options |= {"rowkind.field": "op", "rowkind.format": rowkind}
    return lakefmt.create_table(root, SCHEMA, primary_key=["id"], options=options)


def _commit(table: lakefmt.Table, tasks: list[list[Change]], identifier: int) -> None:
    """One commit of several writer tasks' messages, in the order given (a task may have written nothing)."""
    messages = []
    for changes in tasks:
        with table.new_writer() as writer:
            if changes:
                writer.write(_rows(changes))
            messages.append(writer.prepare_commit())
    table.new_committer("split-job", compact_in_background=False).commit(messages, identifier=identifier)


def _apply(state: State, changes: list[Change]) -> State:
    """The model: the commit's changes in ``sequence.field`` order; a change older than the key's live row loses."""
    out = dict(state)
    for key, qty, op, lsn in sorted(changes, key=lambda c: c[3]):
        if op in IGNORED or (key in out and out[key][1] > lsn):
            continue
        if op in DELETES:
            out.pop(key, None)
        else:
            out[key] = (qty, lsn)
    return out


def _live(table: lakefmt.Table) -> State:
    rows = table.scan(columns=["id", "qty", "lsn"]).to_arrow().to_pylist()
    out = {r["id"]: (r["qty"], r["lsn"]) for r in rows}
    assert len(out) == len(rows), f"two live rows of a key: {sorted(r['id'] for r in rows)}"
    return out


@pytest.mark.parametrize("reverse", [False, True], ids=["messages-in-task-order", "messages-reversed"])
def test_doc_change_log_split_over_two_tasks_settles_every_key(tmp_path: Path, reverse: bool) -> None:
    """Every split of the third micro-batch over two tasks that puts key 4's update and delete in different tasks,
    both orders of the messages: key 4's delete (lsn 11) wins over its update (lsn 8) and removes the row committed
    before (lsn 6); the second micro-batch is split too (key 1's two updates in different tasks)."""
    first, second, third = DOC_LOG
    for split in (s for s in range(1 << len(third)) if s & 1 != (s >> 3) & 1):  # rows 0 and 3: key 4's
        table = _create(str(tmp_path / f"t{split}"), rowkind="debezium", bucket=2)
        _commit(table, [first], 0)
        _commit(table, [second[0::2], second[1::2]], 1)
        tasks = [[c for j, c in enumerate(third) if (split >> j) & 1 == w] for w in (0, 1)]
        _commit(table, tasks[::-1] if reverse else tasks, 2)
        assert _live(table) == {1: (6, 7), 5: (2, 10)}, f"split {split:04b}"


def _change_log(draw: st.DrawFn, rowkind: str | None) -> list[list[Change]]:
    """Commits of a random change log of a few keys (distinct, increasing ``lsn``): inserts, updates (with a
    before-image for Paimon's spelling) and deletes of keys that are live at that point of the log."""
    commits: list[list[Change]] = []
    live: dict[int, int] = {}
    lsn = 0
    for _ in range(draw(st.integers(1, 4))):
        changes: list[Change] = []
        for _ in range(draw(st.integers(1, 8))):
            key = draw(st.integers(0, 4))
            qty = draw(st.integers(0, 99))
            lsn += 1
            if rowkind is None:
                changes.append((key, qty, "", lsn))
            elif key not in live:
                changes.append((key, qty, "+I" if rowkind == "paimon" else "c", lsn))
                live[key] = qty
            elif draw(st.booleans()):
                if rowkind == "paimon":
                    changes.append((key, live[key], "-U", lsn))
                    lsn += 1
                changes.append((key, qty, "+U" if rowkind == "paimon" else "u", lsn))
                live[key] = qty
            else:
                changes.append((key, live.pop(key), "-D" if rowkind == "paimon" else "d", lsn))
        commits.append(changes)
    return commits


@st.composite
def _jobs(draw: st.DrawFn) -> tuple[str | None, int, list[list[list[Change]]], list[bool]]:
    """A table's spelling and bucket count, and its commits, each a change log's slice split at random over 1..3
    tasks (each task's rows shuffled), and whether a compaction follows each commit."""
    rowkind = draw(st.sampled_from([None, "paimon", "debezium"]))
    bucket = draw(st.integers(1, 3))
    commits = []
    for changes in _change_log(draw, rowkind):
        n = draw(st.integers(1, 3))
        tasks: list[list[Change]] = [[] for _ in range(n)]
        for change in changes:
            tasks[draw(st.integers(0, n - 1))].append(change)
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        for task in tasks:
            rng.shuffle(task)
        commits.append(tasks)
    compact = [draw(st.booleans()) for _ in commits]
    return rowkind, bucket, commits, compact


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=_jobs())
def test_changes_split_over_tasks_of_one_commit_equal_the_model(job: Any) -> None:
    rowkind, bucket, commits, compact = job
    root = tempfile.mkdtemp()
    try:
        table = _create(f"{root}/t", rowkind=rowkind, bucket=bucket)
        state: State = {}
        for i, (tasks, then_compact) in enumerate(zip(commits, compact, strict=True)):
            _commit(table, tasks, i)
            state = _apply(state, [c for task in tasks for c in task])
            assert _live(table) == state, f"after commit {i}"
            if then_compact:
                table.compact()
                assert _live(table) == state, f"after compacting commit {i}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
