"""Automatic compaction off the committing thread (table option ``compaction.async``).

With ``compaction.auto`` alone, the compaction after a commit runs in the thread that committed, before
``Table.append`` returns: the writer waits for it. With ``compaction.async`` as well, a commit hands the
snapshot it landed to one worker thread per table object and returns at once; the worker compacts while the
writer goes on (Paimon's writers compact the same way, beside the writes), so on a machine with a core to spare
the compaction's file reads, writes and fsyncs overlap the next appends.

The worker takes every snapshot handed to it since it last ran, and compacts the partitions they touched,
planned on the table's latest snapshot (:func:`lakefmt.maintenance.compact.auto_compact_after`): when it falls
behind, several commits cost one plan. Nothing changes for safety: a compaction is a COMPACT commit like any
other (appends never conflict with it; it re-plans or gives up against a rewrite), and the worker is a daemon
thread, so a process that dies mid-compaction leaves what any crashed commit leaves (the table as before or after
it, and orphans for ``orphan-clean``). At a normal interpreter exit, what is queued is finished first (up to
:data:`EXIT_WAIT_SECONDS`); :func:`wait_idle` waits for it at any time (``Table.wait_for_compaction``).

A commit waits only when the worker is ``compaction.max.file-num`` commits behind (back-pressure, so that a
writer faster than its compaction cannot pile up small files without bound). The worker exits when it has had
nothing to do for :data:`IDLE_SECONDS`; the next commit starts another.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (registers its exit hook first, so that ours runs before it)
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence

from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot

__all__ = ["EXIT_WAIT_SECONDS", "IDLE_SECONDS", "submit", "wait_idle"]

log = logging.getLogger("lakefmt.compaction")

#: a worker with nothing to do for this long ends its thread
IDLE_SECONDS = 2.0
#: at interpreter exit, how long the queued compactions may take before the process exits anyway
EXIT_WAIT_SECONDS = 60.0

#: what a worker runs: the snapshots handed to it since it last ran, oldest first
Job = Callable[[Sequence[Snapshot]], object]


class _Worker:
    """One daemon thread and its queue of landed snapshots."""

    def __init__(self) -> None:
        self._job: Job | None = None  # held only while snapshots wait (it holds the table, the store)
        self._cond = threading.Condition()
        self._pending: list[Snapshot] = []
        self._running = False  # a job is under way
        self._thread: threading.Thread | None = None

    def submit(self, snap: Snapshot, job: Job, max_pending: int) -> None:
        with self._cond:
            if threading.current_thread() is not self._thread:
                while self._running and len(self._pending) >= max_pending:
                    self._cond.wait()  # back-pressure: the worker is that far behind; a job ends in seconds
            self._job = job  # the newest table object's (same store, so the same table)
            self._pending.append(snap)
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name="lakefmt-auto-compact", daemon=True)
                thread.start()  # if it cannot start, the next commit tries again (its snapshots stay queued)
                self._thread = thread
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                deadline = time.monotonic() + IDLE_SECONDS
                while not self._pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._thread = None  # the next submit starts a new thread
                        self._cond.notify_all()
                        return
                    self._cond.wait(left)
                snaps, self._pending = self._pending, []
                job, self._job = self._job, None
                self._running = True
            try:
                if job is not None:
                    job(snaps)
            except BaseException as exc:  # best effort: the commits have landed; the next one tries again
                log.warning(
                    "automatic compaction after snapshot(s) %s failed: %s: %s",
                    ", ".join(str(s.id) for s in snaps), type(exc).__name__, exc,
                )
            finally:
                del job
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def idle(self) -> bool:
        # snapshots queued with no thread to take them: its start failed; the next commit starts one
        return not self._running and (not self._pending or self._thread is None)

    def wait_idle(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if threading.current_thread() is self._thread and self._running:
                raise RuntimeError("wait_for_compaction called from the compaction worker: it would wait for itself")
            while not self.idle():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True


_WORKERS: weakref.WeakKeyDictionary[MetaStore, _Worker] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def submit(store: MetaStore, snap: Snapshot, job: Job, max_pending: int) -> None:
    """Hand ``snap`` (a commit that landed through ``store``'s table) to that table's worker, which runs ``job``
    with it (and any other snapshots handed to it meanwhile) in its own thread. Returns at once, unless
    ``max_pending`` snapshots already wait for a worker that is busy: then it waits for the worker to take them
    (back-pressure, as Paimon's ``num-sorted-run.stop-trigger``: a writer much faster than its compaction would
    otherwise pile up small files without bound)."""
    with _LOCK:
        worker = _WORKERS.get(store)
        if worker is None:
            worker = _WORKERS[store] = _Worker()
    worker.submit(snap, job, max(1, max_pending))


def wait_idle(store: MetaStore, timeout: float | None = None) -> bool:
    """Wait until ``store``'s worker has nothing queued or running; False if ``timeout`` (seconds) passed first."""
    with _LOCK:
        worker = _WORKERS.get(store)
    return True if worker is None else worker.wait_idle(timeout)


def _finish_at_exit() -> None:
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    with _LOCK:
        workers = list(_WORKERS.values())
    for worker in workers:
        if not worker.wait_idle(max(0.0, deadline - time.monotonic())):
            log.warning("automatic compaction still running at exit: left unfinished (its files are orphans)")


def _forget_workers() -> None:
    """In a forked child: the parent's workers are no threads here (and their locks may be held)."""
    global _WORKERS, _LOCK
    _WORKERS, _LOCK = weakref.WeakKeyDictionary(), threading.Lock()


# at exit, before concurrent.futures refuses new work (a compaction may read or sync in a pool); atexit too,
# for commits made later (in other atexit handlers)
with contextlib.suppress(RuntimeError):  # imported while the interpreter is already exiting
    threading._register_atexit(_finish_at_exit)  # type: ignore[attr-defined]
atexit.register(_finish_at_exit)
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_workers)
