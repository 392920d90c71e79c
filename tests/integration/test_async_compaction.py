"""Automatic compaction in the table's worker thread (``compaction.async``): the append returns before the
compaction runs, the worker takes the commits it fell behind on together, a failure is logged and retried, the
queue is finished at interpreter exit, and appends racing the worker land with every row once."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.errors import InvalidOptionError
from lakefmt.maintenance import compact as compact_module
from lakefmt.spec import CommitKind, Snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
ASYNC = {"compaction.auto": "true", "compaction.async": "true", "compaction.min.file-num": "3", "write.fsync": "false"}


def batch(start: int, n: int = 10) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "dt": ["a" if i % 2 else "b" for i in ids]}, schema=SCHEMA)


def kinds(t: lakefmt.Table) -> Counter[str]:
    return Counter(s.commit_kind.value for s in t.snapshots())


def ids(t: lakefmt.Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def append_in_child(uri: str, rows: int) -> None:
    """Three appends of ``rows`` rows (ids 0 up) to partition 'a' in a child process that then exits at once."""
    script = textwrap.dedent(
        f"""
        import pyarrow as pa, lakefmt
        t = lakefmt.open_table({uri!r})
        for k in range(3):
            ids = list(range({rows} * k, {rows} * k + {rows}))
            t.append(pa.table({{"id": ids, "dt": ["a"] * len(ids)}}, schema=t.schema()))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The worker's job, held at its start until ``release`` is set; ``calls`` records the snapshots of each."""

    class Held:
        started = threading.Event()
        release = threading.Event()
        calls: list[list[int]] = []

    real = compact_module.auto_compact_after

    def job(table: lakefmt.Table, snaps: Sequence[Snapshot]) -> Any:
        Held.calls.append([s.id for s in snaps])
        Held.started.set()
        assert Held.release.wait(30)
        return real(table, snaps)

    import lakefmt.maintenance.after_commit as after_module  # where a commit hands its compaction over

    monkeypatch.setattr(after_module, "auto_compact_after", job)
    yield Held
    Held.release.set()


def test_the_append_returns_while_the_compaction_waits_and_the_worker_takes_what_it_fell_behind_on(
    tmp_path: Path, held: Any
) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options=ASYNC)
    t.append(batch(0))
    assert held.started.wait(10)  # the worker took snapshot 1 and is held
    for k in range(1, 6):
        t.append(batch(10 * k))  # each returns: nothing waits for the worker
    assert kinds(t) == {"APPEND": 6}
    assert not t.wait_for_compaction(timeout=0.2)  # still held
    held.release.set()
    assert t.wait_for_compaction(timeout=30)
    assert held.calls[0] == [1]
    assert sorted(s for call in held.calls for s in call) == [1, 2, 3, 4, 5, 6]
    assert len(held.calls) <= 3  # the snapshots that piled up were taken together, not one job each
    assert kinds(t)["COMPACT"] >= 1
    assert ids(t) == list(range(60))
    assert [s.id for s in t.snapshots()] == list(range(1, len(t.snapshots()) + 1))
    per_partition = Counter(f.partition["dt"] for f in t.files())
    assert max(per_partition.values()) < 3


def test_a_writer_far_ahead_of_the_worker_waits_for_it(tmp_path: Path, held: Any) -> None:
    """Back-pressure: with compaction.max.file-num commits waiting for a busy worker, the next commit's call
    returns only once the worker has taken them (its snapshot has landed before that)."""
    options = {**ASYNC, "compaction.max.file-num": "4"}
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options=options)
    t.append(batch(0))
    assert held.started.wait(10)  # the worker holds snapshot 1's job
    for k in range(1, 5):
        t.append(batch(10 * k))  # 4 snapshots wait: the bound
    done = threading.Event()
    th = threading.Thread(target=lambda: (t.append(batch(50)), done.set()))
    th.start()
    assert not done.wait(0.5)  # held back
    assert kinds(lakefmt.open_table(t.uri))["APPEND"] == 6  # its commit landed all the same
    held.release.set()
    assert done.wait(30)
    th.join()
    assert t.wait_for_compaction(timeout=30)
    assert ids(t) == list(range(60))


def test_a_committer_may_compact_in_place_whatever_the_option(tmp_path: Path, held: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options=ASYNC)
    for k in range(3):
        committer = t.new_committer("w", compact_in_background=False)
        with t.new_writer() as w:
            w.write(batch(10 * k))
            committer.commit(w.prepare_commit(), identifier=k)
    assert held.calls == []  # never handed to the worker
    assert kinds(t)["COMPACT"] == 1  # done before commit returned
    assert ids(t) == list(range(30))


def test_a_failed_background_compaction_is_logged_and_the_next_commit_tries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import lakefmt.maintenance.after_commit as after_module  # where a commit hands its compaction over

    real = compact_module.auto_compact_after
    failures = [OSError("disk on fire")]

    def flaky(table: lakefmt.Table, snaps: Sequence[Snapshot]) -> Any:
        if failures:
            raise failures.pop()
        return real(table, snaps)

    monkeypatch.setattr(after_module, "auto_compact_after", flaky)
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options=ASYNC)
    with caplog.at_level(logging.WARNING, logger="lakefmt.compaction"):
        for k in range(3):
            t.append(batch(10 * k))
            assert t.wait_for_compaction(timeout=30)
        assert "disk on fire" in caplog.text
    assert ids(t) == list(range(30))  # every append landed
    t.append(batch(30))
    assert t.wait_for_compaction(timeout=30)
    assert kinds(t)["COMPACT"] == 1  # the next commit compacted what the failed one left
    assert ids(t) == list(range(40))


