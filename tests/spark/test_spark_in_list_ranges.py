"""Adversarial tests of issue 15 on the connector side: a delete's SQL predicate must delete exactly the rows the
predicate names, whatever the literals look like."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pyspark_lakefmt
import pytest

import lakefmt
from lakefmt.spec.sql.predicate import bind_predicate, parse_predicate

UTC = datetime.UTC
FILLER = 55  # more than lakefmt.spec.sql.row_filter.SIMPLIFIED_IN values: the IN list gets a range beside it


@pytest.mark.parametrize(
    ("column", "rows", "listed"),
    [
        # text parsed as timestamps: ' ' sorts before 'T', so as text 05:00 is the least of these two
        (
            pa.timestamp("us"),
            [datetime.datetime(2026, 1, 1, 1), datetime.datetime(2026, 1, 1, 5)],
            ["2026-01-01 05:00:00", "2026-01-01T01:00:00"] + [f"2020-01-01 00:00:{i:02d}" for i in range(FILLER)],
        ),
        # zone offsets: as text 04:00+05:00 (23:00 UTC the day before) is the greatest
        (
            pa.timestamp("us", tz="UTC"),
            [datetime.datetime(2025, 12, 31, 23, tzinfo=UTC), datetime.datetime(2026, 1, 1, 1, tzinfo=UTC)],
            ["2026-01-01 04:00:00+05:00", "2026-01-01 01:00:00Z"]
            + [f"2020-01-01 00:00:{i:02d}Z" for i in range(FILLER)],
        ),
        # quoted numbers: as text '9' > '10'
        (pa.int64(), [9, 10], [str(i) for i in range(9, 9 + FILLER)]),
    ],
    ids=["timestamp-separators", "timestamp-offsets", "quoted-numbers"],
)
def test_a_long_in_list_of_text_literals_deletes_every_listed_row(
    tmp_path: Path, column: pa.DataType, rows: list[object], listed: list[str]
) -> None:
    """Found by attack: the range put beside a long IN list took its least and greatest literal as Python orders
    them, as text, while binding parses text into the column's type; with ends of the wrong order the range left
    out listed values, and their rows silently survived the delete (a GDPR erasure that erased less)."""
    schema = pa.schema([("id", pa.int64()), ("c", column)])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": list(range(len(rows))), "c": rows}, schema=schema))
    sql = "c IN (" + ", ".join("'" + v + "'" for v in listed) + ")"
    assert t.to_arrow().filter(bind_predicate(parse_predicate(sql), t.schema(), sql)).num_rows == len(rows)
    flt = pyspark_lakefmt.rewrites.delete_filter(t, sql)
    assert t.to_arrow().filter(flt).num_rows == len(rows)
    t.delete(flt)
    assert t.to_arrow().num_rows == 0
