"""The bronze writer of tests/spark/test_chain_cdc.py: a process of its own that keeps upserting into and deleting
from a key table with plain ``Table.upsert`` and ``Table.delete_keys`` while the streaming driver is killed and
restarted.

Usage: python chain_cdc_writer.py BRONZE STOP_FILE INTERVAL_S FIRST CONSUMER_ID MAX_AHEAD

Step number k (from FIRST) upserts the rows of :func:`step` (new keys and updates of live ones) in one snapshot,
then deletes its keys to delete in another (no snapshot when none of them is live). One step every INTERVAL_S
seconds until STOP_FILE exists (or the process that started it is gone), then exit 0 (never in the middle of a
step). Prints ``wrote <k>`` after each step. The stream's consumer record (CONSUMER_ID) paces it, as in
chain_appender.py: it waits while the stream has MAX_AHEAD snapshots or more still to read.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pyarrow as pa

KEYS = 40  #: keys are 0 .. KEYS - 1: steps keep inserting, updating and deleting the same few keys
UPSERTS, DELETES = 6, 2  #: per step
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def step(k: int) -> tuple[pa.Table, pa.Table]:
    """Step k's rows to upsert (``v`` names the step) and keys to delete (none of them upserted in the step)."""
    rnd = random.Random(k)
    keys = rnd.sample(range(KEYS), UPSERTS + DELETES)
    up, gone = sorted(keys[:UPSERTS]), sorted(keys[UPSERTS:])
    rows = pa.table({"id": up, "v": [f"step-{k}-key-{i}" for i in up]}, schema=SCHEMA)
    return rows, pa.table({"id": pa.array(gone, pa.int64())})


def main() -> int:
    import lakefmt

    bronze, stop, interval, first = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    consumer_id, max_ahead = sys.argv[5], int(sys.argv[6])
    parent = os.getppid()
    table = lakefmt.open_table(bronze)
    k = first
    while not stop.exists() and os.getppid() == parent:
        t0 = time.monotonic()
        latest = table.latest_snapshot()
        position = {c.consumer_id: c.next_snapshot for c in table.consumers()}.get(consumer_id, 1)
        if (latest.id if latest is not None else 0) + 1 - position >= max_ahead:
            time.sleep(0.1)
            continue
        rows, gone = step(k)
        table.upsert(rows)
        table.delete_keys(gone)
        print(f"wrote {k}", flush=True)
        k += 1
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
