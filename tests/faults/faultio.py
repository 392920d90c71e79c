"""A fault-injecting FileIO for crash-point tests.

:class:`FaultIO` wraps a real FileIO and counts its storage operations (``read``, ``write``, ``open_output``
and the ``close`` of the stream it returns, ``sync``, ``publish``, ``list``, ``walk``, ``exists``,
``delete``). At the k-th operation of a run (1-based) it does what its :class:`FaultPlan` says:

* ``RAISE_BEFORE``: raise :class:`InjectedFault` (an ``OSError``) without doing the operation;
* ``RAISE_AFTER``: do the operation, then raise: it was applied but its answer was lost (also an answer
  that was an error, such as the ``FileNotFoundError`` of a probe);
* ``EXIT``: do the operation, then end the process with ``os._exit``: no ``finally``, ``except`` or
  ``atexit`` of anyone runs. Only allowed in a child process, never in the test runner itself;
* ``INTERRUPT``: raise :class:`InjectedInterrupt` (a ``KeyboardInterrupt``: Ctrl-C, or the signal a
  scheduler sends to stop a job) without doing the operation;
* ``INTERRUPT_AFTER``: do the operation, then raise :class:`InjectedInterrupt`: the interrupt arrived while
  the call was returning (a real Ctrl-C during an S3 call even lets the request finish in s3fs's event loop
  after the caller got the interrupt);
* ``CONNECTION_BEFORE``: raise a connection-level botocore error without the operation reaching the store;
* ``CONNECTION_AFTER``: let the operation reach the store and be applied, then raise a connection-level
  botocore error: the answer was lost (the connection closed, or the read timed out).

The connection errors are botocore's own classes (see :attr:`FaultPlan.error_class`): by default
``ConnectionClosedError`` or ``EndpointConnectionError``, alternating with k, the two that derive from
``BotoCoreError`` but not from ``OSError``, so every operation meets an error no ``except OSError`` catches.
The third, ``ReadTimeoutError``, is an ``OSError`` too (through the ``ReadTimeout`` of botocore's vendored
requests); a plan can name it. Where the wrapped FileIO speaks to S3 through s3fs, they are raised *inside*
the operation, at its first S3 request: s3fs's ``_call_s3`` raises it as it does when botocore's and its own
retries gave up (the request is sent and answered first for an ``*_AFTER`` error), and what s3fs, the FileIO
(for ``publish``: its retry and read-back) and lakefmt make of it is what the caller gets (s3fs itself
retries a read that got an ``HTTPClientError``, such as ``ConnectionClosedError``). An S3 operation that
sends no request (``open_output``, ``sync``) and every operation on another backend (local disk) gets the
error at the FileIO boundary, before or after the operation, as the ``RAISE_*`` kinds do.

Over k = 1..N (N counted by a dry run with ``Fault.NONE``) the ``EXIT`` and ``INTERRUPT_AFTER`` kinds reach
every point between two storage operations, including right after the last one (the operation has fully
landed; the process dies, or is interrupted, before anyone hears of it). A dry run's :attr:`FaultIO.log`
names every operation, so a failure can say "publish snapshot/snapshot-5" rather than "k=17".

Only the wrapped FileIO's public operations are counted: what a backend does inside one of them (the local
publish's temp file and link, the read-back after a lost publish answer, s3fs's and botocore's retries) is
one operation, as it is for its caller. Data files are read through :meth:`arrow_filesystem` (pyarrow), not
counted (the rewrites, compaction and row-level delete, are the write paths that read them; their faults are in
``test_rewrite_read_faults.py``).

It pickles (plan, hook and the wrapped FileIO; not the counter's lock), so a test can hand it to a child.
"""

from __future__ import annotations

import contextvars
import enum
import errno
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs
from botocore.exceptions import BotoCoreError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from fsspec.asyn import sync_wrapper

from lakefmt.io import FileIO
from lakefmt.io.fileio import FileInfo

