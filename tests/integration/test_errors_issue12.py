"""Raw errors that became lakefmt's own (issue 12, item 14): a null in a NOT NULL column (pyarrow's
``ArrowInvalid`` from the Parquet writer), ``as_of`` NaN or infinite (``ValueError``/``OverflowError`` from
``int()``) and snapshot ids below 1 (reported as "snapshot -1 has expired"). Each is refused with an error that
says what is wrong, before anything is written, and the table stays exactly as it was."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.errors import (
    InvalidSnapshotIdError,
    InvalidTimestampError,
    LakefmtError,
    SchemaMismatchError,
    SnapshotNotFoundError,
)

NOT_NULL_ID = pa.field("id", pa.int64(), nullable=False)
SCHEMA = pa.schema([NOT_NULL_ID, pa.field("s", pa.string())])


def _state(t: lakefmt.Table) -> tuple[dict[str, int], list[int], list[dict[str, Any]]]:
    """Every file (path and size), the snapshot ids and the rows: what "unchanged" compares."""
    return file_listing(t.io), [s.id for s in t.snapshots()], sorted(t.to_arrow().to_pylist(), key=str)


def _table(store: Any, schema: pa.Schema = SCHEMA, rows: pa.Table | None = None) -> lakefmt.Table:
    t = create_table_in(store, schema)
    t.append(rows if rows is not None else pa.table({"id": [1, 2], "s": ["a", "b"]}, schema=schema))
    return t


# -- nulls in a NOT NULL column --------------------------------------------------------------------


def test_null_in_a_not_null_column_declared_by_the_data_too(store: Any) -> None:
    """Data whose own schema equals the table's (the column declared not null) but that holds a null: Arrow
    allows it, and the Parquet writer used to raise ArrowInvalid from inside prepare_commit."""
    t = _table(store)
    before = _state(t)
    bad = pa.Table.from_arrays([pa.array([3, None, None]), pa.array(["c", "d", "e"])], schema=SCHEMA)
    assert bad.schema.equals(SCHEMA)
    forms = [
        lambda: bad,
        lambda: bad.to_batches()[0],
        lambda: bad.to_batches(),
        lambda: pa.RecordBatchReader.from_batches(SCHEMA, bad.to_batches()),
    ]
    for form in forms:
        with pytest.raises(SchemaMismatchError, match=r"column 'id' is not nullable but has 2 null\(s\)"):
            t.append(form())
        with pytest.raises(SchemaMismatchError, match="'id'"):
            t.overwrite(form())
    writer = t.new_writer()
    with pytest.raises(SchemaMismatchError, match="'id'"):
        writer.write(bad)  # refused at write(), before any file is written
    writer.abort()
    assert _state(t) == before


def test_null_in_a_nested_not_null_field(local_store: Any) -> None:
    """A struct's child, a list's items and a map's values declared not null: the error names the nested
    field, both when the data declares it nullable (the table casts) and when it declares it not null."""
    child = pa.field("x", pa.int64(), nullable=False)
    item = pa.field("item", pa.int64(), nullable=False)
    value = pa.field("value", pa.int64(), nullable=False)
    struct_t, list_t, map_t = pa.struct([child]), pa.list_(item), pa.map_(pa.string(), value)
    cases = [
        (struct_t, pa.array([{"x": 1}, {"x": None}], pa.struct([("x", pa.int64())])), "'s.x'"),
        (struct_t, pa.StructArray.from_arrays([pa.array([1, None])], fields=[child]), "'s.x'"),
        (list_t, pa.array([[1], [2, None]], pa.list_(pa.int64())), "'s.item'"),
        (list_t, pa.array([[1], [2, None]], pa.large_list(pa.int64())), "'s.item'"),
        (map_t, pa.array([[("a", 1), ("b", None)]], pa.map_(pa.string(), pa.int64())), "'s.value'"),
    ]
    for typ, array, name in cases:
        schema = pa.schema([pa.field("s", typ)])
        good = pa.Table.from_arrays([pa.array([], typ)], schema=schema)
        t = _table(local_store, schema, good)
        before = _state(t)
        with pytest.raises(SchemaMismatchError, match=f"column {name} is not nullable but has 1 null"):
            t.append(pa.table({"s": array}))
        assert _state(t) == before, typ

    # a null under a null list is not stored: accepted, and read back as a null list
    schema = pa.schema([pa.field("s", list_t)])
    t = _table(local_store, schema, pa.Table.from_arrays([pa.array([], list_t)], schema=schema))
    offsets, values = pa.array([0, 1, 2], pa.int32()), pa.array([1, None])
    lists = pa.ListArray.from_arrays(offsets, values, type=list_t, mask=pa.array([False, True]))
    t.append(pa.Table.from_arrays([lists], schema=schema))
    assert t.to_arrow().column("s").to_pylist() == [[1], None]


# -- as_of that is not a point in time ---------------------------------------------------------------


def test_as_of_nan_or_infinite(store: Any) -> None:
    t = _table(store)
    before = _state(t)
    # issue 22: every float is refused (its unit would be a guess), so NaN and infinities are too
    for bad in (float("nan"), float("inf"), float("-inf"), 1e300, -1e300):
        with pytest.raises(InvalidTimestampError, match="is a float") as exc:
            t.scan(as_of=bad)  # type: ignore[arg-type]
        assert isinstance(exc.value, LakefmtError) and isinstance(exc.value, ValueError)
        with pytest.raises(InvalidTimestampError, match=re.escape(repr(bad))):
            t.to_arrow(as_of=bad)
    # whole epoch milliseconds still work: far future = the latest snapshot, far past = none
    assert t.scan(as_of=10**300).snapshot.id == 1
    with pytest.raises(SnapshotNotFoundError, match="no snapshot was committed"):
        t.scan(as_of=-(10**300))
    assert _state(t) == before


# -- snapshot ids below 1 ------------------------------------------------------------------------------


def test_snapshot_ids_start_at_1(store: Any) -> None:
    t = _table(store)
    t.append(pa.table({"id": [3], "s": ["c"]}, schema=SCHEMA))
    before = _state(t)
    calls = {
        "snapshot_id": [lambda sid: t.scan(snapshot_id=sid), lambda sid: t.files(snapshot_id=sid)],
        "to_snapshot": [lambda sid: t.scan(to_snapshot=sid)],
    }
    for what, fns in calls.items():
        for fn in fns:
            for sid in (0, -1, -(2**70)):
                with pytest.raises(InvalidSnapshotIdError, match=f"{what} {sid} is invalid: snapshot ids start at 1"):
                    fn(sid)
    with pytest.raises(InvalidSnapshotIdError, match=r"from_snapshot -1 is invalid: .*0 means from the start"):
        t.scan(from_snapshot=-1)
    # still a SnapshotNotFoundError (callers catching that keep working), and a ValueError; never "expired"
    with pytest.raises(SnapshotNotFoundError) as exc:
        t.to_arrow(snapshot_id=-1)
    assert isinstance(exc.value, ValueError) and "expired" not in str(exc.value)
    for bad in (1.0, "1", True):
        with pytest.raises(TypeError, match="snapshot_id must be a whole number"):
            t.scan(snapshot_id=bad)
    # the valid edges still work: 0 as the start of an incremental range, 1 as the first snapshot
    assert sorted(t.scan(from_snapshot=0).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert t.scan(snapshot_id=1).to_arrow().num_rows == 2
    assert _state(t) == before


def test_table_snapshot_ids_start_at_1(local_store: Any) -> None:
    t = _table(local_store)
    for sid in (0, -1):
        with pytest.raises(InvalidSnapshotIdError, match="snapshot ids start at 1"):
            t.snapshot(sid)
