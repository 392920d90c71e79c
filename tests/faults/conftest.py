"""Fixtures of the fault tests: a process context for crash runs, and HTTP-level fault injection into the
moto S3 server (only while a test that asks for it runs)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest

from .wire import WireFaults


@pytest.fixture(scope="session")
def fault_ctx() -> Any:
    """A forkserver context whose server has imported lakefmt, pyarrow and s3fs once: each crash run's child
    is a fork of it (milliseconds, not the second a spawned interpreter needs to import pyarrow), and still
    inherits nothing of the test process (no threads, no locks, no open files, no moto)."""
    method = os.environ.get("LAKEFMT_FAULT_START_METHOD", "forkserver")  # "spawn" works too, ~1 s a child
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["pyarrow.parquet", "s3fs", "lakefmt", "faults.scenarios"])
    return ctx


@pytest.fixture
def wire_faults(moto_server: dict[str, Any]) -> Iterator[WireFaults]:
    """Fault injection at the HTTP level of the moto server, for requests under one key prefix (the test
    sets it); removed when the test ends."""
    faults = WireFaults()
    faults.install()
    try:
        yield faults
    finally:
        faults.uninstall()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``LAKEFMT_FULL_FAULTS=1``, the crash matrix runs one key-table scenario on S3 (the others run on
    local disk at chosen crash points): the rest of its S3 items are deselected, not skipped."""
    if os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0"):
        return
    from .scenarios import SAMPLED, SCENARIOS

    kept_on_s3 = min(SAMPLED, key=list(SCENARIOS).index) if SAMPLED else None
    dropped = {name for name in SAMPLED if name != kept_on_s3}
    keep, deselect = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        name = params.params.get("name") if params is not None else None
        on_s3 = "[s3-" in item.nodeid
        if item.originalname == "test_crash_matrix" and on_s3 and name in dropped:
            deselect.append(item)
        else:
            keep.append(item)
    if deselect:
        config.hook.pytest_deselected(items=deselect)
        items[:] = keep
