"""Attacks on schema evolution (issue 16): each test is a way a user, a writer or a hostile file could change a
table it should have left alone or get a wrong answer, and shows that it no longer does."""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.errors import (
    CorruptMetadataError,
    InvalidOptionError,
    LakefmtError,
    MissingMetadataError,
    SchemaMismatchError,
)

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


# -- a pyiceberg user's habits ------------------------------------------------------------------------------

NESTED = pa.schema([("id", pa.int32()), ("user", pa.string()), ("geo", pa.struct([("lat", pa.float32())]))])


def _nested_table(root: Any) -> lakefmt.Table:
    t = lakefmt.create_table(str(root), NESTED)
    t.append(pa.table({"id": pa.array([1], pa.int32()), "user": ["ann"], "geo": [{"lat": 1.5}]}, schema=NESTED))
    return t


def test_the_builder_takes_pyiceberg_names_keywords_and_dotted_paths(tmp_path: Any) -> None:
    """What a pyiceberg user writes works as in pyiceberg: ``delete_column``, ``make_column_optional``,
    ``add_column(path, field_type, doc=, required=False)``, ``update_column(path, field_type=, required=False,
    doc=)``, and a dotted name for a field inside a struct. Before, each was an AttributeError or a TypeError, and
    ``rename_column("geo.lat", ...)`` said the table had no column 'geo.lat'."""
    t = _nested_table(tmp_path / "t")
    with t.update_schema() as u:
        u.add_column("country", field_type=pa.string(), doc="ISO code", required=False)
        u.add_column("geo.lon", pa.float32())  # "geo" is a struct: a field inside it
        u.rename_column("geo.lat", "latitude")
        u.update_column("geo.latitude", field_type=pa.float64())
        u.update_column("id", pa.int64(), required=False, doc="the key")
        u.make_column_optional("user")
        u.move_before("geo.lon", "geo.latitude")
        u.move_after("country", "id")
    with t.update_schema() as u:
        u.delete_column("user")
    t = lakefmt.open_table(str(tmp_path / "t"))
    schema = t.schema()
    assert schema.names == ["id", "country", "geo"]
    assert schema.field("geo").type == pa.struct([("lon", pa.float32()), ("latitude", pa.float64())])
    assert schema.field("id").type == pa.int64()
    assert schema.field("country").metadata == {b"doc": b"ISO code"}
    assert schema.field("id").metadata == {b"doc": b"the key"}
    assert t.to_arrow().to_pylist() == [{"id": 1, "country": None, "geo": {"lon": None, "latitude": 1.5}}]


def test_a_dotted_name_that_is_a_column_of_its_own_stays_one_name(tmp_path: Any) -> None:
    """A column whose name has a dot (and no struct of the name before the dot) is one column: it is added and
    found by its full name, as before."""
    t = _nested_table(tmp_path / "t")
    with t.update_schema() as u:
        u.add_column("a.b", pa.int8())
    with t.update_schema() as u:
        u.rename_column("a.b", "a.c")
    assert t.schema().names == ["id", "user", "geo", "a.c"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.add_column("c", pa.string(), required=True), "required"),
        (lambda u: u.update_column("id", required=True), "required"),
        (lambda u: u.update_column("id", pa.int16()), "only widening"),
        (lambda u: u.rename_column("geo.lat", "user"), None),  # a struct field may take a top-level name
        (lambda u: u.add_column("c", "string"), "pyarrow DataType"),
        (lambda u: u.add_column(7, pa.string()), "column path"),
        (lambda u: u.drop_column(("geo", 3)), "column path"),
    ],
    ids=[
        "add-required",
        "make-required",
        "narrow",
        "struct-field-takes-top-level-name",
        "type-name",
        "int-path",
        "int-in-path",
    ],
)
def test_bad_builder_input_is_a_lakefmt_error_and_changes_nothing(
    tmp_path: Any, change: Any, message: str | None
) -> None:
    """Bad input to the builder raises a LakefmtError that names the problem (before: a TypeError for a type
    given as a string or a path that is not a name), and the table keeps its schema and snapshots."""
    t = _nested_table(tmp_path / "t")
    if message is None:
        with t.update_schema() as u:
            change(u)
        assert t.schema().field("geo").type.field(0).name == "user"
        return
    with pytest.raises(LakefmtError, match=message), t.update_schema() as u:
        change(u)
    t = lakefmt.open_table(str(tmp_path / "t"))
    assert [s.id for s in t.schemas()] == [0] and len(t.snapshots()) == 1


