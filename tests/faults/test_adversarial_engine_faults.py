"""A merge-engine upsert and ``apply_key_changes`` faulted at every storage operation (an interrupt before or after
it, an error before or after it): the table reads, has one live row per key, and the aggregate equals a replay of
the upserts that landed (each counted once); a commit known not to have landed leaves no data or deletion-vector file
behind (the writer's, or those its plan wrote at commit time)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt
from lakefmt.errors import CommitStateUnknownError
from lakefmt.meta.store import MetaStore
from lakefmt.rewrite.keys.upsert import apply_key_changes

from .faultio import Fault, FaultIO, FaultPlan

SCHEMA = pa.schema([("id", pa.int64()), ("total", pa.int64()), ("hits", pa.int64())])
AGG = {
    "merge-engine": "aggregation",
    "fields.total.aggregate-function": "sum",
    "fields.hits.aggregate-function": "count",
    "compaction.auto": "false",
}
FULL = os.environ.get("LAKEFMT_FULL_FAULTS") == "1"
#: interrupts before and after each operation; errors too with LAKEFMT_FULL_FAULTS=1
KINDS = [Fault.INTERRUPT, Fault.INTERRUPT_AFTER] + ([Fault.RAISE_BEFORE, Fault.RAISE_AFTER] if FULL else [])


def _files(root: Path) -> set[str]:
    return {str(Path(d, f).relative_to(root)) for d, _, fs in os.walk(root) for f in fs}


def _faulted(uri: str, plan: FaultPlan) -> tuple[lakefmt.Table, FaultIO]:
    io = FaultIO(lakefmt.open_table(uri).io, plan)
    return lakefmt.Table(io, MetaStore(io)), io


def _run(base: Path, tmp: Path, change: Any, check: Any) -> None:
    dry_uri = str(tmp / "dry")
    shutil.copytree(base, dry_uri)
    table, io = _faulted(dry_uri, FaultPlan())
    change(table)
    n = io.count
    assert n > 3
    for kind in KINDS:
        for k in range(1, n + 1):
            uri = tmp / f"{kind.value}-{k}"
            shutil.copytree(base, uri)
            before_files = _files(uri)
            before = lakefmt.open_table(str(uri)).latest_snapshot()
            table, io = _faulted(str(uri), FaultPlan(kind, k))
            error: BaseException | None = None
            try:
                change(table)
            except (Exception, KeyboardInterrupt) as exc:
                error = exc
            assert io.fired, f"{kind.value}@{k}"
            after = lakefmt.open_table(str(uri))
            landed = after.latest_snapshot() != before
            check(after, landed, f"{kind.value}@{k} ({io.log[-1]})")
            at_publish = io.log[k - 1][0] == "publish"  # an interrupt there leaves the outcome unknown to lakefmt
            if error is not None and not landed and not at_publish and not isinstance(error, CommitStateUnknownError):
                # the commit's own metadata (manifests, lists) is orphan-clean's, as for every commit kind
                leaked = {f for f in _files(uri) - before_files if not f.startswith("manifest/")}
                assert not leaked, f"{kind.value}@{k} ({io.log[-1]}): {error!r} left {sorted(leaked)}"
            shutil.rmtree(uri)


def _live(table: lakefmt.Table) -> dict[int, tuple[int, int]]:
    rows = table.to_arrow().to_pylist()
    out = {r["id"]: (r["total"], r["hits"]) for r in rows}
    assert len(out) == len(rows), "two live rows for one key"
    return out


def test_an_aggregation_upsert_faulted_anywhere_counts_once(tmp_path: Path) -> None:
    base = tmp_path / "base"
    table = lakefmt.create_table(str(base), SCHEMA, primary_key=["id"], options=AGG)
    table.upsert(pa.table({"id": [1, 2], "total": [10, 20], "hits": [1, 1]}, schema=SCHEMA))

    def change(t: lakefmt.Table) -> None:
        t.upsert(pa.table({"id": [1, 1, 3], "total": [1, 2, 3], "hits": [1, None, 1]}, schema=SCHEMA))

    def check(t: lakefmt.Table, landed: bool, where: str) -> None:
        want = {1: (13, 2), 2: (20, 1), 3: (3, 1)} if landed else {1: (10, 1), 2: (20, 1)}
        assert _live(t) == want, where

    _run(base, tmp_path, change, check)


def test_apply_key_changes_faulted_anywhere(tmp_path: Path) -> None:
    base = tmp_path / "base"
    table = lakefmt.create_table(str(base), SCHEMA, primary_key=["id"], options={"compaction.auto": "false"})
    table.upsert(pa.table({"id": [1, 2, 3], "total": [10, 20, 30], "hits": [1, 1, 1]}, schema=SCHEMA))

    def change(t: lakefmt.Table) -> None:
        ups = pa.table({"id": [1, 4], "total": [11, 40], "hits": [2, 1]}, schema=SCHEMA)
        apply_key_changes(t, ups, pa.table({"id": [2]}), operation="cdc")

    def check(t: lakefmt.Table, landed: bool, where: str) -> None:
        want = {1: (11, 2), 3: (30, 1), 4: (40, 1)} if landed else {1: (10, 1), 2: (20, 1), 3: (30, 1)}
        assert _live(t) == want, where

    _run(base, tmp_path, change, check)


def test_an_aggregation_upsert_on_s3_with_dropped_connections(s3_store: Any) -> None:
    """On S3 (moto), a connection dropped at the snapshot's publish after the request was applied (the answer lost;
    with LAKEFMT_FULL_FAULTS=1 at every request, before it too): the sum counts the upsert once if it landed, never
    twice, and the table reads either way."""
    kinds = [Fault.CONNECTION_AFTER] + ([Fault.CONNECTION_BEFORE] if FULL else [])
    new = pa.table({"id": [1, 1, 3], "total": [1, 2, 3], "hits": [1, None, 1]}, schema=SCHEMA)

    def base(uri: str) -> None:
        t = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options=AGG, storage_options=s3_store.storage_options)
        t.upsert(pa.table({"id": [1, 2], "total": [10, 20], "hits": [1, 1]}, schema=SCHEMA))

    dry = s3_store.uri()
    base(dry)
    io = FaultIO(lakefmt.open_table(dry, s3_store.storage_options).io, FaultPlan())
    lakefmt.Table(io, MetaStore(io)).upsert(new)
    publish = [i + 1 for i, (op, _) in enumerate(io.log) if op == "publish"]
    assert publish, io.log
    points = range(1, io.count + 1) if FULL else [publish[0]]
    for kind in kinds:
        for k in points:
            uri = s3_store.uri()
            base(uri)
            io = FaultIO(lakefmt.open_table(uri, s3_store.storage_options).io, FaultPlan(kind, k))
            with contextlib.suppress(Exception):  # any error: the table must still be in one of the two states
                lakefmt.Table(io, MetaStore(io)).upsert(new)
            assert io.fired
            after = lakefmt.open_table(uri, s3_store.storage_options)
            landed = after.latest_snapshot().id == 2
            want = {1: (13, 2), 2: (20, 1), 3: (3, 1)} if landed else {1: (10, 1), 2: (20, 1)}
            assert _live(after) == want, f"{kind.value}@{k} {io.log[k - 1] if k <= len(io.log) else ''}"


def test_a_commit_that_lost_a_race_deletes_the_files_of_its_dropped_plan(tmp_path: Path) -> None:
    """An aggregation upsert whose first publish loses to a concurrent upsert of the same key plans again on the
    winner's snapshot: the sum counts both once, and the merged file and vectors of the dropped plan are deleted."""
    uri = str(tmp_path / "t")
    plain = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options=AGG)
    plain.upsert(pa.table({"id": [1], "total": [10], "hits": [1]}, schema=SCHEMA))
    raced = []

    def race(op: str, path: str) -> None:
        if op == "publish" and not raced:
            raced.append(path)
            plain.upsert(pa.table({"id": [1], "total": [100], "hits": [1]}, schema=SCHEMA))

    io = FaultIO(lakefmt.open_table(uri).io, hook=race)
    lakefmt.Table(io, MetaStore(io)).upsert(pa.table({"id": [1, 1], "total": [1, 2], "hits": [1, 1]}, schema=SCHEMA))
    assert raced and [op for op, _ in io.log].count("publish") == 2  # lost once, then landed
    table = lakefmt.open_table(uri)
    assert _live(table) == {1: (113, 4)}
    orphans = table.remove_orphan_files(older_than=0, dry_run=True).deleted
    left = sorted(p for paths in orphans.values() for p, _ in paths if "/manifest/" not in f"/{p}")
    assert left == [], left
