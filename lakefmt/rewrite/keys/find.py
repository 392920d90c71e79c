"""Finding the live rows of given keys in one bucket of a key table: the lookups of upserts and deletes by key.

Each of the bucket's data files is looked up by its key index file when it has a usable one (an integer index, or a
hashed one whose equal hashes are checked on the key bytes: :mod:`lakefmt.rewrite.keys.stored`), else by the key
index built in memory from its key columns (:mod:`lakefmt.rewrite.keys.lookup`, cached by path for the process). Files
whose key range (from their statistics) holds no probed key are not looked into; a row a deletion vector already
deletes is not live.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.bounds import column_bounds
from lakefmt.read.masks import deleted_positions, latest_data, load_vectors
from lakefmt.rewrite.keys.buckets import FILE, POS, BucketKey, bucket_keys_of, member, read_columns
from lakefmt.rewrite.keys.lookup import KeyIndex, Probe, index_of, match
from lakefmt.rewrite.keys.stored import StoredIndex, open_stored, stored_match
from lakefmt.spec import TableSchema
from lakefmt.spec.keys.hashing import key_bytes, key_hash
from lakefmt.spec.keys.index_file import hashed_columns, indexed_column, key_values

__all__ = ["Found", "HashedProbe", "KeyFinder", "file_index", "in_ranges"]

#: threads that look keys up in a bucket's files' key indexes at once
_LOOKUP_THREADS = 4


def file_index(
    io: FileIO, store: MetaStore, entry: pa.Table, schema: TableSchema, extra: list[str], read: pa.Table | None = None
) -> KeyIndex:
    """The key index of one data file (:mod:`lakefmt.rewrite.keys.lookup`), with the ``extra`` columns (a sequence
    field); ``read``: the file's key and extra columns when the caller has them already."""
    keys = list(schema.primary_keys)
    cache_key = f"{io.full_path(ents.paths(entry)[0])}\x00{schema.id}\x00{','.join(extra)}"

    def load() -> tuple[pa.Table, pa.Table | None]:
        table = read if read is not None else read_columns(io, store, entry, schema, [*keys, *extra])
        return table.select(keys), table.select(extra) if extra else None

    return index_of(cache_key, load)


