"""Planning: snapshot -> manifest lists -> manifests (pruned by partition ranges) -> live entries (ADD minus
DELETE) -> entries pruned by partition values and column min/max for a filter.

Pruning is done by pyarrow itself: each manifest or file gets a *guarantee* expression built from its
statistics (``x >= min and x <= max``, ``dt == '2026-11-01'``, ``is_null(x)``), and pyarrow's expression
simplifier drops those under which the filter cannot be true. Pruning only decides which files are read; the
filter is then applied to the rows of every file kept, so a result never depends on pruning being tight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from lakefmt.meta import entries as meta_entries
from lakefmt.meta.entries import PARTITION, PATH, ROW_COUNT
from lakefmt.meta.store import MetaStore
from lakefmt.read.bounds import SchemaLookup, column_bounds
from lakefmt.spec import ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.filters import all_of, has_nan_literal, referenced_columns
from lakefmt.spec.manifest import ColumnStats

__all__ = ["live_entries", "may_hold", "prune_entries", "select_manifests"]


def _range_guarantee(
    name: str, lo: Any, hi: Any, null_count: int | None, row_count: int | None
) -> pc.Expression | None:
    col = pc.field(name)
    if null_count is not None and row_count is not None and null_count >= row_count:
        return col.is_null()
    if lo is None or hi is None:
        return None
    if isinstance(lo, pa.Scalar) and not lo.is_valid:
        return None
    rng = (col >= lo) & (col <= hi)
    if null_count == 0:
        return rng
    return rng | col.is_null()


def _surviving(filter: pc.Expression, schema: pa.Schema, guarantees: Sequence[pc.Expression | None]) -> list[bool]:
    """For each guarantee, can the filter be true of some row it allows? Uses pyarrow's simplifier."""
    exprs = [g if g is not None else pc.scalar(True) for g in guarantees]
    if not exprs:
        return []
    if has_nan_literal(filter):
        return [True] * len(exprs)
    return may_hold(filter, schema, exprs)


def may_hold(expr: pc.Expression, schema: pa.Schema, guarantees: Sequence[pc.Expression]) -> list[bool]:
    """For each guarantee: can ``expr`` be true of a row it allows? pyarrow's simplifier decides (a fragment
    whose partition expression makes the filter literally false is skipped). When it cannot compare them (a
    uint64 bound past int64 against an int literal, which it would cast), every answer is "may": a statistic that
    cannot prove a filter sends the file to be read."""
    dataset = ds.FileSystemDataset.from_paths(
        [str(i) for i in range(len(guarantees))],
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=list(guarantees),
    )
    out = [False] * len(guarantees)
    try:
        for fragment in dataset.get_fragments(filter=expr):
            out[int(fragment.path)] = True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return [True] * len(guarantees)
    return out


def select_manifests(
    metas: Sequence[ManifestFileMeta], filter: pc.Expression | None, schema: TableSchema
) -> list[ManifestFileMeta]:
    """Manifests whose partition ranges may hold rows matching ``filter``."""
    keys = [k for k in referenced_columns(filter, schema.arrow_schema) if k in schema.partition_keys]
    if filter is None or not keys:
        return list(metas)
    guarantees = []
    for m in metas:
        parts = []
        for k in keys:
            s: ColumnStats | None = m.partition_stats.get(k)
            if s is None:
                continue
            t = schema.arrow_schema.field(k).type
            lo = None if s.min is None else pa.scalar(s.min, t)
            hi = None if s.max is None else pa.scalar(s.max, t)
            g = _range_guarantee(k, lo, hi, s.null_count, m.num_entries)
            if g is not None:
                parts.append(g)
        guarantees.append(all_of(parts))
    keep = _surviving(filter, schema.arrow_schema, guarantees)
    return [m for m, k in zip(metas, keep, strict=True) if k]


def live_entries(
    store: MetaStore, snap: Snapshot, schema: TableSchema, filter: pc.Expression | None = None
) -> pa.Table:
    """ADD entries of the files live in ``snap`` (only those in manifests that may match ``filter``)."""
    metas = store.snapshot_manifests(snap)
    chosen = select_manifests(metas, filter, schema)
    return meta_entries.live_entries(store, snap, None if len(chosen) == len(metas) else chosen)


def prune_entries(
    entries: pa.Table, filter: pc.Expression | None, schema: TableSchema, schemas: SchemaLookup | None = None
) -> pa.Table:
    """Entries whose partition values and column ranges may hold rows matching ``filter``. Column ranges are
    taken by field id from each entry's own statistics (:func:`~lakefmt.read.bounds.column_bounds`); ``schemas``
    gives the schemas of entries written under another one (without it, their ranges are unknown)."""
    cols = referenced_columns(filter, schema.arrow_schema)
    if filter is None or not cols or entries.num_rows == 0:
        return entries
    keep = pa.array([True] * entries.num_rows)
    part_cols = [c for c in cols if c in schema.partition_keys]
    if part_cols:
        keep = pc.and_(keep, _prune_partitions(entries, filter, schema, part_cols))
    stat_cols = [c for c in cols if c not in schema.partition_keys]
    if stat_cols:
        candidates = entries.filter(keep)
        per_col = []
        for c in stat_cols if candidates.num_rows else []:
            bounds = column_bounds(candidates, c, schema, schemas)
            if bounds is not None:
                per_col.append((c, bounds[0], bounds[1], bounds[2].to_pylist()))
        if per_col:
            rows = candidates.column(ROW_COUNT).to_pylist()
            guarantees = []
            for i in range(candidates.num_rows):
                parts = []
                for c, mins, maxs, nulls in per_col:
                    g = _range_guarantee(c, mins[i], maxs[i], nulls[i], rows[i])
                    if g is not None:
                        parts.append(g)
                guarantees.append(all_of(parts))
            survived = _surviving(filter, schema.arrow_schema, guarantees)
            kept_paths = candidates.filter(pa.array(survived)).column(PATH)
            keep = pc.and_(keep, pc.is_in(entries.column(PATH), value_set=kept_paths.combine_chunks()))
    return entries.filter(keep)


def _partition_key(table: pa.Table, cols: list[str]) -> pa.Array:
    """One string per row identifying its partition values (nulls distinct from every value)."""
    parts = [pc.fill_null(pc.cast(table.column(c), pa.string()), "\x00null") for c in cols]
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "\x01")


def _prune_partitions(entries: pa.Table, filter: pc.Expression, schema: TableSchema, cols: list[str]) -> pa.Array:
    """One guarantee per distinct partition (not per file), mapped back to the entries."""
    part = entries.column(PARTITION).combine_chunks()
    keys = pa.table({c: part.field(c) for c in cols})
    distinct = keys.group_by(cols, use_threads=False).aggregate([])
    guarantees = []
    for row in distinct.to_pylist():
        parts = []
        for c in cols:
            v = row[c]
            t = keys.schema.field(c).type
            parts.append(pc.field(c).is_null() if v is None else pc.field(c) == pa.scalar(v, t))
        guarantees.append(all_of(parts))
    survived = distinct.filter(pa.array(_surviving(filter, schema.arrow_schema, guarantees), pa.bool_()))
    if survived.num_rows == distinct.num_rows:
        return pa.array([True] * entries.num_rows)
    return pc.is_in(_partition_key(keys, cols), value_set=_partition_key(survived, cols))
