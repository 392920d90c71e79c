"""Looking keys up in key index files (:mod:`lakefmt.spec.keys.index_file`): the rows of a data file that hold given
keys, by binary search over the file's stored, sorted keys, without reading its key column.

On local disk an index is mapped into memory, so a lookup touches only the pages its binary searches visit. On
object storage the header and directory are fetched first (one request), then only the pages of the key array
(and of the positions) that the probed keys fall in, by byte ranges; when a lookup would touch most pages, the
whole array comes in one request and is kept in the process (bounded). An index that is missing, or whose header,
size or directory does not match its data file, is not used: the caller reads the key column instead.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.cache import BoundedCache
from lakefmt.io import FileIO
from lakefmt.spec import layout
from lakefmt.spec.keys.hashing import hash_of_key_bytes
from lakefmt.spec.keys.index_file import HEADER_SIZE, IndexHeader, directory_ok, parse_header

__all__ = ["StoredIndex", "clear_stored", "open_stored", "stored_match"]


def _max_open() -> int:
    """How many indexes a process keeps open: a mapping holds a file descriptor (Python keeps a duplicate of it), so
    at most a quarter of the process's limit on them (256 by default on macOS), and never more than 256."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # no such limit here
        return 256
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 256
    return max(8, min(256, soft // 4))


#: indexes a process keeps open (least recently used first out): a mapping holds a file descriptor, so few
MAX_OPEN = _max_open()
#: bytes of fetched (not mapped) key arrays a process keeps
MAX_FETCHED_BYTES = 256 << 20


@dataclass(frozen=True)
class StoredIndex:
    """One data file's key index: its header and directory, and its key and position arrays when they are at hand
    (mapped or fetched whole); otherwise pages are fetched from ``path`` as a lookup needs them."""

    path: str  #: the index file, relative to the table root
    header: IndexHeader
    directory: np.ndarray  #: int64, the first key of each page
    keys: np.ndarray | None  #: u32 (key - base) or i64, sorted
    positions: np.ndarray | None  #: u32, each key's row (None: a key's row is its index, or not fetched)
    offsets: np.ndarray | None = None  #: u64, where each key's bytes start (a hashed index's, when at hand)
    key_data: np.ndarray | None = None  #: u8, the key bytes (a hashed index's, when at hand)

    @property
    def fetched_bytes(self) -> int:
        if self.keys is None or isinstance(self.keys.base, mmap.mmap):
            return 0
        arrays = (self.keys, self.positions, self.offsets, self.key_data)
        return sum(int(a.nbytes) for a in arrays if a is not None)


#: the open indexes by full path (None: the data file has none that matches), bounded by count (a mapped index holds
#: a file descriptor) and by the bytes fetched from object storage
_open: BoundedCache[str, StoredIndex | None] = BoundedCache(
    MAX_OPEN, MAX_FETCHED_BYTES, lambda index: index.fetched_bytes if index is not None else 0
)
_ABSENT = object()  # not in _open (None in it means: no index)


def clear_stored() -> None:
    """Forget every open key index (and which data files have none)."""
    _open.clear()


def _map(io: FileIO, rel: str, data_path: str, rows: int) -> StoredIndex | None:
    local = io.local_path(rel)
    assert local is not None
    try:
        with open(local, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, a folder, or empty (an empty file cannot be mapped)
        return None
    header = parse_header(mapped[:HEADER_SIZE])
    if header is None or header.count != rows or header.size != len(mapped):
        return None
    if not directory_ok(header, mapped[HEADER_SIZE : header.keys_offset], data_path):
        return None
    directory = np.frombuffer(mapped, "<i8", header.pages, HEADER_SIZE)
    if header.run:  # the header is the whole index
        return StoredIndex(rel, header, directory, np.zeros(0, "<u4"), None)
    keys = np.frombuffer(mapped, "<i8" if header.wide else "<u4", header.count, header.keys_offset)
    positions = np.frombuffer(mapped, "<u4", header.count, header.positions_offset) if header.has_positions else None
    if not header.hashed:
        return StoredIndex(rel, header, directory, keys, positions)
    offsets = np.frombuffer(mapped, "<u8", header.count + 1, header.offsets_offset)
    key_data = np.frombuffer(mapped, np.uint8, header.base, header.bytes_offset)
    return StoredIndex(rel, header, directory, keys, positions, offsets, key_data)


def _remote(io: FileIO, rel: str, data_path: str, rows: int) -> StoredIndex | None:
    pages = -(-rows // 1024) + 64  # enough for the directory at the default page size, in one request
    asked = HEADER_SIZE + 8 * pages
    try:
        head = io.read_ranges(rel, [(0, asked)])[0]
    except OSError:  # missing, or unreadable (the key column is read instead)
        return None
    header = parse_header(head)
    if header is None or header.count != rows:
        return None
    if len(head) < asked and len(head) != header.size:  # the whole file came: not the size its header gives
        return None
    if len(head) < header.keys_offset:
        try:
            head += io.read_ranges(rel, [(len(head), header.keys_offset)])[0]
        except OSError:  # shorter than its header says (a range past its end), or gone
            return None
    if not directory_ok(header, head[HEADER_SIZE : header.keys_offset], data_path):
        return None
    directory = np.frombuffer(head, "<i8", header.pages, HEADER_SIZE)
    return StoredIndex(rel, header, directory, None, None)


def open_stored(io: FileIO, data_path: str, rows: int) -> StoredIndex | None:
    """The key index of the data file ``data_path`` (holding ``rows`` rows), or None when it has none that matches."""
    rel = layout.key_index_path(data_path)
    cache_key = io.full_path(rel)
    known = _open.get(cache_key, _ABSENT)
    if known is not _ABSENT:
        return cast("StoredIndex | None", known)
    index = _map(io, rel, data_path, rows) if io.local_path(rel) is not None else _remote(io, rel, data_path, rows)
    _open.put(cache_key, index)
    return index


def _narrow(index: StoredIndex, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as the index stores them (``key - base``), and which of them it can hold at all."""
    if index.header.wide:
        return values, np.ones(len(values), dtype=bool)
    base = index.header.base
    top = min(base + (1 << 32) - 1, (1 << 63) - 1)  # Python integers: no overflow
    ok = (values >= np.int64(base)) & (values <= np.int64(top))
    shifted = np.zeros(len(values), dtype="<u4")
    shifted[ok] = (values[ok] - base).astype("<u4")
    return shifted, ok


def _pairs(keys: np.ndarray, probes: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (index into ``keys``, probe row) of equal values; ``keys`` and ``probes`` sorted."""
    lo = np.searchsorted(keys, probes, side="left")
    n = len(keys)
    at = np.minimum(lo, n - 1)
    hit = (lo < n) & (keys[at] == probes)
    after = np.minimum(lo + 1, n - 1)
    if not bool(np.any(hit & (lo + 1 < n) & (keys[after] == probes))):  # each key at most once: one search
        return lo[hit].astype(np.int64), rows[hit]
    hi = np.searchsorted(keys, probes, side="right")
    counts = hi - lo
    hit = np.nonzero(counts)[0]
    if not len(hit):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    counts = counts[hit]
    reps = np.repeat(np.arange(len(hit)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return (lo[hit][reps] + offsets).astype(np.int64), rows[hit][reps]


def _runs(pages: np.ndarray) -> list[tuple[int, int]]:
    """Sorted, distinct page numbers as runs ``(first, last + 1)`` of consecutive pages."""
    if not len(pages):
        return []
    breaks = np.nonzero(np.diff(pages) != 1)[0]
    starts = np.concatenate(([pages[0]], pages[breaks + 1]))
    ends = np.concatenate((pages[breaks], [pages[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _fetch(
    io: FileIO, index: StoredIndex, offset: int, width: int, dtype: str, runs: list[tuple[int, int]], items: int
) -> tuple[np.ndarray, np.ndarray]:
    """The items of pages ``runs`` of the array of ``items`` items at ``offset`` (``width`` bytes each),
    concatenated, and where each sits in the whole array."""
    per = index.header.page_rows
    ranges = [(offset + width * a * per, offset + width * min(items, b * per)) for a, b in runs]
    parts = io.read_ranges(index.path, ranges)
    for (start, end), part in zip(ranges, parts, strict=True):
        if len(part) != end - start:
            raise FileNotFoundError(f"{index.path} is shorter than its header says")
    where = np.concatenate([np.arange(a * per, min(items, b * per)) for a, b in runs])
    return np.frombuffer(b"".join(parts), dtype), where


def stored_match(
    io: FileIO,
    index: StoredIndex,
    values: np.ndarray,
    rows: np.ndarray,
    keys: pa.Array | None = None,
    types: Sequence[pa.DataType] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of the data file that hold the probed keys (``values``: int64, ascending; ``rows``: each one's row
    of the probe): ``(positions in the file, probe rows)``, every pair of equal keys. For a hashed index, ``values``
    are the probed keys' hashes (as int64) and ``keys`` their key bytes
    (:func:`lakefmt.spec.keys.hashing.key_bytes`, one per
    probe row), which every pair of equal hashes is checked on. With ``types`` (the bucket-key columns' types), a
    stored key whose bytes differ from the probed key's is hashed again: when its bytes give the hash it is filed
    under, it is another key that shares the hash, and the pair is dropped. None when the index turns out damaged or
    gone (a position outside the file, pages missing), or when a hash matched other key bytes that do not give it
    (damage; or any other key, without ``types``): the caller reads the key columns instead."""
    try:
        pos, probe_rows = _match(io, index, values, rows, keys, types)
    except (OSError, _Unusable):  # gone, shorter than its header says (object stores refuse a range past the end)
        _open.put(io.full_path(index.path), None)
        return None
    except _Collision:  # the index is sound as far as it can tell: the key columns settle this lookup
        return None
    if len(pos) and (int(pos.min()) < 0 or int(pos.max()) >= index.header.count):
        _open.put(io.full_path(index.path), None)
        return None
    return pos, probe_rows


class _Unusable(Exception):
    """The index contradicts itself (key bytes outside their section): not used again."""


class _Collision(Exception):
    """A probed hash is stored for another key."""


def _match(
    io: FileIO,
    index: StoredIndex,
    values: np.ndarray,
    rows: np.ndarray,
    keys: pa.Array | None,
    types: Sequence[pa.DataType] | None,
) -> tuple[np.ndarray, np.ndarray]:
    header = index.header
    if header.run:  # the keys base, base + 1, ...: a key's row is key - base
        base = header.base
        inside = (values >= np.int64(base)) & (values <= np.int64(min(base + header.count - 1, (1 << 63) - 1)))
        return (values[inside] - np.int64(base)).astype(np.int64), rows[inside]
    if header.hashed and keys is None:
        raise ValueError("a hashed key index is looked up with the probed keys' bytes")
    at, probe_rows, index = _entries(io, index, values, rows)
    if not len(at):
        return at, probe_rows
    if keys is not None and header.hashed:
        hash_of_row = np.zeros(int(rows.max()) + 1, np.int64)
        hash_of_row[rows] = values
        same = _check_keys(io, index, at, keys.take(pa.array(probe_rows)), hash_of_row[probe_rows], types)
        at, probe_rows = at[same], probe_rows[same]
        if not len(at):
            return at, probe_rows
    if not header.has_positions:
        return at, probe_rows
    if index.positions is not None:
        return index.positions[at].astype(np.int64), probe_rows
    return _gather(io, index, header.positions_offset, 4, "<u4", header.count, at).astype(np.int64), probe_rows


def _entries(
    io: FileIO, index: StoredIndex, values: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, StoredIndex]:
    """Every (entry of the key array, probe row) of equal keys, and the index (with its arrays, when a lookup that
    touches most pages fetched them whole)."""
    header = index.header
    none = np.zeros(0, np.int64)
    probes, ok = _narrow(index, values)
    probes, rows = probes[ok], rows[ok]
    if not len(probes) or header.count == 0:
        return none, none, index
    if index.keys is not None:
        return *_pairs(index.keys, probes, rows), index
    # fetch only the pages the probes fall in: every page from the one before the first page that starts with the
    # key (a key equal to a page's first key may begin on the page before) to the last page starting at or below it
    # (a key repeated over several pages covers them all)
    first = index.directory
    last = np.searchsorted(first, values[ok], side="right") - 1
    start = np.maximum(np.searchsorted(first, values[ok], side="left") - 1, 0)
    found = last >= 0
    last, start = last[found], start[found]
    spans = last - start + 1
    back = np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans)
    pages = np.unique(np.repeat(last, spans) - back)
    if not len(pages):  # every probe is below the smallest key
        return none, none, index
    if len(pages) * 2 > header.pages:
        whole = _fetch_whole(io, index)
        assert whole.keys is not None
        return *_pairs(whole.keys, probes, rows), whole
    runs = _runs(pages)
    dtype = "<i8" if header.wide else "<u4"
    got, where = _fetch(io, index, header.keys_offset, header.key_width, dtype, runs, header.count)
    at, probe_rows = _pairs(got, probes, rows)
    return where[at], probe_rows, index


def _gather(
    io: FileIO, index: StoredIndex, offset: int, width: int, dtype: str, items: int, at: np.ndarray
) -> np.ndarray:
    """Items ``at`` of the array of ``items`` items at ``offset`` (``width`` bytes each), fetching their pages."""
    got, where = _fetch(io, index, offset, width, dtype, _runs(np.unique(at // index.header.page_rows)), items)
    return got[np.searchsorted(where, at)]


#: key bytes closer than this are fetched in one range (a request costs more than a few KiB of bytes)
_BYTES_GAP = 1 << 16


def _check_keys(
    io: FileIO,
    index: StoredIndex,
    at: np.ndarray,
    probed: pa.Array,
    hashes: np.ndarray,
    types: Sequence[pa.DataType] | None,
) -> np.ndarray:
    """Which entries ``at`` hold the key bytes ``probed`` (one per entry, filed under ``hashes``): an entry whose
    bytes differ is another key sharing the hash when its bytes hash to it (:func:`hash_of_key_bytes`, with
    ``types``); otherwise (damage, or no ``types`` to tell) :class:`_Collision` is raised."""
    header = index.header
    if index.offsets is not None:
        lo, hi = index.offsets[at].astype(np.int64), index.offsets[at + 1].astype(np.int64)
    else:
        ends = _gather(io, index, header.offsets_offset, 8, "<u8", header.count + 1, np.concatenate([at, at + 1]))
        lo, hi = ends[: len(at)].astype(np.int64), ends[len(at) :].astype(np.int64)
    if bool(np.any(hi < lo)) or int(lo.min()) < 0 or int(hi.max()) > header.base:
        raise _Unusable
    if index.key_data is not None:
        data, src = index.key_data, lo
    else:  # fetch the candidates' bytes, neighbours in one range
        order = np.argsort(lo, kind="stable")
        slo, reach = lo[order], np.maximum.accumulate(hi[order])
        run = np.concatenate([[0], np.cumsum(slo[1:] > reach[:-1] + _BYTES_GAP)])
        firsts = np.concatenate([[0], np.nonzero(np.diff(run))[0] + 1])
        lasts = np.concatenate([firsts[1:] - 1, [len(run) - 1]])
        at_bytes = header.bytes_offset
        ranges = [(at_bytes + int(slo[a]), at_bytes + int(reach[b])) for a, b in zip(firsts, lasts, strict=True)]
        parts = io.read_ranges(index.path, ranges)
        if any(len(part) != b - a for part, (a, b) in zip(parts, ranges, strict=True)):
            raise FileNotFoundError(f"{index.path} is shorter than its header says")
        data = np.frombuffer(b"".join(parts), np.uint8)
        base = np.concatenate([[0], np.cumsum([b - a for a, b in ranges])])[:-1]
        src = np.empty(len(at), np.int64)
        src[order] = slo - slo[firsts][run] + base[run]
    lengths = hi - lo
    offsets = np.zeros(len(at) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    picked = data[np.repeat(src - offsets[:-1], lengths) + np.arange(int(offsets[-1]))]
    stored = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(at), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(picked.tobytes())]
    )
    same: np.ndarray = np.asarray(pc.equal(stored, probed.cast(pa.large_binary())).to_numpy(zero_copy_only=False))
    if bool(same.all()):
        return same
    if types is None:
        raise _Collision
    other = np.nonzero(~same)[0]
    rehashed, parsed = hash_of_key_bytes(stored.take(pa.array(other)), types)
    if not bool(parsed.all()) or bool(np.any(rehashed.view(np.int64) != hashes[other])):
        raise _Collision  # stored bytes that do not give the hash they are filed under: damage
    return same


def _fetch_whole(io: FileIO, index: StoredIndex) -> StoredIndex:
    """Fetch the index's arrays whole (a lookup that touches most pages) and keep them."""
    header = index.header
    whole = [(header.keys_offset, header.size + 1)]  # a byte more: a file longer than its header says is refused
    data = io.read_ranges(index.path, whole)[0]
    if len(data) != header.size - header.keys_offset:
        raise FileNotFoundError(f"{index.path} is not the size its header gives")
    rel = header.keys_offset
    keys = np.frombuffer(data, "<i8" if header.wide else "<u4", header.count, 0)
    positions = (
        np.frombuffer(data, "<u4", header.count, header.positions_offset - rel) if header.has_positions else None
    )
    offsets = key_data = None
    if header.hashed:
        offsets = np.frombuffer(data, "<u8", header.count + 1, header.offsets_offset - rel)
        key_data = np.frombuffer(data, np.uint8, header.base, header.bytes_offset - rel)
    full = StoredIndex(index.path, header, index.directory, keys, positions, offsets, key_data)
    _open.put(io.full_path(index.path), full)
    return full
