"""Attacks on schema evolution (issue 16): each test is a way a user, a writer or a hostile file could change a
table it should have left alone or get a wrong answer, and shows that it no longer does."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int32()), ("a", pa.int64())])


def _rows(ids: list[int], a: list[Any]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "a": pa.array(a, pa.int64())})


@pytest.mark.parametrize(
    "data",
    [
        pa.table({"id": pa.array([2**40]), "a": pa.array([1]), "x": ["new"]}),  # id does not fit int32
        pa.table({"id": ["two"], "a": pa.array([1]), "x": ["new"]}),  # id of a type the table cannot take
    ],
    ids=["overflow", "wrong-type"],
)
def test_a_refused_merge_mode_append_leaves_the_schema_unchanged(tmp_path: Any, data: pa.Table) -> None:
    """A merge-mode append whose rows the table refuses adds no column: the schema change and the append are one
    request, and the refusal (known from the first batch, before anything is published) leaves the table as it
    was. Before, the new column was committed and only the rows refused."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows([1], [1]))
    with pytest.raises(SchemaMismatchError):
        t.append(data, schema_mode="merge")
    t = lakefmt.open_table(str(tmp_path / "t"))
    assert [s.id for s in t.schemas()] == [0]
    assert t.schema().names == ["id", "a"]
    assert len(t.snapshots()) == 1
