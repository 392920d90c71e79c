"""Attacks on schema evolution (issue 16): each test is a way a user, a writer or a hostile file could change a
table it should have left alone or get a wrong answer, and shows that it no longer does."""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError, SchemaMismatchError

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


@pytest.mark.parametrize("new_type", ["float64", "int32", "string"])
def test_a_schema_file_that_changes_a_type_other_than_by_widening_is_corrupt_not_cast(
    tmp_path: Any, new_type: str
) -> None:
    """A schema file (written by hand or by a foreign writer) that gives a field id another type than a widening
    of the one its older files were written with: reading those files is refused as corrupt metadata. Before,
    int64 values were cast to float64 or narrowed to int32 without a word (12 read as 12.0)."""
    root = tmp_path / "t"
    t = lakefmt.create_table(str(root), SCHEMA)
    t.append(_rows([1], [12]))
    with t.update_schema() as u:
        u.rename_column("a", "b")
    path = root / "schema" / "schema-1"
    doc = json.loads(path.read_bytes())
    doc["fields"][1]["type"] = new_type
    os.chmod(path, 0o644)
    path.write_text(json.dumps(doc))
    t = lakefmt.open_table(str(root))
    with pytest.raises(CorruptMetadataError, match="field 2"):
        t.to_arrow()
    with pytest.raises(CorruptMetadataError, match="field 2"):
        t.to_arrow(columns=["b"], filter=pa.compute.field("id") == 1)


def test_a_schema_file_that_lowers_the_highest_field_id_is_refused_before_an_id_is_reused(tmp_path: Any) -> None:
    """The latest schema file says highestFieldId 1 although its predecessor assigned id 2 (to the column it
    dropped): a change that adds a column would give it id 2 again, and the dropped column's old values would
    come back under the new name. The change is refused as corrupt metadata and nothing is written. Before, the
    added column 'c' read 7, the value of the dropped 'a'."""
    root = tmp_path / "t"
    t = lakefmt.create_table(str(root), SCHEMA)
    t.append(_rows([1], [7]))
    with t.update_schema() as u:
        u.drop_column("a")
    path = root / "schema" / "schema-1"
    doc = json.loads(path.read_bytes())
    assert doc["highestFieldId"] == 2
    doc["highestFieldId"] = 1
    os.chmod(path, 0o644)
    path.write_text(json.dumps(doc))
    t = lakefmt.open_table(str(root))
    with pytest.raises(CorruptMetadataError, match="highestFieldId"), t.update_schema() as u:
        u.add_column("c", pa.int64())
    t = lakefmt.open_table(str(root))
    assert [s.id for s in t.schemas()] == [0, 1]
    assert t.to_arrow().to_pylist() == [{"id": 1}]
