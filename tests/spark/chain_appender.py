"""The bronze writer of tests/spark/test_chain.py: a process of its own that keeps appending to a lakefmt table
with plain ``Table.append`` while the streaming driver is killed and restarted.

Usage: python chain_appender.py BRONZE STOP_FILE INTERVAL_S FIRST CONSUMER_ID MAX_AHEAD

Append number k (from FIRST) holds the rows of :func:`rows`; one append every INTERVAL_S seconds until STOP_FILE
exists (or the process that started it is gone), then exit 0 (never in the middle of an append). Prints
``appended <k>`` after each commit. The stream's consumer record (CONSUMER_ID) paces it: it waits while the stream
has MAX_AHEAD snapshots or more still to read, so that a slow or restarting stream never faces a backlog that
grows with the machine's load.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow as pa

ROWS_PER_APPEND = 6
SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("payload", pa.string())])


def rows(k: int) -> pa.Table:
    """Append k's rows: ids ``[k * 6, (k + 1) * 6)``, two partitions (so two data files)."""
    ids = list(range(k * ROWS_PER_APPEND, (k + 1) * ROWS_PER_APPEND))
    return pa.table(
        {"id": ids, "part": [v % 2 for v in ids], "payload": [f"append-{k}-row-{v}" for v in ids]}, schema=SCHEMA
    )


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
        table.append(rows(k))
        print(f"appended {k}", flush=True)
        k += 1
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
