"""SQL text filters attacked: literals at the edges of their column's type select exactly what pyarrow selects."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import InvalidPredicateError

U64 = pa.schema([("u", pa.uint64()), ("i8", pa.int8())])


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "t"), U64)
    t.append(pa.table({"u": [2**64 - 1, 2**63, 0, None], "i8": [127, -128, None, 0]}, schema=U64))
    t.append(pa.table({"u": [5], "i8": [1]}, schema=U64))
    return t


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("u = 18446744073709551615", [2**64 - 1]),
        ("u >= 9223372036854775808", [2**64 - 1, 2**63]),
        ("u IN (18446744073709551615, 5)", [2**64 - 1, 5]),
        ("NOT (u < 18446744073709551615)", [2**64 - 1]),
        ("i8 = -128 OR i8 = 127", [2**63, 2**64 - 1]),
    ],
)
def test_the_largest_values_of_a_type_are_literals(table: lakefmt.Table, text: str, want: list[int]) -> None:
    assert sorted(table.to_arrow(filter=text).column("u").to_pylist()) == sorted(want)
    assert sorted(table.scan(filter=text).to_arrow().column("u").to_pylist()) == sorted(want)


@pytest.mark.parametrize("text", ["u = 18446744073709551616", "u > -1", "i8 < 128", "i8 IN (1, -129)"])
def test_a_literal_outside_the_type_is_refused_by_name(table: lakefmt.Table, text: str) -> None:
    before = table.latest_snapshot()
    with pytest.raises(InvalidPredicateError, match=r"cannot be compared with column \w+ of type \w+ \(outside"):
        table.to_arrow(filter=text)
    with pytest.raises(InvalidPredicateError, match="outside its range"):
        table.delete(text)
    assert table.latest_snapshot() == before


TEXT = pa.schema([("s", pa.string())])
PATHS = ["C:\\temp", "C:temp", "tab\there", "tabthere", "it's", 'say "hi"', "a\\"]


@pytest.fixture
def texts(tmp_path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "s"), TEXT)
    t.append(pa.table({"s": PATHS}, schema=TEXT))
    return t


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("s = 'C:\\\\temp'", ["C:\\temp"]),  # an escaped backslash is a backslash
        ("s = 'it\\'s' OR s = 'it''s'", ["it's"]),
        ('s = "say \\"hi\\""', ['say "hi"']),
        ("s = 'a\\\\'", ["a\\"]),
    ],
)
def test_backslash_escapes_a_quote_or_a_backslash(texts: lakefmt.Table, text: str, want: list[str]) -> None:
    assert texts.to_arrow(filter=text).column("s").to_pylist() == want


@pytest.mark.parametrize("text", ["s = 'C:\\temp'", "s = 'tab\\there'", "s IN ('x', 'a\\\\\\n')"])
def test_another_escape_is_refused_not_dropped(texts: lakefmt.Table, text: str) -> None:
    """``'C:\\temp'`` meant ``C:temp`` (the backslash dropped): a delete removed rows the user never named."""
    with pytest.raises(InvalidPredicateError, match=r"the escape \\[tn] in the text literal at position \d+"):
        texts.delete(text)
    assert sorted(texts.to_arrow().column("s").to_pylist()) == sorted(PATHS)
