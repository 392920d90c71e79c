"""A fault-injecting FileIO for crash-point tests.

:class:`FaultIO` wraps a real FileIO and counts its storage operations (``read``, ``write``, ``open_output``
and the ``close`` of the stream it returns, ``sync``, ``publish``, ``list``, ``walk``, ``exists``,
``delete``). At the k-th operation of a run (1-based) it does what its :class:`FaultPlan` says:

* ``RAISE_BEFORE``: raise :class:`InjectedFault` (an ``OSError``) without doing the operation;
* ``RAISE_AFTER``: do the operation, then raise: it was applied but its answer was lost (also an answer
  that was an error, such as the ``FileNotFoundError`` of a probe);
* ``EXIT``: do the operation, then end the process with ``os._exit``: no ``finally``, ``except`` or
  ``atexit`` of anyone runs. Only allowed in a child process, never in the test runner itself.

Over k = 1..N (N counted by a dry run with ``Fault.NONE``) the ``EXIT`` kind reaches every point between two
storage operations, including right after the last one (the operation has fully landed; the process dies
before anyone hears of it). A dry run's :attr:`FaultIO.log` names every operation, so a failure can say
"publish snapshot/snapshot-5" rather than "k=17".

Only the wrapped FileIO's public operations are counted: what a backend does inside one of them (the local
publish's temp file and link, the read-back after a lost publish answer, s3fs's and botocore's retries) is
one operation, as it is for its caller. Data files are read through :meth:`arrow_filesystem` (pyarrow), not
counted: no write path reads data files.

It pickles (plan, hook and the wrapped FileIO; not the counter's lock), so a test can hand it to a child.
"""

from __future__ import annotations

import enum
import errno
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs

from lakefmt.io import FileIO
from lakefmt.io.fileio import FileInfo

__all__ = ["EXIT_CODE", "Fault", "FaultIO", "FaultPlan", "InjectedFault"]

#: the exit status of a process ended by an ``EXIT`` fault
EXIT_CODE = 86

T = TypeVar("T")


class Fault(enum.Enum):
    NONE = "none"
    RAISE_BEFORE = "raise-before"
    RAISE_AFTER = "raise-after"
    EXIT = "exit"


@dataclass(frozen=True)
class FaultPlan:
    """What to do at which operation of a run (``at`` is 1-based; ``Fault.NONE`` only counts)."""

    kind: Fault = Fault.NONE
    at: int = 0

    def __post_init__(self) -> None:
        if self.kind is not Fault.NONE and self.at < 1:
            raise ValueError(f"a {self.kind.value} fault needs an operation index >= 1, got {self.at}")

    def __str__(self) -> str:
        return "no fault" if self.kind is Fault.NONE else f"{self.kind.value}@{self.at}"


class InjectedFault(OSError):
    """The storage error a :class:`FaultIO` raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EIO, message)


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
        self._storage_options: dict[str, Any] = {}
        self._fs = None
        self.hook = hook  #: called with (operation, path) before each operation (e.g. to hold racers at a gate)
        self._lock = threading.Lock()
        self.reset(plan)

    def reset(self, plan: FaultPlan | None = None) -> None:
        """Start a new run: count from zero under ``plan``."""
        self.plan = plan or FaultPlan()
        self.count = 0
        self.fired = False  #: whether the plan's fault happened
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
        hit = plan.kind is not Fault.NONE and n == plan.at
        if hit and plan.kind is Fault.EXIT:
            _check_exit_allowed()
        if hit and plan.kind is Fault.RAISE_BEFORE:
            self.fired = True
            raise InjectedFault(f"injected fault before operation {n}: {name} {rel}")
        if not hit:
            return do()
        self.fired = True
        try:
            do()
        except Exception as exc:  # e.g. FileNotFoundError of a probe: that answer is lost too
            if plan.kind is Fault.EXIT:
                os._exit(EXIT_CODE)
            raise InjectedFault(f"injected fault after operation {n} ({type(exc).__name__}): {name} {rel}") from exc
        if plan.kind is Fault.EXIT:
            os._exit(EXIT_CODE)
        raise InjectedFault(f"injected fault after operation {n} (it was applied): {name} {rel}")

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


def _check_exit_allowed() -> None:
    if multiprocessing.parent_process() is None:
        raise RuntimeError("an EXIT fault ends the process: run the operation in a child process")
