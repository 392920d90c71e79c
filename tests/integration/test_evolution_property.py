"""A property of schema evolution: any sequence of allowed schema changes and appends reads back exactly as a
model that applies the same changes to plain Arrow data.

The model keeps every row as values by *column identity* (a counter of its own, never lakefmt's field ids) and
the schema as an ordered list of (identity, name, type, nullable). Adding a column gives a new identity, so a
column dropped and added again under its name reads null for older rows; renames and moves change only the
schema; widening keeps every value. After each step the table's schema and rows (the latest snapshot, and by
time travel every snapshot so far) must equal the model's. Small in CI (``max_examples`` 12); 200 examples with
``LAKEFMT_FULL_FAULTS=1``.
"""

from __future__ import annotations

import decimal
import os
import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakefmt

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
D = decimal.Decimal

#: the types a column can start with, and what each widens to (in order)
WIDER: dict[pa.DataType, pa.DataType] = {
    pa.int8(): pa.int16(),
    pa.int16(): pa.int32(),
    pa.int32(): pa.int64(),
    pa.float32(): pa.float64(),
    pa.decimal128(6, 2): pa.decimal128(12, 2),
    pa.decimal128(12, 2): pa.decimal128(20, 2),
}
START_TYPES = [pa.int8(), pa.int32(), pa.float32(), pa.decimal128(6, 2), pa.string(), pa.bool_()]


@dataclass
class Column:
    ident: int
    name: str
    type: pa.DataType
    nullable: bool = True


@dataclass
class Model:
    """The schema (ordered columns) and every row as {identity: value}; ``rid`` (identity 0) keys the rows and
    ``part`` (identity 1) partitions the table: neither is dropped or renamed (partition columns cannot be)."""

    columns: list[Column] = field(
        default_factory=lambda: [
            Column(0, "rid", pa.int64(), False),
            Column(1, "part", pa.string()),
            Column(2, "a", pa.int16()),
        ]
    )
    rows: list[dict[int, Any]] = field(default_factory=list)
    next_ident: int = 3

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    def table(self) -> list[dict[str, Any]]:
        return sorted(({c.name: r.get(c.ident) for c in self.columns} for r in self.rows), key=lambda r: r["rid"])

    def named(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def free_name(self, rng: random.Random) -> str:
        used = {c.name for c in self.columns}
        return next(n for n in (f"c{rng.randrange(8)}" for _ in range(64)) if n not in used)


def _value(t: pa.DataType, rng: random.Random) -> Any:
    """A value of type ``t`` that every wider type holds exactly (floats: multiples of 1/4)."""
    if pa.types.is_integer(t):
        bits = t.bit_width - 1
        return rng.randrange(-(2**bits), 2**bits)
    if pa.types.is_floating(t):
        return rng.randrange(-4000, 4000) / 4 if t.bit_width == 32 else rng.randrange(-(2**40), 2**40) / 4
    if pa.types.is_decimal(t):
        digits = t.precision - t.scale
        return D(rng.randrange(-(10**digits) + 1, 10**digits)) + D(rng.randrange(100)) / 100
    if pa.types.is_boolean(t):
        return rng.random() < 0.5
    return rng.choice(["", "x", "fr", "é", "a b"]) + str(rng.randrange(100))


def _append(t: lakefmt.Table, m: Model, rng: random.Random) -> None:
    start = len(m.rows)
    new = []
    for i in range(start, start + rng.randrange(1, 5)):
        row: dict[int, Any] = {0: i, 1: rng.choice(["p", "q"])}
        for c in m.columns[:]:
            if c.ident in (0, 1):
                continue
            row[c.ident] = None if c.nullable and rng.random() < 0.2 else _value(c.type, rng)
        new.append(row)
    data = pa.table(
        {c.name: pa.array([r.get(c.ident) for r in new], c.type) for c in m.columns}, schema=m.arrow_schema()
    )
    t.append(data)
    m.rows += new


def _change(t: lakefmt.Table, m: Model, rng: random.Random) -> str:
    """One allowed change, applied to the table and the model alike; what it was."""
    droppable = [c for c in m.columns if c.ident not in (0, 1)]
    kinds = ["add", "rename", "move", "nullable"]
    kinds += ["drop"] if len(droppable) > 1 else []
    kinds += ["widen"] if any(c.type in WIDER for c in m.columns) else []
    kind = rng.choice(kinds)
    with t.update_schema() as u:
        if kind == "add":
            name, typ = m.free_name(rng), rng.choice(START_TYPES)
            u.add_column(name, typ)
            m.columns.append(Column(m.next_ident, name, typ))
            m.next_ident += 1
            return f"add {name} {typ}"
        if kind == "drop":
            col = rng.choice(droppable)
            u.drop_column(col.name)
            m.columns.remove(col)
            return f"drop {col.name}"
        if kind == "rename":
            col = rng.choice(droppable)
            new = m.free_name(rng)
            u.rename_column(col.name, new)
            old, col.name = col.name, new
            return f"rename {old} to {new}"
        if kind == "move":
            col = rng.choice(m.columns)
            m.columns.remove(col)
            if rng.random() < 0.3:
                u.move_first(col.name)
                m.columns.insert(0, col)
                return f"move {col.name} first"
            other = rng.choice(m.columns)
            u.move_after(col.name, other.name)
            m.columns.insert(m.columns.index(other) + 1, col)
            return f"move {col.name} after {other.name}"
        if kind == "widen":
            col = rng.choice([c for c in m.columns if c.type in WIDER])
            u.update_column(col.name, WIDER[col.type])
            col.type = WIDER[col.type]
            return f"widen {col.name} to {col.type}"
        col = rng.choice(m.columns)
        u.make_nullable(col.name)
        col.nullable = True
        return f"make {col.name} nullable"


def _check(t: lakefmt.Table, m: Model, sid: int | None, what: str) -> None:
    scan = t.scan(snapshot_id=sid)
    got = scan.to_arrow()
    assert got.schema == m.arrow_schema(), f"{what}: schema {got.schema} != {m.arrow_schema()}"
    assert sorted(got.to_pylist(), key=lambda r: r["rid"]) == m.table(), what


@settings(
    max_examples=200 if FULL else 12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 10 if FULL else 7))