class KeyFinder:
    """Looks keys up in the data files of a table's buckets, for a planner of the table's ``schema``."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema) -> None:
        self.io, self.store, self.schema = io, store, schema

    def find(self, live: pa.Table, bk: BucketKey, probe: Probe, schema: TableSchema, extra: list[str]) -> Found:
        """The live rows of bucket ``bk`` that hold a probed key, by the key index of each of its data files (a
        row a vector already deletes is not live)."""
        bks = bucket_keys_of(live, schema)
        here = live.filter(pa.array([b == bk for b in bks], pa.bool_()))
        data = ents.data_files(here)
        vectors = load_vectors(self.io, ents.vector_files(here), data=data, live=latest_data(self.store))
        found = Found(ents.paths(data), [], [], [], [])
        in_range = in_ranges(data, probe.keys, schema, self.store)
        stored_key = indexed_column(schema) if not extra else None
        hashed = HashedProbe.of(probe, hashed_columns(schema)) if not extra and probe.keys.num_rows else None

        def look(i: int) -> tuple[np.ndarray, np.ndarray, KeyIndex | None] | None:
            mine = probe if in_range is None else probe.within(in_range[i])
            if len(mine.hashes) == 0:  # no probed key inside the file's key range: its keys are never read
                return None
            entry = data.slice(i, 1)
            hit = None
            if stored_key is not None:
                hit = self._stored(entry, found.paths[i], mine, stored_key)
            elif hashed is not None:
                hit = self._stored_hashed(entry, found.paths[i], mine, hashed)
            if hit is not None:
                return hit[0], hit[1], None
            index = file_index(self.io, self.store, entry, schema, extra)
            return *match(index, mine), index

        files = range(len(found.paths))
        indexed = stored_key is not None or hashed is not None
        if indexed and len(found.paths) > 1:  # key index lookups release the GIL: files at once
            with ThreadPoolExecutor(max_workers=min(_LOOKUP_THREADS, len(found.paths))) as pool:
                looked = list(pool.map(look, files))
        else:
            looked = [look(i) for i in files]
        for i, path in enumerate(found.paths):
            result = looked[i]
            if result is None:
                continue
            pos, rows, index = result
            if len(pos) and path in vectors:
                live_rows = ~member(pos, deleted_positions(self.io, vectors[path]))
                pos, rows = pos[live_rows], rows[live_rows]
            if not len(pos):
                continue
            found.files.append(np.full(len(pos), i, np.int32))
            found.positions.append(pos)
            found.probe_rows.append(rows)
            if extra and index is not None and index.extra is not None:
                found.extra.append(index.extra.column(extra[0]).take(pa.array(pos)))
        return found

    def _open(self, entry: pa.Table, path: str, columns: tuple[str, ...], hashed: bool) -> StoredIndex | None:
        """The key index of one data file, when it has one of the kind asked for that can be used (not written
        before key indexes, under another schema's key types, or damaged)."""
        schema_id = entry.column(ents.SCHEMA_ID)[0].as_py()
        if schema_id != self.schema.id:  # written under another schema: only by the same key types
            fields = self.store.schema(schema_id).arrow_schema
            mine = self.schema.arrow_schema
            if any(k not in fields.names or fields.field(k).type != mine.field(k).type for k in columns):
                return None
        index = open_stored(self.io, path, entry.column(ents.ROW_COUNT)[0].as_py())
        return None if index is None or index.header.hashed != hashed else index

    def _stored(
        self, entry: pa.Table, path: str, probe: Probe, key: str
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The probed keys' rows of one data file by its key index (:mod:`lakefmt.rewrite.keys.stored`), or None
        when it has none that can be used."""
        index = self._open(entry, path, (key,), hashed=False)
        if index is None:
            return None
        values = key_values(probe.keys.column(key).take(pa.array(probe.rows)))
        order = np.argsort(values, kind="stable")
        return stored_match(self.io, index, values[order], probe.rows[order])

    def _stored_hashed(
        self, entry: pa.Table, path: str, probe: Probe, hashed: HashedProbe
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The probed keys' rows of one data file by its hashed key index, or None when it has none that can be used
        (or a hash matched another key: the key columns settle it)."""
        index = self._open(entry, path, hashed.columns, hashed=True)
        if index is None:
            return None
        values = hashed.hashes[probe.rows]
        order = np.argsort(values, kind="stable")
        return stored_match(self.io, index, values[order], probe.rows[order], hashed.keys, hashed.types)


@dataclass(frozen=True)
class HashedProbe:
    """A probe's keys as hashed key indexes hold them: each probe row's bucket-key hash (as int64) and key bytes."""

    columns: tuple[str, ...]
    hashes: np.ndarray
    keys: pa.Array
    types: tuple[pa.DataType, ...]  #: the bucket-key columns' types (to hash a stored key's bytes again)

    @staticmethod
    def of(probe: Probe, columns: tuple[str, ...] | None) -> HashedProbe | None:
        if columns is None:
            return None
        return HashedProbe(
            columns,
            key_hash(probe.keys, columns).view(np.int64),
            key_bytes(probe.keys, columns),
            tuple(probe.keys.schema.field(c).type for c in columns),
        )


def in_ranges(data: pa.Table, keys: pa.Table, schema: TableSchema, store: MetaStore) -> list[np.ndarray] | None:
    """Per data file of ``data``, which rows of ``keys`` lie inside the file's key range (each key column between
    the file's min and max; an unknown bound rules nothing out). A bucket's compacted files hold disjoint key
    ranges, so each key is looked up in one file. None when no key column has statistics."""
    if data.num_rows == 0 or keys.num_rows == 0:
        return None
    masks = [np.ones(keys.num_rows, dtype=bool) for _ in range(data.num_rows)]
    pruned = False
    for name in schema.bucket_keys:
        bounds = column_bounds(data, name, schema, store.schema)
        if bounds is None:
            continue
        lo, hi, _ = bounds
        column = keys.column(name)
        for i in range(data.num_rows):
            low, high = lo[i], hi[i]
            if low.is_valid:
                masks[i] &= pc.fill_null(pc.greater_equal(column, low), True).to_numpy(zero_copy_only=False)
                pruned = True
            if high.is_valid:
                masks[i] &= pc.fill_null(pc.less_equal(column, high), True).to_numpy(zero_copy_only=False)
                pruned = True
    return masks if pruned else None


@dataclass
class Found:
    """Live rows holding probed keys: per row, its file (index into ``paths``), position and probe row, and the
    value of the extra column (a sequence field) when one was asked for."""

    paths: list[str]
    files: list[np.ndarray]
    positions: list[np.ndarray]
    probe_rows: list[np.ndarray]
    extra: list[pa.Array]

    def table(self) -> pa.Table:
        if not self.files:
            return pa.table(
                {FILE: pa.array([], pa.int32()), POS: pa.array([], pa.int64()), "probe": pa.array([], pa.int64())}
            )
        return pa.table(
            {
                FILE: pa.array(np.concatenate(self.files)),
                POS: pa.array(np.concatenate(self.positions)),
                "probe": pa.array(np.concatenate(self.probe_rows)),
            }
        )
