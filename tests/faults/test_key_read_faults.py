"""Faults in the reads of data files by a key table's writes: an upsert finds the live rows of its keys, and a delete
by key or by filter the rows it marks, by reading the key (or filter) columns of the data files of the buckets they
touch; a compaction reads its input files whole, their deletion vectors applied. Those reads go through the FileIO's
pyarrow filesystem, which the crash matrix does not count; here it fails the n-th data file opened and every one
after it (an ``OSError``, a ``KeyboardInterrupt``, or a botocore connection error, which is no ``OSError``) while
the matrix's key-table operations run on a copy of their scenario's table:

* the operation raises that error and commits nothing: the latest snapshot is the one before;
* a one-off upsert, a delete by key, a delete by filter and a compaction leave no file behind (the upsert and the
  compaction delete the data files they wrote; no deletion-vector file was written yet); a job's commit leaves its
  writer tasks' files to the job (its recovery, a replay, writes them anew; orphan-clean removes the first ones);
* recovery as in the matrix ends with exactly the modelled table, checked as the matrix checks it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from helpers import file_listing

import lakefmt
from lakefmt.meta.store import MetaStore
from lakefmt.rewrite.keys.planners import key_cache_clear

from .faultio import FaultIO
from .scenarios import SCENARIOS, Commit
from .test_crash_matrix import verify
from .test_rewrite_read_faults import ERRORS, FailingReads

NAMES = ("key-upsert-commit", "key-upsert", "key-delete-keys", "key-delete", "key-compact")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("key-read-faults")
    out = {}
    for name in NAMES:
        SCENARIOS[name].build(str(root / name), {})
        out[name] = str(root / name)
    return out


CASES = [
    pytest.param(name, error, at, id=f"{name}-{error}-{'first' if at == 1 else 'second'}-file")
    for name in NAMES
    for error in ERRORS
    for at in (1, 2)
]


@pytest.mark.parametrize(("name", "error", "at"), CASES)
def test_a_failed_data_read_commits_nothing(
    built: dict[str, str], tmp_path: Any, name: str, error: str, at: int
) -> None:
    scenario = SCENARIOS[name]
    uri = str(tmp_path / "t")
    shutil.copytree(built[name], uri)
    for index in Path(uri).rglob("*.keyindex"):  # lookups read the key columns (key indexes: test_key_index_files)
        index.unlink()
    key_cache_clear()  # every data file is read, none found in this process's key indexes
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
    expected = KeyboardInterrupt if error == "interrupt" else type(ERRORS[error]("x"))
    assert isinstance(outcome, expected), repr(outcome)
    reopened = lakefmt.open_table(uri)
    assert reopened.latest_snapshot() == latest, "a write whose read failed committed"
    after = file_listing(reopened.io)
    if isinstance(scenario.operation, Commit):
        left = set(after) - set(before)
        assert all(p.startswith(("dt=", "manifest/manifest-")) and not p.endswith(".puffin") for p in left), left
    else:
        assert after == before, f"the failed write left files behind: {sorted(set(after) - set(before))}"
    scenario.recover(reopened, False)
    verify(uri, {}, scenario, scenario.model_after())
