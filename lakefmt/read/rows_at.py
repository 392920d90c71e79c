"""The rows at given positions of data files: what the change feed needs of older files (the rows a deletion vector
newly deletes), read without reading each file whole.

A file written under the schema being read is opened with ``pyarrow.parquet`` and only the row groups holding the
positions are read (the footer says how many rows each holds); a file of another schema goes through
:func:`lakefmt.read.files.read_entries`, which matches its columns by field id, and is read whole. Row groups read
are kept in a per-reader cache (a later snapshot often deletes more rows of the same file).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakefmt.cache import BoundedCache
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_entries
from lakefmt.read.masks import check_positions
from lakefmt.spec import TableSchema

__all__ = ["RowReader", "RowRequest"]

_CACHE_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class RowRequest:
    """The rows of data file ``path`` (written under schema ``schema_id``, None: the table's first) at the sorted
    ``positions``; ``source``: the deletion-vector file they come from, named when one is not a row of the file."""

    path: str
    schema_id: int | None
    positions: np.ndarray
    source: str | None = None


class RowReader:
    """Reads the rows of :class:`RowRequest`\\ s as ``schema``'s columns, caching what it read."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema) -> None:
        self.io, self.store, self.schema = io, store, schema
        # by (path, row group or -1: the whole file)
        self._cache: BoundedCache[tuple[str, int], pa.Table] = BoundedCache(None, _CACHE_BYTES, lambda t: t.nbytes)
        self._starts: dict[str, np.ndarray] = {}  # path -> first row of each row group, and the total

    def take(self, requests: Sequence[RowRequest]) -> pa.Table:
        """The rows of every request, request after request, each in its positions' order: the row groups needed
        are read once (then cached), and each request's rows taken from its own groups (one chunk each: a take
        across many chunks is slow), then combined into one chunk."""
        parts: list[pa.Table] = []
        for request in requests:
            if request.schema_id != self.schema.id:  # matched by field id: read whole
                whole = self._whole(request)
                check_positions(request.positions, whole.num_rows, request.path, source=request.source)
                parts.append(whole.take(pa.array(request.positions, pa.int64())))
                continue
            starts = self._row_groups(request.path)
            check_positions(request.positions, int(starts[-1]), request.path, source=request.source)
            groups = np.searchsorted(starts, request.positions, side="right") - 1
            first, last = int(groups[0]), int(groups[-1])  # positions are sorted
            if first == last:
                got = self._groups(request.path, [first], starts)
                local = request.positions - starts[first]
                parts.append(got[first].take(pa.array(local, pa.int64())))
                continue
            wanted = np.unique(groups)
            got = self._groups(request.path, wanted.tolist(), starts)
            sizes = np.array([got[g].num_rows for g in wanted.tolist()], np.int64)
            base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            local = request.positions - starts[groups] + base[np.searchsorted(wanted, groups)]
            rows = pa.concat_tables([got[g] for g in wanted.tolist()]).combine_chunks()
            parts.append(rows.take(pa.array(local, pa.int64())))
        if not parts:
            return self.schema.arrow_schema.empty_table()
        return pa.concat_tables(parts).combine_chunks()

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
                self._cache.put((path, g), rows)
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
        self._cache.put(key, rows)
        return rows
