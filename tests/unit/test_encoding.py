"""Dictionary encoding per column (lakefmt.write.encoding): only where the first rows say it pays."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakefmt
from lakefmt.write.encoding import dictionary_columns


def test_distinct_values_are_written_plain_and_repeated_ones_with_a_dictionary(tmp_path: Any) -> None:
    rng = random.Random(7)
    n = 10_000
    data = pa.table(
        {
            "x": [rng.random() for _ in range(n)],  # all distinct: the dictionary would be thrown away
            "id": list(range(n)),
            "status": [rng.choice(["ok", "late", "lost"]) for _ in range(n)],
            "empty": pa.nulls(n, pa.string()),
            "tags": [[rng.choice("ab")] for _ in range(n)],  # nested: pyarrow's default
            "dt": ["2026-11-01"] * n,
        }
    )
    assert dictionary_columns(data.schema, data.slice(0, 100)) is True  # too few rows to decide: pyarrow default
    assert dictionary_columns(data.schema, data) == ["status", "empty", "tags.list.element", "dt"]
    t = lakefmt.create_table(str(tmp_path / "t"), data.schema, partition_by=["dt"], options={"write.fsync": "false"})
    t.append(data)
    (f,) = t.files()
    meta = pq.ParquetFile(f.full_path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert not any("DICTIONARY" in e for e in encodings["x"] + encodings["id"])
    assert "RLE_DICTIONARY" in encodings["status"] and "RLE_DICTIONARY" in encodings["tags.list.element"]
    assert t.to_arrow().sort_by("id").equals(data.select(t.schema().names))