__all__ = [
    "CONNECTION_ERRORS",
    "EXIT_CODE",
    "Fault",
    "FaultIO",
    "FaultPlan",
    "InjectedFault",
    "InjectedInterrupt",
    "connection_error",
]

#: the exit status of a process ended by an ``EXIT`` fault
EXIT_CODE = 86

T = TypeVar("T")


class Fault(enum.Enum):
    NONE = "none"
    RAISE_BEFORE = "raise-before"
    RAISE_AFTER = "raise-after"
    EXIT = "exit"
    INTERRUPT = "interrupt"
    INTERRUPT_AFTER = "interrupt-after"
    CONNECTION_BEFORE = "connection-before"
    CONNECTION_AFTER = "connection-after"

    @property
    def before(self) -> bool:
        """Whether the fault comes instead of the operation (it is not applied)."""
        return self in (Fault.RAISE_BEFORE, Fault.INTERRUPT, Fault.CONNECTION_BEFORE)

    @property
    def interrupts(self) -> bool:
        return self in (Fault.INTERRUPT, Fault.INTERRUPT_AFTER)

    @property
    def connection(self) -> bool:
        return self in (Fault.CONNECTION_BEFORE, Fault.CONNECTION_AFTER)


#: the connection-level errors botocore raises when a request gets no answer (after its retries); the first two
#: are the default ones (not OSError), the third is also an OSError
CONNECTION_ERRORS: tuple[type[BotoCoreError], ...] = (ConnectionClosedError, EndpointConnectionError, ReadTimeoutError)


@dataclass(frozen=True)
class FaultPlan:
    """What to do at which operation of a run (``at`` is 1-based; ``Fault.NONE`` only counts). ``error``:
    for the connection kinds, the botocore class to raise by name (default: rotating with ``at``)."""

    kind: Fault = Fault.NONE
    at: int = 0
    error: str | None = None

    def __post_init__(self) -> None:
        if self.kind is not Fault.NONE and self.at < 1:
            raise ValueError(f"a {self.kind.value} fault needs an operation index >= 1, got {self.at}")
        if self.error is not None and self.error not in {c.__name__ for c in CONNECTION_ERRORS}:
            raise ValueError(f"unknown connection error {self.error!r}")

    def __str__(self) -> str:
        return "no fault" if self.kind is Fault.NONE else f"{self.kind.value}@{self.at}"

    @property
    def error_class(self) -> type[BotoCoreError]:
        """The connection error of a connection fault: ``error``, else ``ConnectionClosedError`` or
        ``EndpointConnectionError`` alternating with ``at`` (the other one for ``CONNECTION_AFTER``, so before
        and after at the same operation raise different classes)."""
        if self.error is not None:
            return next(c for c in CONNECTION_ERRORS if c.__name__ == self.error)
        shift = 1 if self.kind is Fault.CONNECTION_AFTER else 0
        return CONNECTION_ERRORS[(self.at + shift) % 2]


def connection_error(cls: type[BotoCoreError], what: str) -> BotoCoreError:
    """A botocore connection error as botocore builds it (its message names the endpoint; here, what failed)."""
    return cls(endpoint_url=f"injected: {what}")


