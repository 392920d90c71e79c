"""The fault-injecting FileIO itself: it counts every storage operation, injects exactly the planned fault
at exactly the planned operation, and its EXIT fault really ends a child process without running its
``finally`` blocks. Its interrupts are KeyboardInterrupts (no ``except Exception`` catches them); its
connection errors are botocore's classes, raised at the FileIO boundary on local disk and at the S3 request
inside the operation on S3, where only the faulted operation's own request is hit."""

from __future__ import annotations

import os
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from lakefmt.io import LocalFileIO, file_io_for

from .faultio import EXIT_CODE, Fault, FaultIO, FaultPlan, InjectedFault, InjectedInterrupt


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


@pytest.mark.parametrize("kind", [Fault.INTERRUPT, Fault.INTERRUPT_AFTER], ids=lambda k: k.value)
def test_an_interrupt_is_a_keyboard_interrupt_no_except_exception_catches(tmp_path: Any, kind: Fault) -> None:
    inner = LocalFileIO(str(tmp_path))
    io = FaultIO(inner, FaultPlan(kind, 2))
    io.write("a", b"1")
    with pytest.raises(KeyboardInterrupt) as info:
        try:
            io.publish("b", b"2")
        except Exception:  # what best-effort code catches: not an interrupt
            pytest.fail("an interrupt was caught by except Exception")
    assert isinstance(info.value, InjectedInterrupt) and not isinstance(info.value, Exception)
    assert io.fired and io.fired_at == "boundary"
    assert inner.exists("b") == (kind is Fault.INTERRUPT_AFTER)  # before: not applied; after: applied
    assert io.read("a") == b"1"  # one fault per run


@pytest.mark.parametrize("kind", [Fault.CONNECTION_BEFORE, Fault.CONNECTION_AFTER], ids=lambda k: k.value)
def test_connection_errors_on_local_disk_come_at_the_boundary(tmp_path: Any, kind: Fault) -> None:
    inner = LocalFileIO(str(tmp_path))
    for k in (1, 2):
        io = FaultIO(inner, FaultPlan(kind, k))
        with pytest.raises(BotoCoreError) as info:
            for i in range(2):
                io.write(f"{kind.value}-{k}-{i}", b"x")
        # the two default classes alternate with k, and neither is an OSError
        assert type(info.value) in (ConnectionClosedError, EndpointConnectionError)
        assert not isinstance(info.value, OSError)
        assert io.fired_at == "boundary" and f"operation {k}" in str(info.value) and "write" in str(info.value)
        assert inner.exists(f"{kind.value}-{k}-{k - 1}") == (kind is Fault.CONNECTION_AFTER)
    before, after = FaultPlan(Fault.CONNECTION_BEFORE, 5), FaultPlan(Fault.CONNECTION_AFTER, 5)
    assert {before.error_class, after.error_class} == {ConnectionClosedError, EndpointConnectionError}
    assert FaultPlan(Fault.CONNECTION_BEFORE, 6).error_class is not before.error_class
    timeout = FaultPlan(Fault.CONNECTION_AFTER, 1, error="ReadTimeoutError")
    assert timeout.error_class is ReadTimeoutError and issubclass(ReadTimeoutError, OSError)
    with pytest.raises(ValueError):
        FaultPlan(Fault.CONNECTION_AFTER, 1, error="TimeoutError")
    assert pickle.loads(pickle.dumps(timeout)) == timeout


@pytest.mark.s3
@pytest.mark.parametrize("kind", [Fault.CONNECTION_BEFORE, Fault.CONNECTION_AFTER], ids=lambda k: k.value)
def test_connection_errors_on_s3_come_at_the_request(moto_server: dict[str, Any], kind: Fault) -> None:
    """On S3 the error is raised at the operation's first request (s3fs's ``_call_s3``): after it was sent
    and answered for CONNECTION_AFTER; the write of a data file uploads at ``close``, which is hit there;
    ``open_output`` sends no request and gets it at the boundary."""
    uri = f"s3://{moto_server['bucket']}/faultio-{uuid.uuid4().hex}"
    options = dict(moto_server["storage_options"])
    applied = kind is Fault.CONNECTION_AFTER
    for k, op in ((1, "write"), (2, "close"), (1, "open_output")):
        inner = file_io_for(uri + f"-{k}-{op}", options)
        io = FaultIO(inner, FaultPlan(kind, k))
        with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
            if op == "write":
                io.write("w", b"1")
            else:
                out = io.open_output("o")
                out.write(b"2")
                out.close()
        assert io.log[-1][0] == op
        if op == "open_output":
            assert io.fired_at == "boundary"
            continue
        assert io.fired_at == "request"
        names = {f.path for f in inner.walk()}
        assert (("w" if op == "write" else "o") in names) == applied, names
        if applied:
            assert io.read("w" if op == "write" else "o") in (b"1", b"2")  # one fault per run
    # reading an absent key: s3fs's own answer (NoSuchKey) is lost to the connection error (s3fs retries a
    # read that got ConnectionClosedError, an HTTPClientError, itself; EndpointConnectionError it does not)
    io = FaultIO(file_io_for(uri + "-probe", options), FaultPlan(kind, 1, error="EndpointConnectionError"))
    with pytest.raises(EndpointConnectionError) as info:
        io.read("snapshot/snapshot-1")
    assert applied == isinstance(info.value.__cause__, FileNotFoundError)
    io = FaultIO(file_io_for(uri + "-probe", options), FaultPlan(kind, 1, error="ConnectionClosedError"))
    with pytest.raises(FileNotFoundError):
        io.read("snapshot/snapshot-1")
    assert io.fired_at == "request"


@pytest.mark.s3
def test_a_connection_fault_on_s3_hits_only_the_faulted_operation(moto_server: dict[str, Any]) -> None:
    """Operations from a thread pool run at once: only the k-th one's request fails, not a concurrent one's
    (the fault is armed in the faulted thread's context, which s3fs's event loop task inherits)."""
    inner = file_io_for(
        f"s3://{moto_server['bucket']}/faultio-{uuid.uuid4().hex}", dict(moto_server["storage_options"])
    )
    names = [f"m/{i}" for i in range(12)]
    for name in names:
        inner.write(name, name.encode())
    for k in (1, 6, 12):
        io = FaultIO(inner, FaultPlan(Fault.CONNECTION_BEFORE, k, error="EndpointConnectionError"))

        def read(name: str, io: FaultIO = io) -> str:
            try:
                return io.read(name).decode()
            except EndpointConnectionError:
                return "failed"

        with ThreadPoolExecutor(max_workers=6) as pool:
            got = dict(zip(names, pool.map(read, names), strict=True))
        faulted = io.log[k - 1][1]
        assert got == {n: ("failed" if n == faulted else n) for n in names}
        assert io.fired_at == "request"
