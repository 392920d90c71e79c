"""What a deltalake or pyiceberg user types (issue 36): the peers' keyword names are accepted where they mean the
same as lakefmt's (deltalake's DNF ``filters=`` and ``delete(predicate=)``, pyiceberg's ``row_filter=``,
``selected_fields=`` and ``upsert(join_cols=)``, pypaimon's ``primary_keys=``), and refused with an error naming
lakefmt's keyword where they cannot be taken exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import InvalidPredicateError, KeyTableError

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("dt", pa.string())])
DATA = pa.table({"id": [1, 2, 3, 4], "x": [0.5, None, 2.5, 3.5], "dt": ["a", "b", "a", "b"]}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(DATA)
    return t


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


@pytest.mark.parametrize(
    ("dnf", "sql"),
    [
        ([("x", ">", 1.0)], "x > 1.0"),
        ([("x", ">", 1.0), ("dt", "=", "a")], "x > 1.0 AND dt = 'a'"),
        ([[("dt", "=", "a")], [("x", "<", 1.0)]], "dt = 'a' OR x < 1.0"),
        ([("id", "in", [1, 4])], "id IN (1, 4)"),
        ([("dt", "!=", "a")], "dt <> 'a'"),
        ([("id", "not in", [1, 2])], "id NOT IN (1, 2)"),
    ],
)
def test_deltalake_dnf_filters_select_what_the_sql_selects(table: lakefmt.Table, dnf: list, sql: str) -> None:
    want = ids(table.to_arrow(filter=sql))
    assert ids(table.to_arrow(filters=dnf)) == want
    assert sorted(table.to_pandas(filters=dnf)["id"].tolist()) == want
    assert ids(table.scan(filters=dnf).to_arrow()) == want


def test_pyiceberg_row_filter_and_selected_fields(table: lakefmt.Table) -> None:
    out = table.scan(row_filter="x >= 2.5", selected_fields=["id"]).to_arrow()
    assert out.column_names == ["id"] and ids(out) == [3, 4]
    assert sorted(table.to_pandas(row_filter=pc.field("id") < 2)["id"].tolist()) == [1]
    with pytest.raises(TypeError, match="filter="):
        table.scan(row_filter=object())  # a pyiceberg BooleanExpression is not taken
    with pytest.raises(TypeError, match="pass filter= or row_filter="):
        table.scan(filter="id = 1", row_filter="id = 2")


def test_bad_dnf_names_lakefmts_keyword(table: lakefmt.Table) -> None:
    with pytest.raises(InvalidPredicateError, match="lakefmt's keyword is filter="):
        table.to_arrow(filters=[("x", "~", 1)])
    with pytest.raises(InvalidPredicateError, match="lakefmt's keyword is filter="):
        table.to_arrow(filters=[])
    with pytest.raises(InvalidPredicateError, match=r"9223372036854775809.*lakefmt's keyword is filter="):
        table.to_arrow(filters=[("id", "=", 2**63 + 1)])  # review: a raw OverflowError


def test_delete_with_deltalakes_predicate(table: lakefmt.Table) -> None:
    table.delete(predicate="dt = 'b'")
    assert ids(table.to_arrow()) == [1, 3]
    with pytest.raises(TypeError, match="delete needs filter="):
        table.delete()
    with pytest.raises(TypeError, match="not both"):
        table.delete("id = 1", predicate="id = 3")


def test_upsert_join_cols_and_primary_keys(tmp_path: Path, table: lakefmt.Table) -> None:
    t = lakefmt.create_table(str(tmp_path / "k"), SCHEMA, primary_keys=["id"])
    assert t.primary_key == ("id",)
    t.upsert(DATA, join_cols=["id"])
    t.upsert(pa.table({"id": [2], "x": [9.0], "dt": ["b"]}, schema=SCHEMA), join_cols=["id"])
    assert t.to_arrow().sort_by("id").column("x").to_pylist() == [0.5, 9.0, 2.5, 3.5]
    with pytest.raises(KeyTableError, match=r"primary key \['id'\].*merge"):
        t.upsert(DATA, join_cols=["dt"])
    with pytest.raises(KeyTableError, match="needs a key table"):
        table.upsert(DATA, join_cols=["id"])
    w = lakefmt.write_table(str(tmp_path / "w"), DATA, primary_keys=["id"])
    assert w.primary_key == ("id",)
    with pytest.raises(TypeError, match="not both"):
        lakefmt.create_table(str(tmp_path / "z"), SCHEMA, primary_key=["id"], primary_keys=["id"])
