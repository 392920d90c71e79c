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
