"""Row kinds (``rowkind.field``, ``rowkind.format``): what each spelling's values do, and what is refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakefmt.errors import InvalidOptionError, InvalidRowKindError
from lakefmt.options import TableOptions
from lakefmt.spec.keys.rowkind import DELETE, IGNORE, SPELLINGS, UPSERT, drop_ignored, row_kinds

WANT = {
    "paimon": {"+I": UPSERT, "+U": UPSERT, "-U": IGNORE, "-D": DELETE},
    "delta": {"insert": UPSERT, "update_postimage": UPSERT, "update_preimage": IGNORE, "delete": DELETE},
    "debezium": {"c": UPSERT, "r": UPSERT, "u": UPSERT, "d": DELETE},
}


def options(fmt: str | None = None) -> TableOptions:
    given = {"rowkind.field": "op"} | ({"rowkind.format": fmt} if fmt else {})
    return TableOptions.from_map(given)


@pytest.mark.parametrize("fmt", ["paimon", "delta", "debezium"])
def test_each_format_reads_its_own_spelling_and_refuses_the_others(fmt: str) -> None:
    values = list(WANT[fmt])
    kinds = row_kinds(pa.array(values * 2), options(fmt))
    assert kinds.tolist() == [WANT[fmt][v] for v in values] * 2
    assert row_kinds(pa.array(values, pa.large_string()), options(fmt)).tolist() == [WANT[fmt][v] for v in values]
    for other in set(WANT) - {fmt}:
        with pytest.raises(InvalidRowKindError, match=f"unknown row kind.*rowkind.format={fmt}"):
            row_kinds(pa.array([values[0], next(iter(WANT[other]))]), options(fmt))


def test_any_reads_every_spelling_by_default() -> None:
    assert options().rowkind_format == "any" == options("ANY").rowkind_format
    every = {v: k for spelling in WANT.values() for v, k in spelling.items()}
    assert SPELLINGS["any"] == every
    assert row_kinds(pa.array(list(every)), options()).tolist() == list(every.values())


@pytest.mark.parametrize(
    ("column", "match"),
    [
        (pa.array(["+I", None, "-D"]), r"1 row\(s\) have no row kind: column 'op'"),
        (pa.array(["+I", "+i", "INSERT", "x"]), r"unknown row kind\(s\) '\+i', 'INSERT', 'x' in column 'op'"),
        (pa.array([1, 2]), "must be a string"),
    ],
)
def test_refused(column: pa.Array, match: str) -> None:
    with pytest.raises(InvalidRowKindError, match=match):
        row_kinds(column, options())


def test_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidOptionError, match=r"rowkind\.format is one of any, paimon, delta, debezium"):
        options("maxwell")


def test_drop_ignored_leaves_out_before_images_only() -> None:
    t = pa.table({"k": [1, 1, 2, 3], "op": ["-U", "+U", "-D", "update_preimage"]})
    assert drop_ignored(t, options()).to_pydict() == {"k": [1, 2], "op": ["+U", "-D"]}
    assert drop_ignored(t, TableOptions()) is t  # no rowkind.field: rows are rows
    kept = pa.table({"k": [1], "op": ["c"]})
    assert drop_ignored(kept, options()) is kept
    with pytest.raises(InvalidRowKindError):
        drop_ignored(pa.table({"k": [1], "op": ["?"]}), options())
