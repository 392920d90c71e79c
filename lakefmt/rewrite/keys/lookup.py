"""Finding the live rows of given keys in a key table's data files, without reading more than their key columns.

Each data file gets a *key index*: the format's 64-bit key hash (:func:`~lakefmt.spec.keys.hashing.key_hash`) of each of
its rows, sorted, with the rows' positions. A lookup hashes the keys it looks for, sorts them, and binary-searches each
file's index: ``O(k log n)`` per file for ``k`` keys, however large the file. Sorting costs more than one pass over
the hashes, so a file's index is first kept unsorted and probed through a hash set (one ``O(n)`` pass), and sorted
when a second lookup comes to it (a file a writer keeps coming back to). Equal hashes are then checked on the
key values themselves, so a hash collision never selects a wrong row; a key of one integer-like column needs no
check, since the hash is a bijection of such a value (SplitMix64's finaliser is invertible).

Indexes are built from a file's key columns the first time a process looks into it, and kept in a per-process cache
by path (data files are immutable), bounded in bytes: a long-lived writer (a streaming job's driver) reads each
file's keys once, and later upserts cost what their own keys cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.cache import BoundedCache
from lakefmt.spec.keys.hashing import key_hash

__all__ = ["KeyIndex", "Probe", "clear_cache", "index_of", "match", "probe_of"]

#: bytes of key indexes a process keeps (least recently used first out)
CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class KeyIndex:
    """One data file's keys: their hashes (uint64), sorted with the row position of each (uint32, aligned) or, when
    ``positions`` is None, in file order; for a key that needs the check, the key columns in file order (None for
    a one-integer-column key)."""

    hashes: np.ndarray
    positions: np.ndarray | None
    keys: pa.Table | None
    extra: pa.Table | None  #: other columns asked for (a sequence field), in file order

    def sorted(self) -> KeyIndex:
        """This index with its hashes sorted (itself when they are)."""
        if self.positions is not None:
            return self
        order = np.argsort(self.hashes, kind="stable")
        return KeyIndex(self.hashes[order], order.astype(np.uint32), self.keys, self.extra)

    @property
    def nbytes(self) -> int:
        size = self.hashes.nbytes + (self.positions.nbytes if self.positions is not None else 0)
        return (
            size
            + (self.keys.nbytes if self.keys is not None else 0)
            + (self.extra.nbytes if self.extra is not None else 0)
        )


@dataclass(frozen=True)
class Probe:
    """The keys a lookup looks for: their hashes sorted, each one's row in ``keys``, and the key columns."""

    hashes: np.ndarray
    rows: np.ndarray
    keys: pa.Table

    def within(self, mask: np.ndarray) -> Probe:
        """The probe of only the rows of ``keys`` where ``mask`` (one bool per row of ``keys``) is true."""
        keep = mask[self.rows]
        return Probe(self.hashes[keep], self.rows[keep], self.keys)


def _bijective(keys: pa.Table) -> bool:
    """Whether equal hashes mean equal keys: one column of an integer-like type (the hash is invertible on it)."""
    if keys.num_columns != 1:
        return False
    t = keys.schema.field(0).type
    return bool(
        pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)
    ) or pa.types.is_boolean(t)


def build_index(keys: pa.Table, extra: pa.Table | None = None) -> KeyIndex:
    """The (unsorted) index of one file's key columns (``keys``, every row in file order)."""
    return KeyIndex(
        key_hash(keys, keys.column_names),
        None,
        None if _bijective(keys) else keys.combine_chunks(),
        extra.combine_chunks() if extra is not None and extra.num_columns else None,
    )


_cache: BoundedCache[str, KeyIndex] = BoundedCache(max_bytes=CACHE_BYTES, sizeof=lambda index: index.nbytes)


def clear_cache() -> None:
    """Forget every cached key index."""
    _cache.clear()


def index_of(cache_key: str, load: Callable[[], tuple[pa.Table, pa.Table | None]]) -> KeyIndex:
    """The key index cached under ``cache_key`` (a data file's full path, schema and columns), built from
    ``load()`` (the file's key columns and extra columns, every row in order) when missing."""
    hit = _cache.get(cache_key)
    if hit is not None:
        if hit.positions is None:  # looked into again: worth sorting
            hit = hit.sorted()
            _cache.put(cache_key, hit)
        return hit
    keys, extra = load()
    return _cache.setdefault(cache_key, build_index(keys, extra))


def probe_of(keys: pa.Table, columns: Sequence[str]) -> Probe:
    """A probe for the rows of ``keys`` (their ``columns``)."""
    table = keys.select(list(columns))
    hashes = key_hash(table, list(columns))
    order = np.argsort(hashes, kind="stable")
    return Probe(hashes[order], order.astype(np.int64), table)


def match(index: KeyIndex, probe: Probe) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the file that hold a probed key: ``(positions in the file, rows of probe.keys)``, pairs of equal
    keys (every pair, where a file holds a key more than once)."""
    if len(index.hashes) == 0 or len(probe.hashes) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if index.positions is None:  # unsorted: the file's rows whose hash is probed, by one hash-set pass
        hit_mask = pc.is_in(pa.array(index.hashes), value_set=pa.array(probe.hashes))
        candidates = np.nonzero(hit_mask.to_numpy(zero_copy_only=False))[0]
        lo = np.searchsorted(probe.hashes, index.hashes[candidates], side="left")
        hi = np.searchsorted(probe.hashes, index.hashes[candidates], side="right")
        counts = hi - lo  # >= 1 each; more only where two probed keys share a hash
        reps = np.repeat(np.arange(len(candidates)), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        file_pos = candidates[reps].astype(np.int64)
        probe_rows = probe.rows[lo[reps] + offsets]
    else:
        lo = np.searchsorted(index.hashes, probe.hashes, side="left")
        hi = np.searchsorted(index.hashes, probe.hashes, side="right")
        counts = hi - lo
        hit = np.nonzero(counts)[0]
        if len(hit) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        counts = counts[hit]
        starts = lo[hit]
        # every (file row, probe row) pair whose hashes are equal
        reps = np.repeat(np.arange(len(hit)), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        file_pos = index.positions[starts[reps] + offsets].astype(np.int64)
        probe_rows = probe.rows[hit[reps]]
    if index.keys is None:
        return file_pos, probe_rows
    same = np.ones(len(file_pos), dtype=bool)
    for name in probe.keys.column_names:
        mine = index.keys.column(name).take(pa.array(file_pos))
        theirs = probe.keys.column(name).take(pa.array(probe_rows))
        same &= pc.fill_null(pc.equal(mine, theirs), False).to_numpy(zero_copy_only=False)
    return file_pos[same], probe_rows[same]
