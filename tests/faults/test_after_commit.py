"""Regression tests for what the crash matrix found: a commit that has landed must never be reported as
failed, because ``Table.append``/``overwrite`` delete the files of a commit that failed.

Before the fix, anything raised after the snapshot was published (by the expiration that table options run
after each commit, or by the metadata reads that decide whether to run it) escaped ``Committer.commit``:
``Table.append`` then deleted the data files and manifest of the snapshot it had just published, and the
table no longer read (CorruptMetadataError: manifest ... is missing). A table created with only
``snapshot.num-retained.max`` below the default ``snapshot.num-retained.min`` (10) did that on every append.
"""

from __future__ import annotations

import shutil
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.meta.store import MetaStore
from lakefmt.options import InvalidOptionError
from lakefmt.spec import TableSchema, layout

from .faultio import Fault, FaultIO, FaultPlan

SCHEMA = pa.schema([("id", pa.int64())])


def test_contradicting_retention_options_are_refused_at_create(tmp_path: Any) -> None:
    with pytest.raises(InvalidOptionError, match=r"snapshot.num-retained.min \(10\).*snapshot.num-retained.max \(3\)"):
        lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"snapshot.num-retained.max": "3"})
    assert not (tmp_path / "t").exists()
    lakefmt.create_table(
        str(tmp_path / "t"), SCHEMA, options={"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"}
    )


def test_a_table_with_contradicting_options_from_before_the_check_keeps_its_rows(tmp_path: Any) -> None:
    """The options are stored in the schema file; a table written before create_table checked them still
    commits, and every append keeps its rows (its automatic expiration cannot run, `lakefmt expire` can)."""
    uri = str(tmp_path / "t")
    t = lakefmt.create_table(uri, SCHEMA)
    schema = t.table_schema()
    old = TableSchema(schema.id, schema.arrow_schema, schema.partition_keys, {"snapshot.num-retained.max": "3"}, 0)
    t.io.delete(layout.schema_path(0))
    t.io.write(layout.schema_path(0), old.to_json())
    t = lakefmt.open_table(uri)
    for i in range(5):
        assert t.append(pa.table({"id": [i]})) is not None
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    ids = [s.id for s in t.snapshots()]  # the appends, and the automatic compaction after the fifth
    assert t.expire_snapshots(retain_max=3).expired_snapshots == ids[:-3]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kind", [Fault.RAISE_BEFORE, Fault.RAISE_AFTER], ids=lambda k: k.value)
def test_an_io_error_after_the_publish_is_not_a_failed_append(tmp_path: Any, kind: Fault) -> None:
    uri, dry_uri = str(tmp_path / "t"), str(tmp_path / "dry")
    t = lakefmt.create_table(uri, SCHEMA, options={"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    t.append(pa.table({"id": [0]}))
    shutil.copytree(uri, dry_uri)
    dry = FaultIO(lakefmt.open_table(dry_uri).io)
    lakefmt.Table(dry, MetaStore(dry)).append(pa.table({"id": [1]}))
    latest_hint = next(k for k, (op, path) in enumerate(dry.log, 1) if op == "write" and path == layout.LATEST)
    # the operation after the LATEST hint is the first of Table's after-commit step (the expiration the options
    # ask for): a read of the options or of the snapshots to expire
    assert latest_hint < len(dry.log) and dry.log[latest_hint][0] in ("read", "list"), dry.log[latest_hint - 1 :]
    io = FaultIO(lakefmt.open_table(uri).io, FaultPlan(kind, latest_hint + 1))
    snap = lakefmt.Table(io, MetaStore(io)).append(pa.table({"id": [1]}))
    assert io.fired and snap is not None and snap.id == 2
    assert sorted(lakefmt.open_table(uri).to_arrow().column("id").to_pylist()) == [0, 1]
