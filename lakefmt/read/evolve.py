"""Reading data files written under an older schema, matched by field id.

Design note (schema evolution, format version 2):

* Every field has an id (:mod:`lakefmt.spec.fields`); each manifest entry records the schema id its file was
  written with. A reader maps a file's columns to the schema it reads with (the snapshot's, or the current one
  for a read of the latest) **by id**: a missing id reads as null, a widened type is cast, a dropped column is
  not read, a renamed column reads under its new name.
* Fast path: files written under the schema read with, and files whose schema agrees with it *by name* (every
  name the two share has the same id at every depth, every shared id the same name, types equal or widened:
  e.g. files from before a column was added or widened) go into **one** ``pyarrow.dataset`` with the read
  schema, as before schema evolution: pyarrow fills missing columns with nulls and casts widened ones, and the
  filter is pushed into the Parquet scan as before.
* Other files (written before a rename, or before a column was dropped and another added under its name, or
  with a nested field renamed) are read with their own schema and mapped array by array
  (:func:`evolve_batch`, zero-copy except the casts); the filter is applied to the mapped rows.
* Pruning reads each entry's statistics by field id: :mod:`lakefmt.read.bounds`.

:func:`runs` splits entries into consecutive runs that are read the same way, so that rows come back in the
entries' order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.read.bounds import SchemaLookup
from lakefmt.spec import TableSchema
from lakefmt.spec.evolution.promotion import is_promotion
from lakefmt.spec.fields import FieldNode

__all__ = [
    "check_widening",
    "dataset_for",
    "evolve_batch",
    "name_compatible",
    "read_evolved",
    "runs",
    "source_columns",
]


def name_compatible(old: TableSchema, new: TableSchema) -> bool:
    """Whether a dataset with ``new``'s Arrow schema reads files written under ``old`` right, by name."""
    if old.id == new.id or (old.field_ids == new.field_ids and old.arrow_schema == new.arrow_schema):
        return True
    return _level_compatible(old.nodes, new.nodes)


def _level_compatible(old: Sequence[FieldNode], new: Sequence[FieldNode]) -> bool:
    by_name = {n.name: n for n in old}
    ids = {n.id for n in old}
    for n in new:
        o = by_name.get(n.name)
        if o is None:
            if n.id in ids:  # renamed: by name it would read as missing
                return False
            continue
        if o.id != n.id or not _node_compatible(o, n):  # a name taken by another column, or a nested change
            return False
    return True


def _node_compatible(o: FieldNode, n: FieldNode) -> bool:
    if pa.types.is_struct(o.type) and pa.types.is_struct(n.type):
        return _level_compatible(o.children, n.children)
    if o.children or n.children:  # lists and maps: only when nothing inside them changed
        return _same_tree(o, n)
    return o.type == n.type or is_promotion(o.type, n.type)


def _same_tree(o: FieldNode, n: FieldNode) -> bool:
    if o.id != n.id or o.name != n.name or len(o.children) != len(n.children):
        return False
    if not o.children:
        return bool(o.type == n.type)
    if _kind(o.type) != _kind(n.type):
        return False
    return all(_same_tree(a, b) for a, b in zip(o.children, n.children, strict=True))


def _kind(t: pa.DataType) -> str:
    return str(t.id)


def source_columns(old: TableSchema, new: TableSchema, columns: Sequence[str] | None) -> list[str]:
    """The columns (``old``'s names) to read from a file of ``old`` for ``new``'s ``columns`` (None: all)."""
    wanted = new.nodes if columns is None else [n for n in new.nodes if n.name in set(columns)]
    by_id = {n.id: n.name for n in old.nodes}
    return [by_id[n.id] for n in wanted if n.id in by_id]


