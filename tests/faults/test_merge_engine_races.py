"""Two writers aggregating the same keys of a key table (``merge-engine=aggregation``), racing for each snapshot id:
each round, both are held before their first publish until both are there, so one of them loses and must merge its
rows with the winner's new live rows (it plans again on the winner's snapshot). Every increment must count; a key
has one live row after every commit. Threads here; ``LAKEFMT_FULL_FAULTS=1`` runs more rounds, in processes too."""

from __future__ import annotations

import os
import queue
import threading
import traceback
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.meta.store import MetaStore

from .faultio import FaultIO
from .test_overwrite_race import TIMEOUT, Gate

SCHEMA = pa.schema([("id", pa.int64()), ("total", pa.int64()), ("hits", pa.int64()), ("who", pa.string())])
OPTIONS = {
    "merge-engine": "aggregation",
    "fields.total.aggregate-function": "sum",
    "fields.hits.aggregate-function": "count",
    "bucket": "2",
    "compaction.auto": "false",
}
KEYS = list(range(6))
FULL = os.environ.get("LAKEFMT_FULL_FAULTS") == "1"


def racer(uri: str, who: int, rounds: int, start: Any, gate: Any, results: Any) -> None:
    """``rounds`` upserts of +1 (and +who*10 to key 0) on every key, each held at the gate before its publish."""
    try:
        plain = lakefmt.open_table(uri)
        io = FaultIO(plain.io)
        table = lakefmt.Table(io, MetaStore(io))
        for _ in range(rounds):
            start.wait(timeout=TIMEOUT)
            n = len(KEYS)
            rows = pa.table(
                {
                    "id": KEYS,
                    "total": [1 + (who * 10 if k == 0 else 0) for k in KEYS],
                    "hits": [1] * n,
                    "who": [f"w{who}"] * n,
                },
                schema=SCHEMA,
            )
            io.hook = Gate(gate)
            table.upsert(rows)
            io.hook = None
        results.put((who, "ok"))
    except BaseException:
        results.put((who, traceback.format_exc()))


@pytest.mark.parametrize("how", ["threads", "processes"] if FULL else ["threads"])
def test_racing_aggregations_keep_every_increment(tmp_path: Any, how: str, fault_ctx: Any) -> None:
    rounds = 12 if FULL else 3
    uri = str(tmp_path / "agg")
    table = lakefmt.create_table(uri, SCHEMA, primary_key=["id"], options=OPTIONS)
    if how == "threads":
        results: Any = queue.Queue()
        start: Any = threading.Barrier(2)
        gate: Any = threading.Barrier(2)
        make: Any = threading.Thread
    else:
        results, start, gate, make = fault_ctx.Queue(), fault_ctx.Barrier(2), fault_ctx.Barrier(2), fault_ctx.Process
    workers = [make(target=racer, args=(uri, who, rounds, start, gate, results)) for who in (0, 1)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=TIMEOUT)
    outcomes = dict(results.get(timeout=TIMEOUT) for _ in workers)
    assert outcomes == {0: "ok", 1: "ok"}, outcomes

    table = lakefmt.open_table(uri)
    snaps = table.snapshots()
    assert len(snaps) == 2 * rounds  # every upsert landed, none twice
    for snap in snaps:  # one live row per key after every commit, each key's sums as far as it went
        rows = table.scan(snapshot_id=snap.id).to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows) == KEYS, snap.id
        assert len({r["hits"] for r in rows}) == 1 and rows[0]["hits"] == snap.id
    rows = {r["id"]: r for r in table.to_arrow().to_pylist()}
    for k in KEYS:
        assert rows[k]["hits"] == 2 * rounds
        assert rows[k]["total"] == 2 * rounds + (10 * rounds if k == 0 else 0)