def test_changes_that_undo_each_other_publish_no_schema(tmp_path: Any) -> None:
    """A rename and its reverse (or a column added and dropped in the same update) leave the columns as they were:
    nothing is published. Before, each published a schema and a snapshot that changed nothing."""
    t = _nested_table(tmp_path / "t")
    with t.update_schema() as u:
        u.rename_column("user", "u").rename_column("u", "user")
    with t.update_schema() as u:
        u.add_column("tmp", pa.int8()).drop_column("tmp")
    assert [s.id for s in t.schemas()] == [0] and len(t.snapshots()) == 1


def test_an_unknown_schema_mode_is_an_option_error(tmp_path: Any) -> None:
    t = _nested_table(tmp_path / "t")
    with pytest.raises(InvalidOptionError, match="schema_mode"):
        t.append(pa.table({"id": pa.array([2], pa.int32())}), schema_mode="overwrite")  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ["categorical", "enum"])
def test_a_polars_categorical_or_enum_column_is_written_as_its_strings(tmp_path: Any, dtype: str) -> None:
    """Polars hands a Categorical or Enum column over as dictionary<string_view>, which Arrow's cast to string
    cannot decode ("array_take has no kernel for string_view"): it was refused. It is written as its strings."""
    import polars as pl  # the dev extra has it: this test must run, not skip
    t = lakefmt.create_table(
        str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("dt", pa.string())]), partition_by=["dt"]
    )
    kind = pl.Categorical if dtype == "categorical" else pl.Enum(["a", "b"])
    t.append(pl.DataFrame({"id": [1, 2, 3], "dt": pl.Series(["a", "b", None], dtype=kind)}))
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "dt": "a"}, {"id": 2, "dt": "b"}, {"id": 3, "dt": None}]


# -- hostile metadata ----------------------------------------------------------------------------------------


def _evolved(root: Any) -> lakefmt.Table:
    t = lakefmt.create_table(str(root), SCHEMA)
    t.append(_rows([1], [10]))
    with t.update_schema() as u:
        u.add_column("b", pa.string())
    t.append(pa.table({"id": pa.array([2], pa.int32()), "a": [20], "b": ["x"]}))
    return lakefmt.open_table(str(root))


def _unchanged(root: Any, schemas: list[int], snapshots: int) -> None:
    files = sorted(p.name for p in (root / "schema").iterdir())
    assert files == [f"schema-{i}" for i in schemas]
    assert len([p for p in (root / "snapshot").iterdir() if p.name.startswith("snapshot-")]) == snapshots


@pytest.mark.parametrize("damage", ["missing", "unknown-id"])
def test_a_latest_snapshot_whose_schema_file_is_missing_refuses_commits(tmp_path: Any, damage: str) -> None:
    """The latest snapshot records schema 1 but schema/schema-1 is gone (or it names schema 99, which never
    existed). A schema change was built on schema 0 and published a new schema-1 whose new column took field id 3,
    the id of the lost column 'b' (whose values then read as the new column's); an append committed a snapshot
    whose schema id went back to 0. Both are refused with MissingMetadataError, and nothing is written."""
    root = tmp_path / "t"
    _evolved(root)
    if damage == "missing":
        os.chmod(root / "schema" / "schema-1", 0o644)
        os.remove(root / "schema" / "schema-1")
        left = [0]
    else:
        path = root / "snapshot" / "snapshot-3"
        doc = json.loads(path.read_bytes())
        doc["schemaId"] = 99
        os.chmod(path, 0o644)
        path.write_text(json.dumps(doc))
        left = [0, 1]
    t = lakefmt.open_table(str(root))
    with pytest.raises(MissingMetadataError, match="schema"), t.update_schema() as u:
        u.add_column("c", pa.int64())
    t = lakefmt.open_table(str(root))
    with pytest.raises(MissingMetadataError, match="schema"):
        t.append(_like(t, 3))
    _unchanged(root, left, 3)


