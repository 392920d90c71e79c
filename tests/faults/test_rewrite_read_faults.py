"""Faults in the reads of data files, which compaction and row-level delete are the first write paths to do.

The crash-point matrix counts FileIO's operations; data files are read through the FileIO's pyarrow
filesystem, which it does not count. Here that filesystem fails the n-th data file opened and every one after
it (an ``OSError``, a ``KeyboardInterrupt``, or a botocore connection error, which is no ``OSError``) while
the matrix's ``compact``, ``delete`` and ``auto-compact`` operations run on a copy of their scenario's table:

* a compaction or a delete raises that error, commits nothing, and deletes what it had written: the table's
  files are exactly as before;
* the append whose automatic compaction fails that way is reported landed (only the interrupt reaches the
  caller, after the commit), and the failed compaction leaves no data file behind;
* recovery as in the matrix (run it again; the job replayed, then the compaction left undone) ends with
  exactly the modelled table, checked as the matrix checks it.
"""

from __future__ import annotations

import errno
import shutil
import threading
from typing import Any

import pyarrow.fs as pafs
import pytest
from botocore.exceptions import ConnectionClosedError
from helpers import file_listing

import lakefmt
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta.store import MetaStore
from lakefmt.rewrite.compact.plan import plan_compaction

from .faultio import FaultIO
from .scenarios import SCENARIOS, AutoCompactCommit
from .test_crash_matrix import verify

ERRORS: dict[str, Any] = {
    "oserror": lambda path: OSError(errno.EIO, f"injected: reading {path} failed"),
    "interrupt": lambda path: KeyboardInterrupt(),
    "connection": lambda path: ConnectionClosedError(endpoint_url=f"injected://{path}"),
}


class FailingReads(pafs.FSSpecHandler):  # type: ignore[misc]
    """pyarrow's view of a FileIO's files where opening a data file fails from the ``at``-th distinct file on
    (a file may be opened more than once: its footer, then its rows), or, with ``paths``, for those files; with
    ``wait``, only once that event is set."""

    def __init__(
        self, fs: Any, error: Any, at: int = 1, paths: set[str] | None = None, wait: threading.Event | None = None
    ) -> None:
        super().__init__(fs)
        self.at, self.error, self.paths, self.wait = at, error, paths, wait
        self.seen: list[str] = []  #: distinct files opened (or tried), in order
        self.failed = 0
        self.lock = threading.Lock()

    def _open(self, path: str) -> None:
        with self.lock:
            if path not in self.seen:
                self.seen.append(path)
            n = self.seen.index(path) + 1
            fail = path in self.paths if self.paths is not None else n >= self.at
            self.failed += fail
        if fail:
            if self.wait is not None:
                self.wait.wait(timeout=30)  # until another writer has written (a test orders the two this way)
            raise self.error(path)

    def open_input_file(self, path: str) -> Any:
        self._open(path)
        return super().open_input_file(path)

    def open_input_stream(self, path: str) -> Any:
        self._open(path)
        return super().open_input_stream(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each scenario's table, built once."""
    root = tmp_path_factory.mktemp("read-faults")
    out = {}
    for name in ("compact", "delete", "auto-compact"):
        SCENARIOS[name].build(str(root / name), {})
        out[name] = str(root / name)
    return out


CASES = [
    pytest.param(name, error, at, id=f"{name}-{error}-{'first' if at == 1 else 'second'}-file")
    for name in ("compact", "delete", "auto-compact")
    for error in ERRORS
    for at in ((1,) if name == "delete" else (1, 2))  # the delete's scenario reads one file
]


@pytest.mark.parametrize(("name", "error", "at"), CASES)
def test_a_failed_data_read_commits_nothing_and_leaves_nothing(
    built: dict[str, str], tmp_path: Any, name: str, error: str, at: int
) -> None:
    scenario = SCENARIOS[name]
    uri = str(tmp_path / "t")
    shutil.copytree(built[name], uri)
    plain = lakefmt.open_table(uri)
    before, latest = file_listing(plain.io), plain.latest_snapshot()
    assert latest is not None
    io = FaultIO(plain.io)
    handler = FailingReads(plain.io.fs, ERRORS[error], at=at)
    io.arrow_filesystem = lambda: pafs.PyFileSystem(handler)  # type: ignore[method-assign]
    table = lakefmt.Table(io, MetaStore(io))

    outcome: BaseException | None = None
    try:
        scenario.run(table)
    except BaseException as exc:  # the interrupt too: it is what some cases test
        outcome = exc
    assert handler.failed, f"the fault never fired (files opened: {handler.seen})"
    reopened = lakefmt.open_table(uri)
    if isinstance(scenario.operation, AutoCompactCommit):
        # the append landed and says so (an interrupt reaches the caller, after the commit); no COMPACT snapshot
        assert outcome is None or isinstance(outcome, KeyboardInterrupt), repr(outcome)
        snaps = reopened.snapshots()
        assert snaps[-1].id == latest.id + 1 and snaps[-1].commit_kind is lakefmt.CommitKind.APPEND
        files = {f.path for f in reopened.io.walk()}
        stray = unreferenced(files, referenced_files(MetaStore(reopened.io)))
        assert not [p for p in stray if p.startswith("dt=")], f"data files the failed compaction left: {stray}"
        landed: bool | None = True
    else:
        expected = KeyboardInterrupt if error == "interrupt" else type(ERRORS[error]("x"))
        assert isinstance(outcome, expected), repr(outcome)
        assert file_listing(reopened.io) == before, "the failed rewrite left files behind"
        assert reopened.latest_snapshot() == latest
        landed = False
    recovery = scenario.recover(reopened, landed)
    assert recovery.endswith("applied") and "already" not in recovery.split(";")[-1], recovery
    verify(uri, {}, scenario, scenario.model_after())


@pytest.mark.parametrize("error", list(ERRORS))
def test_a_compaction_failing_in_one_group_deletes_the_files_of_the_others(
    built: dict[str, str], tmp_path: Any, error: str
) -> None:
    """dt=a's four files (about 900 bytes each) in two groups of two (target 2000 bytes), rewritten in two threads
    (``parallelism=2``): the second group's first read waits until the first group's writer has written its file
    and manifest, then fails. The compaction deletes that file and manifest before raising."""
    uri = str(tmp_path / "t")
    shutil.copytree(built["compact"], uri)
    plain = lakefmt.open_table(uri)
    before, latest = file_listing(plain.io), plain.latest_snapshot()
    plan = plan_compaction(plain, min_files=3, target_file_size=2000)
    assert [g.num_files for g in plan.groups] == [2, 2]
    first_written = threading.Event()
    io = FaultIO(plain.io)
    handler = FailingReads(
        plain.io.fs, ERRORS[error], paths={plain.io.full_path(p) for p in plan.groups[1].paths}, wait=first_written
    )
    io.arrow_filesystem = lambda: pafs.PyFileSystem(handler)  # type: ignore[method-assign]
    written: list[str] = []

    def hook(op: str, path: str) -> None:
        if op == "open_output":
            written.append(path)
        if op == "write" and path.startswith("manifest/manifest-"):  # a writer's manifest: its files are closed
            first_written.set()

    io.hook = hook
    table = lakefmt.Table(io, MetaStore(io))
    with pytest.raises(KeyboardInterrupt if error == "interrupt" else type(ERRORS[error]("x"))):
        table.compact(min_files=3, target_file_size=2000, parallelism=2)
    assert written and handler.failed, (written, handler.seen)
    assert file_listing(plain.io) == before, "the first group's files were left behind"
    assert plain.latest_snapshot() == latest