def test_changes_and_appends_read_back_as_the_arrow_model(tmp_path_factory: Any, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    m = Model()
    uri = str(tmp_path_factory.mktemp("evolve") / "t")
    t = lakefmt.create_table(uri, m.arrow_schema(), partition_by=["part"], options={"manifest.merge-min-count": "2"})
    history: list[tuple[int, Model, str]] = []
    done: list[str] = []
    for _ in range(steps):
        if rng.random() < 0.5:
            _append(t, m, rng)
            done.append("append")
        else:
            done.append(_change(t, m, rng))
        _check(t, m, None, f"latest after {'; '.join(done)}")
        snap = t.latest_snapshot()
        if snap is not None:  # None: a change that changed nothing on a table with no snapshot yet
            frozen = Model([Column(c.ident, c.name, c.type, c.nullable) for c in m.columns], list(m.rows))
            history.append((snap.id, frozen, "; ".join(done)))
    _append(t, m, rng)  # rows under the final schema too
    again = lakefmt.open_table(uri)  # nothing cached
    _check(again, m, None, f"reopened after {'; '.join(done)}; append")
    for sid, model, what in history:  # time travel: each snapshot with its own schema
        _check(again, model, sid, f"snapshot {sid} after {what}")
        assert again.schema(snapshot_id=sid) == model.arrow_schema()


def test_the_model_catches_a_wrong_read(tmp_path: Any) -> None:
    """The check is not vacuous: a read that maps by name instead of by field id (a column dropped, then added
    again under its name) differs from the model."""
    m = Model()
    t = lakefmt.create_table(str(tmp_path / "t"), m.arrow_schema(), partition_by=["part"])
    rng = random.Random(1)
    _append(t, m, rng)
    with t.update_schema() as u:
        u.drop_column("a")
    m.columns = m.columns[:2]
    with t.update_schema() as u:
        u.add_column("a", pa.int16())
    m.columns.append(Column(m.next_ident, "a", pa.int16()))
    _check(t, m, None, "by id")
    by_name = ds.dataset([f.full_path for f in t.files()], schema=m.arrow_schema(), format="parquet")
    with pytest.raises(AssertionError):
        assert sorted(by_name.to_table().to_pylist(), key=lambda r: r["rid"]) == m.table()