def _like(t: lakefmt.Table, i: int) -> pa.Table:
    """A row of the table's current columns (the schema its listing says is newest)."""
    return pa.table({f.name: pa.array([i], f.type) if f.name != "b" else ["y"] for f in t.schema()})


def test_a_schema_file_that_names_another_id_is_corrupt(tmp_path: Any) -> None:
    """schema/schema-2 holds a schema whose id is 7 (a file copied by hand): it is corrupt, not taken for
    schema 7 (a change then looked for schema-6 and said it was missing)."""
    root = tmp_path / "t"
    _evolved(root)
    doc = json.loads((root / "schema" / "schema-1").read_bytes())
    doc["id"] = 7
    (root / "schema" / "schema-2").write_text(json.dumps(doc))
    with (
        pytest.raises(CorruptMetadataError, match="schema-2 holds schema 7"),
        lakefmt.open_table(str(root)).update_schema() as u,
    ):
        u.add_column("c", pa.int64())
    _unchanged(root, [0, 1, 2], 3)


def test_a_snapshot_with_a_negative_schema_id_is_corrupt(tmp_path: Any) -> None:
    root = tmp_path / "t"
    _evolved(root)
    path = root / "snapshot" / "snapshot-3"
    doc = json.loads(path.read_bytes())
    doc["schemaId"] = -1
    os.chmod(path, 0o644)
    path.write_text(json.dumps(doc))
    t = lakefmt.open_table(str(root))
    with pytest.raises(CorruptMetadataError, match="schemaId"):
        t.append(_like(t, 3))
    _unchanged(root, [0, 1], 3)


def test_a_columns_doc_is_kept_shown_and_changed(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``doc=`` (pyiceberg's keyword) is stored in the schema file, read back as the Arrow field metadata ``doc``,
    shown by ``lakefmt schema`` and its history, and changed by ``update_column(path, doc=...)``."""
    t = _nested_table(tmp_path / "t")
    with t.update_schema() as u:
        u.add_column(("geo", "alt"), pa.float32(), doc="metres")
    with t.update_schema() as u:
        u.update_column("geo.alt", doc="metres above sea level")
    assert main(["schema", t.uri, "--json"]) == 0
    fields = {f["path"]: f for f in json.loads(capsys.readouterr().out)["fields"]}
    assert fields["geo.alt"]["doc"] == "metres above sea level" and "doc" not in fields["id"]
    assert main(["schema", t.uri, "--history", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[2]["changes"] == ["set the doc of 'geo.alt' (field id 5)"]
    assert lakefmt.open_table(t.uri).schema().field("geo").type.field("alt").metadata == {
        b"doc": b"metres above sea level"
    }


def test_a_merge_mode_append_fills_the_nullable_columns_the_data_lacks(tmp_path: Any) -> None:
    """``schema_mode="merge"`` merges both ways, as Delta's mergeSchema does: the data's new columns are added, and
    the table's nullable columns the data lacks read as null (a writer whose data predates a column added
    meanwhile). Before, the second was refused ("missing column(s) user"). A missing column that is not nullable
    is still refused; without merge mode a missing nullable column is written as nulls too (one rule for every
    writer), but a new column is refused."""
    t = lakefmt.create_table(
        str(tmp_path / "t"), pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string())])
    )
    t.append(pa.table({"id": [1], "country": ["fr"]}), schema_mode="merge")
    assert t.to_arrow().to_pylist() == [{"id": 1, "user": None, "country": "fr"}]
    snapshots = len(t.snapshots())
    with pytest.raises(SchemaMismatchError, match="extra column"):
        t.append(pa.table({"id": [2], "city": ["x"]}))
    with pytest.raises(SchemaMismatchError, match=r"missing column\(s\) id"):
        t.append(pa.table({"user": ["x"]}), schema_mode="merge")
    assert len(t.snapshots()) == snapshots and [s.id for s in t.schemas()] == [0, 1]
