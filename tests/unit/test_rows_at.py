"""RowReader: the rows at given positions of data files, read by row group, equal to taking them from the file
read whole, across row groups and for a file written under an older schema."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError
from lakefmt.read.rows_at import RowReader, RowRequest


def test_rows_at_positions_across_row_groups_and_schemas(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": np.arange(50, dtype=np.int64), "s": [f"r{i}" for i in range(50)]}, schema=schema))
    (task,) = t.files()
    full = t.io.full_path(task.path)
    whole = pq.read_table(full)
    pq.write_table(whole, full, row_group_size=7)  # the same rows (and field ids) in 8 row groups
    assert pq.ParquetFile(full).metadata.num_row_groups == 8
    reader = RowReader(t.io, t._store, t.table_schema())
    first = np.array([0, 6, 7, 20, 49], np.int64)
    second = np.array([1, 8, 48], np.int64)
    got = reader.take([RowRequest(task.path, task.schema_id, first), RowRequest(task.path, task.schema_id, second)])
    assert got.column("id").to_pylist() == [*first.tolist(), *second.tolist()]
    assert got.column("s").to_pylist() == [f"r{i}" for i in [*first.tolist(), *second.tolist()]]
    with pytest.raises(CorruptMetadataError, match="deletes row 50, but the file holds 50 rows"):
        reader.take([RowRequest(task.path, task.schema_id, np.array([50], np.int64))])

    with t.update_schema() as u:  # the old file is then read by field id, whole
        u.rename_column("s", "label")
    later = RowReader(t.io, t._store, t.table_schema())
    got = later.take([RowRequest(task.path, task.schema_id, np.array([3, 30], np.int64))])
    assert got.column_names == ["id", "label"] and got.column("label").to_pylist() == ["r3", "r30"]
