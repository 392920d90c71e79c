"""Changelog files (``changelog-producer=lookup``): the change rows of one commit, stored when it is made.

A changelog file is a Parquet file in the table's ``changelog/`` folder. Its columns are the table's columns under
the schema the commit was made with (field ids in the Parquet schema, as in data files), then
``_lakefmt_row_kind``: a non-null int8, Paimon's row-kind byte (``+I`` 0, ``-U`` 1, ``+U`` 2, ``-D`` 3). Its rows
are the commit's changes in feed order: the deletes, each update's pre-image followed by its post-image, then the
inserts. The snapshot names them through its changelog manifest list (``changelogManifestList``), whose manifests
hold one ADD entry per file; they live and expire with that snapshot alone.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakefmt.errors import CorruptMetadataError

__all__ = ["ROW_KIND_COLUMN", "encode_changelog", "row_kinds_of", "rows_of"]

ROW_KIND_COLUMN = "_lakefmt_row_kind"


def encode_changelog(rows: pa.Table, codes: np.ndarray, file_schema: pa.Schema, compression: str | None) -> bytes:
    """A changelog file's bytes: ``rows`` (written as ``file_schema``, the table's schema with field ids) and their
    row-kind bytes ``codes``."""
    kinds = pa.field(ROW_KIND_COLUMN, pa.int8(), nullable=False)
    table = pa.Table.from_arrays(
        [*rows.cast(file_schema).columns, pa.array(codes, pa.int8())], schema=file_schema.append(kinds)
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression or "none")
    return bytes(sink.getvalue())


def row_kinds_of(table: pa.Table, path: str) -> np.ndarray:
    """The row-kind bytes of a changelog file's rows (``table``: what was read of it, ``path``: its path, named in
    the error), checked: a non-null int8 column of bytes 0 to 3."""
    column = table.column(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in table.column_names else None
    if column is None or column.type != pa.int8() or column.null_count:
        raise CorruptMetadataError(f"changelog file {path} has no non-null int8 column {ROW_KIND_COLUMN}")
    kinds = np.asarray(column.to_numpy(), np.int8)
    if len(kinds) and (int(kinds.min()) < 0 or int(kinds.max()) > 3):
        raise CorruptMetadataError(f"changelog file {path} has a row kind outside 0..3 in {ROW_KIND_COLUMN}")
    return kinds


def rows_of(table: pa.Table, schema: pa.Schema, path: str) -> pa.Table:
    """A changelog file's rows (``table``: what was read of it) as ``schema``, the schema it was written under."""
    try:
        return table.select(schema.names).cast(schema)
    except (KeyError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise CorruptMetadataError(f"changelog file {path} does not hold the table's columns: {exc}") from exc
