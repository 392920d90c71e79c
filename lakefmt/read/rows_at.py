"""The rows at given positions of data files: what the change feed needs of older files (the rows a deletion vector
newly deletes), read without reading each file whole.

A file written under the schema being read is opened with ``pyarrow.parquet`` and only the row groups holding the
positions are read (the footer says how many rows each holds); a file of another schema goes through
:func:`lakefmt.read.files.read_entries`, which matches its columns by field id, and is read whole. Row groups read
are kept in a per-reader cache (a later snapshot often deletes more rows of the same file), and the rows of many
files are taken in one ``take``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_entries
from lakefmt.spec import TableSchema

__all__ = ["RowReader", "RowRequest"]

_CACHE_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class RowRequest:
    """The rows of data file ``path`` (written under schema ``schema_id``, None: the table's first) at the sorted
    ``positions``."""

    path: str
    schema_id: int | None
    positions: np.ndarray


class RowReader:
    """Reads the rows of :class:`RowRequest`\\ s as ``schema``'s columns, caching what it read."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema) -> None:
        self.io, self.store, self.schema = io, store, schema
        self._cache: OrderedDict[tuple[str, int], pa.Table] = OrderedDict()  # (path, row group or -1: whole)
        self._bytes = 0
        self._starts: dict[str, np.ndarray] = {}  # path -> first row of each row group, and the total

    def take(self, requests: Sequence[RowRequest]) -> pa.Table:
        """The rows of every request, request after request, each in its positions' order: the row groups needed
        are gathered (read once, then cached) and the rows taken from them in one ``take``."""
        tables: list[pa.Table] = []
        offset_of: dict[tuple[str, int], int] = {}
        total = 0
        picks: list[np.ndarray] = []

        def add(key: tuple[str, int], rows: pa.Table) -> int:
            nonlocal total
            if key not in offset_of:
                offset_of[key] = total
                tables.append(rows)
                total += rows.num_rows
            return offset_of[key]

        for request in requests:
            if request.schema_id != self.schema.id:  # matched by field id: read whole
                whole = self._whole(request)
                _check_positions(request, whole.num_rows)
                picks.append(request.positions + add((request.path, -1), whole))
                continue
            starts = self._row_groups(request.path)
            _check_positions(request, int(starts[-1]))
            groups = np.searchsorted(starts, request.positions, side="right") - 1
            wanted = np.unique(groups)
            got = self._groups(request.path, wanted.tolist(), starts)
            base = np.array([add((request.path, g), got[g]) for g in wanted.tolist()], np.int64)
            picks.append(request.positions - starts[groups] + base[np.searchsorted(wanted, groups)])
        if not tables:
            return self.schema.arrow_schema.empty_table()
        rows = pa.concat_tables(tables)
        return rows.take(pa.array(np.concatenate(picks), pa.int64()))

    def _groups(self, path: str, wanted: list[int], starts: np.ndarray) -> dict[int, pa.Table]:
        """Row groups ``wanted`` of data file ``path``, from the cache or read (together) and cached."""
        got = {g: self._cache.get((path, g)) for g in wanted}
        missing = [g for g, t in got.items() if t is None]
        if missing:
            with self.io.fs.open(self.io.full_path(path), "rb") as f:
                read = pq.ParquetFile(f).read_row_groups(missing, columns=self.schema.arrow_schema.names)
            at = 0
            for g in missing:
                n = int(starts[g + 1] - starts[g])
                rows = read.slice(at, n).cast(self.schema.arrow_schema)
                got[g] = rows
                self._put((path, g), rows)
                at += n
        return {g: t for g, t in got.items() if t is not None}

    def _row_groups(self, path: str) -> np.ndarray:
        starts = self._starts.get(path)
        if starts is None:
            with self.io.fs.open(self.io.full_path(path), "rb") as f:
                meta = pq.ParquetFile(f).metadata
            counts = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
            self._starts[path] = starts
        return starts

    def _whole(self, request: RowRequest) -> pa.Table:
        key = (request.path, -1)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        columns: dict[str, pa.Array] = {ents.PATH: pa.array([request.path], pa.string())}
        if request.schema_id is not None:
            columns[ents.SCHEMA_ID] = pa.array([request.schema_id], pa.int64())
        batches = read_entries(self.io, pa.table(columns), self.schema, schemas=self.store.schema)
        rows = pa.Table.from_batches(list(batches), schema=self.schema.arrow_schema)
        self._put(key, rows)
        return rows

    def _put(self, key: tuple[str, int], rows: pa.Table) -> None:
        self._cache[key] = rows
        self._bytes += rows.nbytes
        while self._bytes > _CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._bytes -= old.nbytes


def _check_positions(request: RowRequest, num_rows: int) -> None:
    if len(request.positions) and int(request.positions[-1]) >= num_rows:
        raise CorruptMetadataError(
            f"the deletion vector of {request.path} deletes row {int(request.positions[-1])}, but the file holds "
            f"{num_rows} rows"
        )