class InjectedFault(OSError):
    """The storage error a :class:`FaultIO` raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EIO, message)


class InjectedInterrupt(KeyboardInterrupt):
    """The interrupt a :class:`FaultIO` raises on purpose: a ``KeyboardInterrupt`` to everyone (``except
    KeyboardInterrupt`` and ``except BaseException`` catch it, ``except Exception`` does not); its own class
    only lets a test runner tell it from a real Ctrl-C."""


class _Armed:
    """A connection fault waiting for the first S3 request of the operation it belongs to (one-shot)."""

    def __init__(self, error: BaseException, before: bool) -> None:
        self.error = error
        self.before = before
        self.fired = False
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.fired:
                return False
            self.fired = True
            return True


# set in the thread that runs the faulted operation; asyncio copies it into the task that s3fs runs on its
# event loop for that thread's request, so concurrent requests of other threads are never hit
_ARMED: contextvars.ContextVar[_Armed | None] = contextvars.ContextVar("faultio_armed", default=None)


def _install_request_faults(fs: Any) -> bool:
    """Route ``fs``'s S3 requests (an s3fs filesystem's ``_call_s3``, and ``call_s3``, which its files use for
    uploads) through the connection fault armed in the caller's context, if any. False: not an s3fs
    filesystem (its operations get the fault at the FileIO boundary)."""
    if getattr(fs, "_faultio_requests", False):
        return True
    original = getattr(fs, "_call_s3", None)
    if original is None:
        return False

    async def _call_s3(method: Any, *args: Any, **kwargs: Any) -> Any:
        armed = _ARMED.get()
        if armed is None or not armed.take():
            return await original(method, *args, **kwargs)
        if armed.before:
            raise armed.error
        try:
            answer = await original(method, *args, **kwargs)
        except Exception as exc:  # an error answer (NoSuchKey, PreconditionFailed) is lost the same way
            raise armed.error from exc
        body = answer.get("Body") if isinstance(answer, dict) else None
        if body is not None:  # a GET's answer: nobody will read it
            body.close()
        raise armed.error

    fs._call_s3 = _call_s3
    fs.call_s3 = sync_wrapper(_call_s3, obj=fs)
    fs._faultio_requests = True
    return True


class _Stream:
    """The stream ``open_output`` returns, with ``close`` counted as a storage operation (on S3 the upload
    happens at close; on local disk the file is complete only then)."""

    def __init__(self, owner: FaultIO, rel: str, inner: Any) -> None:
        self._owner = owner
        self._rel = rel
        self._inner = inner

    def write(self, data: Any) -> Any:
        return self._inner.write(data)

    def tell(self) -> int:
        return int(self._inner.tell())

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        if not self.closed:
            self._owner._op("close", self._rel, self._inner.close)

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False


class FaultIO(FileIO):
    """A FileIO that forwards every operation to ``inner`` and injects the fault of its plan."""

    def __init__(
        self,
        inner: FileIO,
        plan: FaultPlan | None = None,
        *,
        hook: Callable[[str, str], None] | None = None,
    ) -> None:
        # no FileIO.__init__: everything is the wrapped FileIO's
        self.inner = inner
        self.uri = inner.uri
        self.root = inner.root
        self.protocol = inner.protocol
        self.atomic_publish = inner.atomic_publish
        self.definite_refusals = inner.definite_refusals
        self._storage_options: dict[str, Any] = {}
        self._fs = None
        self.hook = hook  #: called with (operation, path) before each operation (e.g. to hold racers at a gate)
        self._lock = threading.Lock()
        self.reset(plan)

    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        """Never called: :meth:`publish` forwards the whole operation to the wrapped FileIO."""
        raise NotImplementedError("FaultIO forwards publish() whole")

    def reset(self, plan: FaultPlan | None = None) -> None:
        """Start a new run: count from zero under ``plan``."""
        self.plan = plan or FaultPlan()
        self.count = 0
        self.fired = False  #: whether the plan's fault happened
        self.fired_at = ""  #: where: "boundary", or "request" (a connection fault at an S3 request inside it)
        self.log: list[tuple[str, str]] = []  #: (operation, path) of every operation so far

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FaultIO({self.inner!r}, {self.plan})"

    # -- the injection ----------------------------------------------------------------------------------
    def _op(self, name: str, rel: str, do: Callable[[], T]) -> T:
        if self.hook is not None:
            self.hook(name, rel)
        with self._lock:  # manifests may be read from a thread pool: numbering stays exact
            self.count += 1
            n = self.count
            self.log.append((name, rel))
        plan = self.plan
        if plan.kind is Fault.NONE or n != plan.at:
            return do()
        kind = plan.kind
        if kind is Fault.EXIT:
            _check_exit_allowed()
        self.fired = True
        self.fired_at = "boundary"
        if kind.connection and name not in _NO_REQUEST and _install_request_faults(self.inner.fs):
            return self._connection_inside(n, name, rel, do)
        if kind.before:
            raise self._error(f"before operation {n}: {name} {rel}")
        try:
            do()
        except Exception as exc:  # e.g. FileNotFoundError of a probe: that answer is lost too
            if kind is Fault.EXIT:
                os._exit(EXIT_CODE)
            raise self._error(f"after operation {n} ({type(exc).__name__}): {name} {rel}") from exc
        if kind is Fault.EXIT:
            os._exit(EXIT_CODE)
        raise self._error(f"after operation {n} (it was applied): {name} {rel}")

    def _error(self, what: str) -> BaseException:
        kind = self.plan.kind
        if kind.interrupts:
            return InjectedInterrupt(f"injected interrupt {what}")
        if kind.connection:
            return connection_error(self.plan.error_class, what)
        return InjectedFault(f"injected fault {what}")

    def _connection_inside(self, n: int, name: str, rel: str, do: Callable[[], T]) -> T:
        """A connection fault at the first S3 request of operation ``n``: whatever the FileIO makes of it
        (raises it, retries, reads back) is what its caller gets."""
        when = "before" if self.plan.kind.before else "after"
        armed = _Armed(self._error(f"{when} the first request of operation {n}: {name} {rel}"), self.plan.kind.before)
        token = _ARMED.set(armed)
        try:
            result = do()
        finally:
            _ARMED.reset(token)
            if armed.fired:
                self.fired_at = "request"
        if not armed.fired:  # it sent no request after all: the fault comes at the boundary, after it
            raise self._error(f"after operation {n} (it sent no request): {name} {rel}")
        return result

    # -- FileIO ------------------------------------------------------------------------------------------
    def full_path(self, rel: str) -> str:
        return self.inner.full_path(rel)

    def new_temp_name(self, rel: str) -> str:
        return self.inner.new_temp_name(rel)

    def arrow_filesystem(self) -> pafs.FileSystem:
        return self.inner.arrow_filesystem()

    @property
    def fs(self) -> Any:
        return self.inner.fs

    def read(self, rel: str) -> bytes:
        return self._op("read", rel, lambda: self.inner.read(rel))

    def write(self, rel: str, data: bytes, *, sync: bool = True) -> None:
        self._op("write", rel, lambda: self.inner.write(rel, data, sync=sync))

    def open_output(self, rel: str) -> Any:
        return _Stream(self, rel, self._op("open_output", rel, lambda: self.inner.open_output(rel)))

    def sync(self, rel: str) -> None:
        self._op("sync", rel, lambda: self.inner.sync(rel))

    def publish(self, rel: str, data: bytes, *, sync: bool = True) -> bool:
        return self._op("publish", rel, lambda: self.inner.publish(rel, data, sync=sync))

    def list(self, rel_dir: str) -> list[str]:
        return self._op("list", rel_dir, lambda: self.inner.list(rel_dir))

    def walk(self) -> Iterator[FileInfo]:
        return iter(self._op("walk", "", lambda: [*self.inner.walk()]))

    def exists(self, rel: str) -> bool:
        return self._op("exists", rel, lambda: self.inner.exists(rel))

    def delete(self, rel: str) -> None:
        self._op("delete", rel, lambda: self.inner.delete(rel))


#: S3 operations that send no request (s3fs opens a file for writing without one; sync is a no-op there)
_NO_REQUEST = frozenset({"open_output", "sync"})


def _check_exit_allowed() -> None:
    if multiprocessing.parent_process() is None:
        raise RuntimeError("an EXIT fault ends the process: run the operation in a child process")
