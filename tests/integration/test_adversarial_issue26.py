"""Habits of deltalake, pyiceberg, Paimon and Spark SQL users, attacked: pandas categoricals, columns that differ
only in case, and what a one-line write does with them."""

from __future__ import annotations

from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import lakefmt


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow"])
def test_write_table_takes_categorical_columns_as_their_values(tmp_path: Any, kind: str) -> None:
    """A pandas Categorical (Arrow dictionary<string>) or Polars Categorical creates a plain string column; a later
    write with other categories appends to it."""
    uri = str(tmp_path / "t")
    first = pd.DataFrame({"c": pd.Categorical(["x", "y", "x"]), "n": [1, 2, 3]})
    second = pd.DataFrame({"c": pd.Categorical(["z"]), "n": [4]})
    data: Any = {
        "pandas": (first, second),
        "polars": (pl.from_pandas(first), pl.from_pandas(second)),
        "arrow": (pa.Table.from_pandas(first), pa.Table.from_pandas(second)),
    }[kind]
    t = lakefmt.write_table(uri, data[0])
    assert not pa.types.is_dictionary(t.table_schema().arrow_schema.field("c").type)
    lakefmt.write_table(uri, data[1])
    got = lakefmt.open_table(uri).to_arrow().sort_by("n")
    assert got.column("c").to_pylist() == ["x", "y", "x", "z"]
    created = lakefmt.create_table(str(tmp_path / "u"), data[0])
    assert not pa.types.is_dictionary(created.table_schema().arrow_schema.field("c").type)


def test_merge_refuses_a_column_that_differs_from_one_of_the_table_only_in_case(tmp_path: Any) -> None:
    """Spark SQL resolves names case-insensitively: ``schema_mode="merge"`` with ``V`` next to the table's ``v``
    (top level or in a struct) would make a table whose columns Spark cannot tell apart. Refused, naming both
    columns; the table is unchanged."""
    uri = str(tmp_path / "t")
    st = pa.struct([("x", pa.int64())])
    t = lakefmt.write_table(uri, pa.table({"id": [1], "v": ["a"], "s": pa.array([{"x": 1}], st)}))
    bad = [
        pa.table({"id": [2], "V": ["b"]}),
        pa.table({"id": [2], "s": pa.array([{"X": 2}], pa.struct([("X", pa.int64())]))}),
    ]
    for data in bad:
        with pytest.raises(lakefmt.errors.SchemaEvolutionError, match="only in case"):
            lakefmt.write_table(uri, data, schema_mode="merge")
        with pytest.raises(lakefmt.errors.SchemaEvolutionError, match="only in case"):
            t.append(data, schema_mode="merge")
    again = lakefmt.open_table(uri)
    assert again.table_schema().arrow_schema.names == ["id", "v", "s"] and again.version() == 1
    lakefmt.write_table(uri, pa.table({"id": [3], "w": ["c"]}), schema_mode="merge")  # a new name is still added
    assert lakefmt.open_table(uri).table_schema().arrow_schema.names == ["id", "v", "s", "w"]


def test_write_table_keeps_a_named_pandas_index_as_columns(tmp_path: Any) -> None:
    """``df.set_index("id")`` or a groupby's result holds its key in a named index: it is written as a column (as
    deltalake does), not silently lost. An unnamed index (a RangeIndex, or what a row filter leaves) is position
    only and is not written. A named index whose name is also a column is refused, naming it."""
    uri = str(tmp_path / "t")
    df = pd.DataFrame({"id": [10, 20, 30], "v": ["a", "b", "c"]})
    lakefmt.write_table(uri, df.set_index("id"))
    got = lakefmt.open_table(uri).to_arrow()
    assert got.column_names == ["id", "v"] and got.sort_by("id").column("id").to_pylist() == [10, 20, 30]
    lakefmt.write_table(uri, df[df["id"] > 10])  # unnamed index [1, 2]: not a column
    assert lakefmt.open_table(uri).to_arrow().num_rows == 5
    two = pd.DataFrame({"a": [1, 1], "b": ["x", "y"], "n": [5, 6]}).groupby(["a", "b"]).sum()
    assert lakefmt.write_table(str(tmp_path / "g"), two).to_arrow().sort_by("b").to_pylist() == [
        {"a": 1, "b": "x", "n": 5}, {"a": 1, "b": "y", "n": 6},
    ]
    clash = df.set_index("id")
    clash["id"] = [1, 2, 3]
    with pytest.raises(lakefmt.errors.SchemaMismatchError, match="'id'"):
        lakefmt.write_table(str(tmp_path / "c"), clash)
    assert not (tmp_path / "c").exists()


