"""Issue 26 attacked again (second pass): reads of snapshots that expire under engines, hand-made hints, SQL text
filters, history and one-line writes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import SnapshotNotFoundError

SCHEMA = pa.schema([("id", pa.int64())])
OPTS = {"write-only": "true"}  # one snapshot per commit, and nothing expires unless asked


def _table(uri: str, commits: int) -> lakefmt.Table:
    t = lakefmt.create_table(uri, SCHEMA, options=OPTS)
    for i in range(commits):  # each overwrite removes the previous file: expiring a snapshot deletes its file
        t.overwrite(pa.table({"id": [i]}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("engine", ["duckdb", "polars", "dataset"])
def test_an_engine_reading_a_scan_whose_snapshot_expired_names_it(tmp_path: Any, engine: str) -> None:
    t = _table(str(tmp_path / "t"), 5)
    scan = t.scan(snapshot_id=2)
    assert len(scan.files()) == 1  # planned: the file of snapshot 2, which snapshot 3 removed
    t.expire_snapshots(retain_max=1)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 has expired"):
        if engine == "duckdb":
            scan.to_duckdb().fetchall()
        elif engine == "polars":
            scan.to_polars().collect()
        else:
            scan.to_dataset().to_table()