def test_the_queue_is_finished_at_interpreter_exit(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lakefmt.create_table(uri, SCHEMA, partition_by=["dt"], options=ASYNC)
    append_in_child(uri, rows=1)
    t = lakefmt.open_table(uri)
    assert kinds(t) == {"APPEND": 3, "COMPACT": 1}
    assert ids(t) == [0, 1, 2]


def test_writer_threads_racing_the_worker_land_every_row_once(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options=ASYNC)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for k in range(6):
                t.append(batch(1000 * w + 10 * k))
        except BaseException as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert t.wait_for_compaction(timeout=60)
    assert errors == []
    assert ids(t) == sorted(1000 * w + i for w in range(3) for i in range(60))
    assert kinds(t)["APPEND"] == 18 and kinds(t)["COMPACT"] >= 1
    assert all(s.commit_kind is not CommitKind.COMPACT or s.delta_record_count == 0 for s in t.snapshots())


def test_the_option_takes_booleans_only(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"compaction\.async"):
        lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"compaction.async": "sometimes"})


def test_a_compactions_files_record_the_newest_creation_time_of_their_inputs(tmp_path: Path) -> None:
    """Tiers go by creation time: a compacted file is as old as its newest rows, not as the moment it was
    written (an append landing while a compaction runs stays newer than the compaction's output)."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"write.fsync": "false"})
    for k in range(4):
        t.append(batch(10 * k))
    before = t.scan().entries().column("creation_time_ms").to_pylist()
    t.compact(min_files=2)
    after = t.scan().entries().column("creation_time_ms").to_pylist()
    assert after == [max(before)]
    assert ids(t) == list(range(40))


def test_the_queue_finished_at_exit_may_use_thread_pools(tmp_path: Path) -> None:
    """The exit drain runs before concurrent.futures refuses new work: a compaction whose writer syncs ahead in
    a pool (``write.sync-ahead-bytes``; on object stores, manifests are read in one) still lands."""
    uri = str(tmp_path / "t")
    options = {**ASYNC, "write.fsync": "true", "write.sync-ahead-bytes": "1"}
    lakefmt.create_table(uri, SCHEMA, partition_by=["dt"], options=options)
    append_in_child(uri, rows=100)
    t = lakefmt.open_table(uri)
    assert kinds(t) == {"APPEND": 3, "COMPACT": 1}
    assert ids(t) == list(range(300))


def test_a_child_forked_while_the_worker_runs_compacts_on_its_own_and_exits_at_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lakefmt.create_table(uri, SCHEMA, partition_by=["dt"], options=ASYNC)
    script = textwrap.dedent(
        f"""
        import os, sys, threading, pyarrow as pa, lakefmt
        import lakefmt.maintenance.after_commit as after_module  # where a commit hands its compaction over
        real, started, release = after_module.auto_compact_after, threading.Event(), threading.Event()
        def held(table, snaps):
            started.set()
            release.wait(30)
            return real(table, snaps)
        after_module.auto_compact_after = held
        t = lakefmt.open_table({uri!r})
        t.append(pa.table({{"id": [0], "dt": ["b"]}}, schema=t.schema()))
        assert started.wait(10)
        pid = os.fork()
        if pid == 0:  # the parent's worker is no thread here
            after_module.auto_compact_after = real
            for k in range(1, 4):
                t.append(pa.table({{"id": [k], "dt": ["a"]}}, schema=t.schema()))
            sys.exit(0 if t.wait_for_compaction(timeout=10) else 3)
        _, status = os.waitpid(pid, 0)
        release.set()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=20)
    t = lakefmt.open_table(uri)
    assert kinds(t)["COMPACT"] >= 1
    assert ids(t) == [0, 1, 2, 3]


def test_a_worker_that_failed_to_start_is_started_by_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name == "lakefmt-auto-compact":
            monkeypatch.setattr(threading.Thread, "start", real_start)
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"], options=ASYNC)
    t.append(batch(0))  # landed, whatever became of its compaction
    assert t.wait_for_compaction(timeout=5)  # nothing runs: nothing to wait for
    for k in range(1, 3):
        t.append(batch(10 * k))
    assert t.wait_for_compaction(timeout=10)
    assert kinds(t) == {"APPEND": 3, "COMPACT": 1}
    assert ids(t) == list(range(30))


def test_waiting_for_compaction_from_inside_the_worker_is_refused_not_a_wait_for_itself(tmp_path: Path) -> None:
    from lakefmt import hooks

    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options=ASYNC)
    seen: list[object] = []

    def hook(phase: str, snap: Snapshot) -> None:
        if phase == "after-publish" and snap.commit_kind is CommitKind.COMPACT:
            try:
                seen.append(t.wait_for_compaction(timeout=5))
            except RuntimeError as exc:
                seen.append(exc)

    remove = hooks.add_publish_hook(hook)
    try:
        for k in range(3):
            t.append(batch(k, 1))
        assert t.wait_for_compaction(timeout=10)
    finally:
        remove()
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError)
    assert kinds(t) == {"APPEND": 3, "COMPACT": 1}
