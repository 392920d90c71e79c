"""Polars' own Parquet reader dropping the rows that lakefmt's deletion vectors delete, as it reads.

Polars' reader takes, per file, a selection vector (one bool per row of the file, True to keep) from a callback it
calls with the paths it is about to read: the mechanism of its own Delta Lake reader (``scan_parquet``'s
``_deletion_files`` of kind ``"delta-deletion-vector"``). It applies the vector to the file's rows before its
predicate, its row-group skipping, its slices and its row limit, and does so while it decodes: no frame of
masked rows is copied after the read. :func:`reader_masks` says whether the Polars at hand has it (the parameter
is not part of Polars' public API); without it, :mod:`lakefmt.read.engine_polars` masks the frames after the read.

The vectors are lakefmt's (:mod:`lakefmt.read.masks`), checked as every read checks them: a position past its
file's rows, or a file that does not hold the rows its manifest entry says (its Parquet footer is read to know),
is :class:`~lakefmt.errors.CorruptMetadataError`, as is a path Polars asks about that the scan did not plan.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakefmt.cache import BoundedCache
from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.read.masks import Vector, deleted_positions, keep_mask

__all__ = ["footer_rows", "masked_scan", "reader_masks"]

#: the kind of deletion files whose callback returns selection vectors
_KIND = "delta-deletion-vector"


#: data files' row counts from their footers, by (path, size, modification time): a file replaced is read again
_ROWS: BoundedCache[tuple[str, int, int], int] = BoundedCache(4096)


def footer_rows(full: str, rel: str, count: int) -> int:
    """The rows the local data file ``full`` holds by its Parquet footer, which must be ``count``, the rows its
    manifest entry says: :class:`CorruptMetadataError` naming ``rel`` otherwise (:func:`_row_count`). A reader that
    numbers a file's rows itself checks a vector's positions against them."""
    rows = _row_count(full, rel)
    if rows != count:
        raise CorruptMetadataError(f"data file {rel} holds {rows} rows, its manifest entry says {count}")
    return rows


def _row_count(full: str, rel: str) -> int:
    """The rows the local data file ``full`` holds, by its Parquet footer (:class:`CorruptMetadataError` naming
    ``rel`` when it is not Parquet; a missing file's ``FileNotFoundError`` as it is, which the scan's reader turns
    into an expired snapshot's error when it is one)."""
    stat = os.stat(full)
    key = (full, stat.st_size, stat.st_mtime_ns)
    rows = _ROWS.get(key)
    if rows is None:
        try:
            rows = pq.read_metadata(full).num_rows
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as exc:
            raise CorruptMetadataError(f"data file {rel} cannot be read as Parquet: {exc}") from exc
        _ROWS.put(key, rows)
    return rows


@functools.cache
def reader_masks(pl: Any) -> bool:
    """Whether ``pl`` (the polars module) reads selection vectors itself (``scan_parquet(_deletion_files=...)``
    with the ``"delta-deletion-vector"`` kind)."""
    try:
        if "_deletion_files" not in inspect.signature(pl.scan_parquet).parameters:
            return False
        from polars import _typing

        return _KIND in repr(_typing.DeletionFiles)
    except Exception:  # another layout of Polars' internals: its reader is not asked to mask
        return False


def masked_scan(
    pl: Any,
    io: FileIO,
    rels: Sequence[str],
    paths: Sequence[str],
    counts: Sequence[int],
    vectors: Mapping[str, Vector],
) -> Any:
    """A Polars ``LazyFrame`` over the local files ``paths`` (``rels``: their paths under the table's root, with
    ``counts`` rows each by their manifest entries), in order, without the rows that ``vectors`` (by relative
    path) delete. The row counts of the files with a vector are checked first, by their footers (remembered while a
    file's size and modification time stay the same)."""
    masked = {
        full: (rel, count, vectors[rel])
        for rel, full, count in zip(rels, paths, counts, strict=True)
        if rel in vectors
    }
    for full, (rel, count, _) in masked.items():
        footer_rows(full, rel, count)
    planned = set(paths)

    def selection(requested: Any) -> Any:
        """Polars' callback: one selection vector (or null: every row kept) per requested path, in order."""
        keeps: list[pa.Array] = []
        offsets = [0]
        missing: list[bool] = []
        for path in requested.get_column("path").to_list():
            full = path.removeprefix("file://")
            if full not in planned:
                raise CorruptMetadataError(
                    f"Polars asked for the deletion vector of {path}, which this scan did not plan"
                )
            found = masked.get(full)
            missing.append(found is None)
            if found is not None:
                rel, count, vector = found
                keeps.append(keep_mask(count, deleted_positions(io, vector, count), rel))
                offsets.append(offsets[-1] + count)
            else:
                offsets.append(offsets[-1])
        values = pa.concat_arrays(keeps) if keeps else pa.array(np.zeros(0, dtype=bool))
        lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), values, mask=pa.array(missing))
        return pl.DataFrame({"selection_vector": pl.from_arrow(lists)})

    return pl.scan_parquet(list(paths), hive_partitioning=False, glob=False, _deletion_files=(_KIND, selection))
