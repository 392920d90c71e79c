"""The fault-injecting FileIO itself: it counts every storage operation, injects exactly the planned fault
at exactly the planned operation, and its EXIT fault really ends a child process without running its
``finally`` blocks."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest

from lakefmt.io import LocalFileIO

from .faultio import EXIT_CODE, Fault, FaultIO, FaultPlan, InjectedFault


def _workload(io: FaultIO) -> None:
    """Six operations: write, publish, read, list, walk, then open_output + close (two)."""
    io.write("a/x", b"1")
    io.publish("a/y", b"2")
    io.read("a/x")
    io.list("a")
    list(io.walk())
    out = io.open_output("a/z")
    out.write(b"3")
    out.close()


def test_counts_and_logs_every_operation(tmp_path: Any) -> None:
    io = FaultIO(LocalFileIO(str(tmp_path)))
    _workload(io)
    assert io.count == 7
    assert [op for op, _ in io.log] == ["write", "publish", "read", "list", "walk", "open_output", "close"]
    assert not io.fired
    io.reset()
    _workload(io)
    assert io.count == 7  # deterministic: a dry run's count is every later run's count


@pytest.mark.parametrize("k", range(1, 8))
def test_raise_before_does_not_apply_the_operation(tmp_path: Any, k: int) -> None:
    io = FaultIO(LocalFileIO(str(tmp_path / "t")), FaultPlan(Fault.RAISE_BEFORE, k))
    with pytest.raises(InjectedFault, match=f"before operation {k}"):
        _workload(io)
    assert io.fired and io.count == k
    files = {f.path for f in io.inner.walk()}
    assert ("a/x" in files) == (k > 1)
    assert ("a/y" in files) == (k > 2)
    assert "a/z" not in files or k > 6


def test_raise_after_applies_the_operation(tmp_path: Any) -> None:
    inner = LocalFileIO(str(tmp_path))
    io = FaultIO(inner, FaultPlan(Fault.RAISE_AFTER, 2))
    io.write("a", b"1")
    with pytest.raises(InjectedFault, match="after operation 2") as info:
        io.publish("b", b"2")
    assert isinstance(info.value, OSError)
    assert inner.read("b") == b"2"  # it landed; only the answer was lost
    assert io.read("b") == b"2"  # one fault per run: everything after it works
    # an answer that was an error is lost the same way
    io.reset(FaultPlan(Fault.RAISE_AFTER, 1))
    with pytest.raises(InjectedFault) as missing:
        io.read("nope")
    assert isinstance(missing.value.__cause__, FileNotFoundError)


def test_an_exit_fault_is_refused_in_the_test_process(tmp_path: Any) -> None:
    io = FaultIO(LocalFileIO(str(tmp_path)), FaultPlan(Fault.EXIT, 1))
    with pytest.raises(RuntimeError, match="child process"):
        io.write("a", b"1")
    assert not os.path.exists(tmp_path / "a")


def _child(io: FaultIO, marker: str) -> None:
    try:
        io.write("first", b"1")
        io.write("second", b"2")  # the EXIT fault: written, then the process ends
        io.write("third", b"3")
    finally:
        with open(marker, "w") as f:  # never runs: os._exit skips it
            f.write("finally ran")


def test_exit_fault_ends_a_child_after_the_operation(tmp_path: Any, fault_ctx: Any) -> None:
    io = FaultIO(LocalFileIO(str(tmp_path / "t")), FaultPlan(Fault.EXIT, 2))
    marker = str(tmp_path / "marker")
    proc = fault_ctx.Process(target=_child, args=(io, marker))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == EXIT_CODE
    assert sorted(f.path for f in io.inner.walk()) == ["first", "second"]
    assert not os.path.exists(marker)


def test_pickles_with_its_plan_and_a_fresh_lock(tmp_path: Any) -> None:
    io = FaultIO(LocalFileIO(str(tmp_path)), FaultPlan(Fault.RAISE_BEFORE, 2))
    io.write("a", b"1")
    copy = pickle.loads(pickle.dumps(io))
    assert copy.plan == io.plan and copy.count == 1 and copy.root == io.root
    with pytest.raises(InjectedFault):
        copy.write("b", b"2")
    assert FaultPlan().kind is Fault.NONE
    with pytest.raises(ValueError):
        FaultPlan(Fault.EXIT, 0)