def evolve_batch(
    batch: pa.RecordBatch | pa.Table, old: TableSchema, new: TableSchema, columns: Sequence[str] | None
) -> pa.Table:
    """Rows read from files of ``old`` (any subset of its columns, by its names) as ``new``'s ``columns``
    (None: all), matched by field id: a missing id is null, a widened type is cast, a renamed column takes its
    new name, a dropped column is left out."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    have = {n.id: n for n in old.nodes if n.name in table.column_names}
    wanted = new.nodes if columns is None else [new.nodes[i] for i in _positions(new, columns)]
    arrays = []
    for n in wanted:
        o = have.get(n.id)
        if o is None:
            col: pa.ChunkedArray = pa.chunked_array([pa.nulls(table.num_rows, n.type)], n.type)
        else:
            col = pa.chunked_array([_evolve(chunk, o, n) for chunk in table.column(o.name).chunks], n.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=pa.schema([n.field for n in wanted]))


def _positions(schema: TableSchema, columns: Sequence[str]) -> list[int]:
    names = schema.arrow_schema.names
    return [names.index(c) for c in columns]


def _evolve(arr: pa.Array, o: FieldNode, n: FieldNode) -> pa.Array:
    """One array of field ``o`` as field ``n`` (same id)."""
    if arr.type == n.type and _same_tree(o, n):
        return arr
    t = n.type
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t) and pa.types.is_struct(arr.type):
        old = {c.id: i for i, c in enumerate(o.children)}
        children = []
        for c in n.children:
            i = old.get(c.id)
            children.append(pa.nulls(len(arr), c.type) if i is None else _evolve(arr.field(i), o.children[i], c))
        return pa.StructArray.from_arrays(children, fields=[c.field for c in n.children], mask=mask)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and n.children and o.children:
        values = _evolve(arr.values, o.children[0], n.children[0])
        make = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return make.from_arrays(_offsets(arr), values, type=t, mask=mask)
    if pa.types.is_map(t) and pa.types.is_map(arr.type):
        entries = arr.values  # the key/value struct of every map, unsliced: the offsets index into it
        keys = _evolve(entries.field(0), o.children[0], n.children[0])
        items = _evolve(entries.field(1), o.children[1], n.children[1])
        return pa.MapArray.from_arrays(_offsets(arr), keys, items, type=t, mask=mask)
    check_widening(o, n)
    return arr.cast(t, safe=True)


def check_widening(o: FieldNode, n: FieldNode) -> None:
    """Refuse to read field ``o`` of a file as ``n`` (same id) unless ``n``'s type is ``o``'s or a widening of it:
    no allowed change does anything else, so the schema files are corrupt (a cast would change values silently)."""
    if o.type != n.type and not is_promotion(o.type, n.type):
        raise CorruptMetadataError(
            f"field {n.id} ({n.name!r}) is {n.type} in the schema read with but {o.type} in the schema its files "
            "were written with, which is not a widening: a schema file is corrupt"
        )


def _offsets(arr: pa.Array) -> pa.Array:
    """The offsets of a list or map array, unsliced (``from_arrays`` takes no sliced offsets with a mask)."""
    offsets = arr.offsets
    return pa.concat_arrays([offsets]) if offsets.offset else offsets


def runs(
    entries: pa.Table, schema: TableSchema, schemas: SchemaLookup | None, *, grouped: bool = False
) -> list[tuple[TableSchema | None, pa.Table]]:
    """``entries`` cut into consecutive runs read the same way: ``(None, run)`` for files read by name with
    ``schema`` (the fast path), ``(old, run)`` for files of schema ``old`` that need mapping by id. ``grouped``:
    one group per way instead (all the files read by name together, then those of each old schema, each in the
    entries' order): fewer, larger reads for a caller that does not keep the rows' order across files."""
    if entries.num_rows == 0:
        return []
    if ents.SCHEMA_ID not in entries.column_names:
        return [(None, entries)]
    sids = entries.column(ents.SCHEMA_ID)
    bounds = pc.min_max(sids)
    if bounds["min"].as_py() == bounds["max"].as_py() == schema.id:  # every file of the schema read with: as before
        return [(None, entries)]
    distinct = pc.unique(sids).to_pylist()
    how: dict[int, TableSchema | None] = {}
    for sid in distinct:
        old = schema if sid == schema.id else _lookup(sid, schemas)
        how[sid] = None if name_compatible(old, schema) else old
    if all(v is None for v in how.values()):
        return [(None, entries)]
    if grouped:
        keys: dict[int, list[int]] = {}  # id() of the way to read (None or an old schema) -> the schema ids
        for sid, way in how.items():
            keys.setdefault(id(way), []).append(sid)
        groups = []
        for sids_of in keys.values():
            mask = pc.is_in(sids, value_set=pa.array(sids_of, sids.type))
            groups.append((how[sids_of[0]], entries.filter(mask)))
        return sorted(groups, key=lambda g: g[0] is not None)  # the fast group first
    out: list[tuple[TableSchema | None, pa.Table]] = []
    start, current = 0, None
    ids = sids.to_pylist()
    for i, sid in enumerate(ids):
        key = how[sid]
        if i and (key is not current):
            out.append((current, entries.slice(start, i - start)))
            start = i
        current = key
    out.append((current, entries.slice(start, len(ids) - start)))
    return out


def _lookup(sid: int, schemas: SchemaLookup | None) -> TableSchema:
    if schemas is None:
        raise ValueError(f"files of schema {sid} need that schema to be read (no schema lookup given)")
    return schemas(sid)


def dataset_for(io: FileIO, entries: pa.Table, schema: TableSchema, full_paths: list[str] | None = None) -> ds.Dataset:
    """A ``pyarrow.dataset`` with ``schema``'s Arrow schema over the files of ``entries``, in order."""
    full = full_paths if full_paths is not None else [io.full_path(p) for p in ents.paths(entries)]
    return ds.FileSystemDataset.from_paths(
        full, schema=schema.arrow_schema, format=ds.ParquetFileFormat(), filesystem=io.arrow_filesystem()
    )


def read_evolved(
    io: FileIO,
    entries: pa.Table,
    old: TableSchema,
    new: TableSchema,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
    filter_columns: Sequence[str] = (),
    whole: bool = False,
) -> Iterator[pa.Table]:
    """The rows of files written under ``old``, as ``new``'s ``columns`` (None: all), keeping those where
    ``filter`` (on ``new``'s names; ``filter_columns`` are the columns it reads) is true. One table per batch
    read, or (``whole``) one table read by pyarrow's threaded scan; the filter is applied after mapping, never
    pushed into the old files."""
    wanted = None if columns is None else list(dict.fromkeys([*columns, *filter_columns]))
    dataset = dataset_for(io, entries, old)
    source = source_columns(old, new, wanted)
    parts = [dataset.to_table(columns=source)] if whole else dataset.to_batches(columns=source)
    for batch in parts:
        table = evolve_batch(batch, old, new, wanted)
        if filter is not None:
            table = table.filter(filter)
        if columns is not None:
            table = table.select(list(columns))
        yield table
