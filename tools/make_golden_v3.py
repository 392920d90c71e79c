"""Write the golden format-version-3 table of the tests (tests/data/golden_v3): a small key table whose files are
committed to the repository, so that every later lakefmt must read them as they are.

The table is partitioned by ``dt``, keyed by ``(dt, id)`` and has 2 buckets. Three snapshots:

1. an append of 7 rows (on a key table, an upsert): 4 rows in 2026-01-01, 3 in 2026-01-02;
2. an upsert of 4 rows: 3 replace live rows (their old versions are marked in deletion vectors), 1 is new;
3. a ``delete_keys`` of 3 keys, 2 of which have a live row.

Run it from the repository's root::

    python tools/make_golden_v3.py tests/data/golden_v3

It writes with this checkout's lakefmt (not an installed one), and refuses a folder that exists. The file names
hold fresh UUIDs, so a new run writes other names; the test (tests/integration/test_golden_v3.py) checks rows,
counts and vectors, never names.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's lakefmt, not an installed one
import lakefmt

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
D1, D2 = "2026-01-01", "2026-01-02"

FIRST = pa.table(
    {
        "dt": [D1, D1, D1, D1, D2, D2, D2],
        "id": [1, 2, 3, 4, 1, 2, 3],
        "name": ["a", "b", "c", "d", "a", "b", "c"],
        "amount": [1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0],
    },
    schema=SCHEMA,
)
UPSERT = pa.table(
    {"dt": [D1, D1, D2, D2], "id": [2, 5, 1, 3], "name": ["b2", "e", "a2", "c2"], "amount": [2.5, 5.0, 10.5, 30.5]},
    schema=SCHEMA,
)
DELETE = pa.table({"dt": [D1, D2, D1], "id": [3, 2, 9]}, schema=pa.schema([SCHEMA.field("dt"), SCHEMA.field("id")]))


def make(root: Path) -> lakefmt.Table:
    """Create the golden table at ``root`` (which must not exist) and commit its three snapshots."""
    if root.exists():
        raise SystemExit(f"{root} exists: remove it first (the golden table is written once, from nothing)")
    t = lakefmt.create_table(
        str(root), SCHEMA, partition_by=["dt"], primary_key=["dt", "id"], options={"bucket": "2"}
    )
    t.append(FIRST)
    t.upsert(UPSERT)
    t.delete_keys(DELETE)
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the folder to create (tests/data/golden_v3)")
    args = parser.parse_args(argv)
    t = make(args.root)
    for s in t.snapshots():
        op = s.properties.get("lakefmt.operation", "")
        print(f"snapshot {s.id}: {s.commit_kind.value} ({op}), {s.total_record_count} rows, {s.total_file_count} files")
    rows = t.to_arrow().sort_by([("dt", "ascending"), ("id", "ascending")])
    for r in rows.to_pylist():
        print(f"  {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
