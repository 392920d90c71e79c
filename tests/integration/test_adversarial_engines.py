"""Merge engines attacked: sums that overflow their column's type, and the table unchanged after a refused commit."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import KeyTableError
from lakefmt.rewrite.keys.upsert import apply_key_changes


def _sum_table(tmp_path: Path, t: pa.DataType) -> tuple[lakefmt.Table, pa.Schema]:
    schema = pa.schema([("id", pa.int64()), ("v", t)])
    table = lakefmt.create_table(
        str(tmp_path / "t"),
        schema,
        primary_key=["id"],
        options={"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    )
    return table, schema


@pytest.mark.parametrize(
    ("t", "first", "second"),
    [
        (pa.int8(), 100, 100),
        (pa.int64(), 2**62, 2**62),  # pyarrow's sum wraps around silently to -2**63
        (pa.uint64(), 2**64 - 1, 1),  # ... and to 0
        (pa.decimal128(5, 2), Decimal("999.99"), Decimal("0.01")),
    ],
)
def test_a_sum_that_overflows_is_refused_and_the_table_unchanged(
    tmp_path: Path, t: pa.DataType, first: object, second: object
) -> None:
    table, schema = _sum_table(tmp_path, t)
    # within one commit's rows
    with pytest.raises(KeyTableError, match=r"sum of column 'v' .* does not fit"):
        table.upsert(pa.table({"id": [1, 1], "v": [first, second]}, schema=schema))
    assert table.latest_snapshot() is None
    # with the key's live row
    table.upsert(pa.table({"id": [1], "v": [first]}, schema=schema))
    before = table.latest_snapshot()
    with pytest.raises(KeyTableError, match=r"sum of column 'v' .* does not fit"):
        table.upsert(pa.table({"id": [1], "v": [second]}, schema=schema))
    assert table.latest_snapshot() == before
    assert table.to_arrow().to_pylist() == [{"id": 1, "v": first}]


def test_a_sum_at_the_edge_of_its_type_is_exact(tmp_path: Path) -> None:
    table, schema = _sum_table(tmp_path, pa.int64())
    table.upsert(pa.table({"id": [1, 1, 1], "v": [2**62, 2**62 - 1, -5]}, schema=schema))
    table.upsert(pa.table({"id": [1, 1], "v": [4, None]}, schema=schema))
    assert table.to_arrow().to_pylist() == [{"id": 1, "v": 2**63 - 2}]


SEQ = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int64()), ("seq", pa.int64())])


@pytest.mark.parametrize(
    ("options", "want"),
    [
        ({"merge-engine": "partial-update"}, {"id": 1, "v": "b", "n": 1, "seq": 30}),
        (
            {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
            {"id": 1, "v": "b", "n": 111, "seq": 30},
        ),
    ],
)
def test_sequence_field_orders_new_rows_against_the_live_row(
    tmp_path: Path, options: dict[str, str], want: dict[str, object]
) -> None:
    """A row that arrives late (its sequence value older than the live row's) does not override the newer values,
    as under deduplicate (format.md §22.5); rows of one commit on both sides of the live row fall in their place."""
    table = lakefmt.create_table(
        str(tmp_path / "s"), SEQ, primary_key=["id"], options={**options, "sequence.field": "seq"}
    )
    table.upsert(pa.table({"id": [1], "v": ["b"], "n": [1], "seq": [20]}, schema=SEQ))
    table.upsert(pa.table({"id": [1], "v": ["a"], "n": [10], "seq": [10]}, schema=SEQ))  # late: older than live
    # one commit with a row older and a row newer than the live row: the newer one's null keeps "b"
    table.upsert(pa.table({"id": [1, 1], "v": [None, "z"], "n": [None, 100], "seq": [30, 15]}, schema=SEQ))
    assert table.to_arrow().to_pylist() == [want]


@pytest.mark.parametrize("table", [None, "some/path"])
def test_apply_key_changes_names_a_table_that_is_not_one(table: object) -> None:
    with pytest.raises(TypeError, match=r"expected a lakefmt Table \(lakefmt.open_table\(uri\)\), got (NoneType|str)"):
        apply_key_changes(table, None, None)  # type: ignore[arg-type]


RSCHEMA = pa.schema(
    [("id", pa.int64()), ("s", pa.int16()), ("c", pa.int32()), ("mx", pa.string()), ("lnn", pa.string()),
     ("lv", pa.int64()), ("seq", pa.int64())]
)
RFUNCS = {"s": "sum", "c": "count", "mx": "max", "lnn": "last_non_null_value", "lv": "last_value"}


def _replay(state: dict[int, dict[str, object]], rows: list[dict[str, object]], seq: bool) -> None:
    """The model: per key, its row so far and the commit's rows in order (with seq: by it, a null first, the
    row so far before new rows of the same value), folded column by column."""
    for key in dict.fromkeys(r["id"] for r in rows):
        mine = [(i, r) for i, r in enumerate(rows) if r["id"] == key]
        if key in state:
            mine.insert(0, (-1, state[key]))
        if seq:
            mine.sort(key=lambda p: (p[1]["seq"] is not None, p[1]["seq"] or 0, p[0]))
        out: dict[str, object] = {"id": key}
        for col, fn in RFUNCS.items():
            vals = [(i, r[col]) for i, r in mine]
            non_null = [v for _, v in vals if v is not None]
            if fn == "sum":
                out[col] = sum(non_null) if non_null else None  # type: ignore[arg-type]
            elif fn == "count":
                out[col] = sum(v if i == -1 else 1 for i, v in vals if v is not None)  # type: ignore[misc]
            elif fn == "max":
                out[col] = max(non_null) if non_null else None  # type: ignore[type-var]
            elif fn == "last_non_null_value":
                out[col] = non_null[-1] if non_null else None
            else:
                out[col] = vals[-1][1]
        seqs = [r["seq"] for _, r in mine if r["seq"] is not None]
        out["seq"] = (max(seqs) if seqs else None) if seq else mine[-1][1]["seq"]  # type: ignore[type-var]
        state[key] = out


@pytest.mark.parametrize("seq", [False, True])
def test_random_upserts_equal_an_independent_replay(tmp_path: Path, seq: bool) -> None:
    import random

    rng = random.Random(7 + seq)
    options = {"merge-engine": "aggregation", "bucket": "2", "compaction.auto": "false"}
    options.update({f"fields.{c}.aggregate-function": f for c, f in RFUNCS.items()})
    if seq:
        options["sequence.field"] = "seq"
    else:
        options["fields.seq.aggregate-function"] = "last_value"
    table = lakefmt.create_table(str(tmp_path / "r"), RSCHEMA, primary_key=["id"], options=options)
    state: dict[int, dict[str, object]] = {}

    def maybe(v: object) -> object:
        return None if rng.random() < 0.3 else v

    for step in range(12):
        rows = [
            {
                "id": rng.randrange(5),
                "s": maybe(rng.randrange(-50, 50)),
                "c": maybe(rng.randrange(9)),
                "mx": maybe(rng.choice(["a", "é", "Z", "zz", ""])),
                "lnn": maybe(rng.choice(["x", "y", "z"])),
                "lv": maybe(rng.randrange(100)),
                "seq": maybe(rng.randrange(6)),
            }
            for _ in range(rng.randrange(1, 6))
        ]
        table.upsert(pa.Table.from_pylist(rows, schema=RSCHEMA))
        _replay(state, rows, seq)
        if step % 5 == 4:
            table.compact()
        got = {r["id"]: r for r in table.to_arrow().to_pylist()}
        assert table.to_arrow().num_rows == len(got) == len(state)
        assert got == state, f"step {step}"