def test_table_writes_take_a_pandas_frame_as_write_table_does(tmp_path: Any) -> None:
    """``Table.append``/``overwrite`` of a filtered frame (its unnamed index [1, 2]) is not refused for an extra
    ``__index_level_0__`` column; a named index is a column there too."""
    t = lakefmt.write_table(str(tmp_path / "t"), pd.DataFrame({"id": [0], "v": ["z"]}))
    df = pd.DataFrame({"id": [1, 2, 3], "v": ["a", "b", "c"]})
    t.append(df[df["id"] > 1])
    t.append(df[df["id"] == 1].set_index("id"))
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]
    t.overwrite(df[df["id"] > 2])
    assert t.to_arrow().to_pylist() == [{"id": 3, "v": "c"}]


@pytest.mark.parametrize("keys", [["id"], None])
def test_merge_star_clauses_follow_the_missing_column_rule(tmp_path: Any, keys: list[str] | None) -> None:
    """Delta's rule for ``UPDATE SET *`` / ``INSERT *`` from a source without one of the target's columns: an update
    keeps the target's value, an insert writes null; a missing non-nullable column is refused for an insert,
    naming it, and the table is unchanged."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), pa.field("w", pa.int64(), False)])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=keys)
    t.append(pa.table({"id": [1, 2], "v": ["a", "b"], "w": [1, 2]}, schema=schema))
    src = pa.table({"id": [2, 3], "w": [20, 30]})
    t.merge(src, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    assert t.to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "v": "a", "w": 1}, {"id": 2, "v": "b", "w": 20}, {"id": 3, "v": None, "w": 30},
    ]
    before = t.version()
    with pytest.raises(lakefmt.errors.SchemaMismatchError, match="'w'"):
        t.merge(pa.table({"id": [4], "v": ["x"]}), "t.id = s.id", source_alias="s", target_alias="t") \
            .when_not_matched_insert_all().execute()
    assert t.version() == before


def test_creating_a_table_where_a_file_is_says_so(tmp_path: Any) -> None:
    """A uri that is a file (or lies under one) is a LocationNotEmptyError naming it, not an OSError; the file is
    untouched."""
    f = tmp_path / "data.csv"
    f.write_text("a\n1\n")
    for uri in (str(f), str(f / "t")):
        with pytest.raises(lakefmt.LocationNotEmptyError, match="is a file"):
            lakefmt.write_table(uri, pa.table({"a": [1]}))
        with pytest.raises(lakefmt.LocationNotEmptyError, match="is a file"):
            lakefmt.create_table(uri, pa.schema([("a", pa.int64())]))
    assert f.read_text() == "a\n1\n"


def test_pandas_columns_arrow_cannot_type_are_named(tmp_path: Any) -> None:
    """An object column of mixed values is a SchemaMismatchError naming it (not a raw ArrowInvalid); a column of
    nothing but nulls has no type to create a column from: refused naming it, and no table is created (a table
    with a column of type null refuses every later value)."""
    uri = str(tmp_path / "t")
    with pytest.raises(lakefmt.errors.SchemaMismatchError, match="'o'"):
        lakefmt.write_table(uri, pd.DataFrame({"id": [1, 2], "o": [1, "a"]}))
    for data in (pd.DataFrame({"id": [1, 2], "o": [None, None]}), pa.table({"id": [1], "o": pa.nulls(1)})):
        with pytest.raises(lakefmt.errors.SchemaMismatchError, match=r"'o'.*only nulls"):
            lakefmt.write_table(uri, data)
        with pytest.raises(lakefmt.errors.SchemaMismatchError, match=r"'o'.*only nulls"):
            lakefmt.create_table(uri, data)
    assert not (tmp_path / "t").exists()


def test_a_column_named_in_another_case_is_named_as_such(tmp_path: Any) -> None:
    """Spark SQL and pandas users write ``ID`` for the table's ``id``: the refusal says it is a case difference
    (names are matched exactly), not only "missing id, extra ID"."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    with pytest.raises(lakefmt.errors.SchemaMismatchError, match="'ID' differs from the table's column 'id' only in"):
        t.append(pa.table({"ID": [1], "v": ["a"]}))
    assert t.version() is None
