"""A Debezium-shaped change log of a small source table, its rows as a key table with ``rowkind.field`` takes
them, and the source's state by a plain dict replay (``from cdc_log import ...``: pytest puts ``tests/`` on the
path, as for ``helpers``)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

__all__ = ["KEY", "SCHEMA", "Key", "Row", "change_log", "flatten", "replay"]

#: the key table: the source's columns, the Debezium operation (``rowkind.field``) and the log position
SCHEMA = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("qty", pa.int64()), ("op", pa.string()), ("lsn", pa.int64())]
)
KEY = ("id", "region")
Key = tuple[int, str]
Row = dict[str, Any]


def change_log(seed: int, batches: int, per_batch: int, keys: int = 12) -> list[list[dict[str, Any]]]:
    """Debezium envelopes (``op``, ``before``, ``after``, ``source.lsn``) of a source table's changes, in batches:
    the first batch starts with the snapshot reads (``r``) of the rows the source had; then random creates, updates
    and deletes, the same key changing many times within one batch, a key deleted and created again."""
    rnd = random.Random(seed)
    state: dict[Key, Row] = {}
    lsn = 0
    out: list[list[dict[str, Any]]] = []
    for b in range(batches):
        batch: list[dict[str, Any]] = []
        if b == 0:
            for i in range(keys // 2):
                lsn += 1
                row = {"id": i, "region": "eu" if i % 2 else "us", "qty": lsn}
                state[(i, row["region"])] = row
                batch.append({"op": "r", "before": None, "after": row, "source": {"lsn": lsn}})
        for _ in range(per_batch):
            lsn += 1
            i = rnd.randrange(keys)
            key = (i, "eu" if i % 2 else "us")
            old = state.get(key)
            if old is None:
                row = {"id": i, "region": key[1], "qty": lsn}
                batch.append({"op": "c", "before": None, "after": row, "source": {"lsn": lsn}})
                state[key] = row
            elif rnd.random() < 0.3:
                batch.append({"op": "d", "before": old, "after": None, "source": {"lsn": lsn}})
                del state[key]
            else:
                row = {**old, "qty": lsn}
                batch.append({"op": "u", "before": old, "after": row, "source": {"lsn": lsn}})
                state[key] = row
        out.append(batch)
    return out


def flatten(events: list[dict[str, Any]]) -> pa.Table:
    """Debezium's envelopes as rows of the table: the after-image, or for a delete the before-image, with ``op``
    and the log position ``lsn``."""
    rows = [
        {**(e["after"] if e["op"] != "d" else e["before"]), "op": e["op"], "lsn": e["source"]["lsn"]} for e in events
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def replay(state: dict[Key, Row], events: list[dict[str, Any]]) -> dict[Key, Row]:
    """The source's state after ``events``, by a plain dict (the expected table: rows as stored, ``op`` and
    ``lsn`` of the change that wrote them)."""
    state = dict(state)
    for e in events:
        image = e["after"] if e["op"] != "d" else e["before"]
        key = (image["id"], image["region"])
        if e["op"] == "d":
            state.pop(key, None)
        else:
            state[key] = {**image, "op": e["op"], "lsn": e["source"]["lsn"]}
    return state
