"""Reading the rows of chosen data files (manifest entries) as the table's current schema sees them.

The one place that turns entries into rows for every path that rewrites or reads files outside a plain
:class:`~lakefmt.read.scan.Scan`: compaction, row-level delete, restore's checks, engines. Files written under
an older schema are mapped to ``schema`` here, so callers never look at a file's own schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakefmt.errors import CorruptMetadataError, LakefmtError, RewriteConflictError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.bounds import SchemaLookup
from lakefmt.read.evolve import dataset_for, read_evolved, runs
from lakefmt.read.masks import Vector, apply_vector
from lakefmt.spec import TableSchema
from lakefmt.spec.filters import referenced_columns

__all__ = ["entries_dataset", "read_entries", "read_entries_parallel", "read_inputs", "read_planned"]


def entries_dataset(io: FileIO, entries: pa.Table, schema: TableSchema) -> ds.Dataset:
    """A ``pyarrow.dataset`` over exactly the files of ``entries``, in their order, with ``schema``'s columns,
    matched **by name**: right for files written under ``schema`` or one that agrees with it by name
    (:func:`lakefmt.read.evolve.name_compatible`); :func:`read_entries` reads any file right."""
    return dataset_for(io, entries, schema)


def read_entries(
    io: FileIO,
    entries: pa.Table,
    schema: TableSchema,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
    schemas: SchemaLookup | None = None,
    vectors: Mapping[str, Vector] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of the files of ``entries`` (file by file, in order), as ``schema``'s columns (or ``columns``),
    keeping only rows where ``filter`` is true (a null counts as false, as in ``Scan``) and that ``vectors`` (data
    path -> deletion vector, :mod:`lakefmt.read.masks`) leave live.

    Files written under another schema are matched to ``schema`` by field id (:mod:`lakefmt.read.evolve`): a
    column they lack reads as null, a widened one is cast, a renamed one takes its new name. ``schemas`` gives
    those schemas by id (default: read from the table's schema folder, once per call).

    The filter is applied to the rows read, never pushed into the Parquet reader: its row-group pruning leaves
    NaN out of min/max (see ``Scan.pushdown_safe``), and a rewrite must not lose a row to that. A file with a
    deletion vector is read whole, masked by row position, and only then filtered and projected."""
    if entries.num_rows == 0:
        return
    cols = list(columns) if columns is not None else None
    used = referenced_columns(filter, schema.arrow_schema)
    lookup = schemas or MetaStore(io).schema
    masked = vectors or {}
    for old, run in runs(entries, schema, lookup):
        paths = ents.paths(run)
        if masked and any(p in masked for p in paths):
            for i, path in enumerate(paths):  # file by file, in order: a mask needs a file's rows whole
                one = run.slice(i, 1)
                if path not in masked:
                    yield from _read_run(io, one, old, schema, cols, filter, used)
                    continue
                needed = None if cols is None else list(dict.fromkeys([*cols, *used]))
                parts = list(_read_run(io, one, old, schema, needed, None, used))
                names = schema.arrow_schema.names if needed is None else needed
                whole = pa.Table.from_batches(parts, schema=pa.schema([schema.arrow_schema.field(c) for c in names]))
                kept = apply_vector(io, whole, masked[path], path)
                if filter is not None:
                    kept = kept.filter(filter)
                if cols is not None:
                    kept = kept.select(cols)
                yield from kept.to_batches()
            continue
        yield from _read_run(io, run, old, schema, cols, filter, used)


def read_entries_parallel(
    io: FileIO,
    entries: pa.Table,
    schema: TableSchema,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
    schemas: SchemaLookup | None = None,
    vectors: Mapping[str, Vector] | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_entries`, the files read by a few threads at once, their rows yielded in file order."""
    n = entries.num_rows
    if n <= 1:
        yield from read_entries(io, entries, schema, columns=columns, filter=filter, schemas=schemas, vectors=vectors)
        return
    lookup = schemas or MetaStore(io).schema

    def one(i: int) -> list[pa.RecordBatch]:
        one_file = entries.slice(i, 1)
        return list(
            read_entries(io, one_file, schema, columns=columns, filter=filter, schemas=lookup, vectors=vectors)
        )

    with ThreadPoolExecutor(max_workers=min(8, n)) as pool:
        for batches in pool.map(one, range(n)):
            yield from batches


def _read_run(
    io: FileIO,
    run: pa.Table,
    old: TableSchema | None,
    schema: TableSchema,
    cols: list[str] | None,
    filter: pc.Expression | None,
    used: list[str],
) -> Iterator[pa.RecordBatch]:
    """The rows of a run of files read one way (by name when ``old`` is None, else mapped by id), filtered."""
    if old is not None:
        for table in read_evolved(io, run, old, schema, columns=cols, filter=filter, filter_columns=used):
            yield from table.to_batches()
        return
    dataset = entries_dataset(io, run, schema)
    if filter is None:
        yield from dataset.to_batches(columns=cols)
        return
    needed = None if cols is None else list(dict.fromkeys([*cols, *used]))
    for batch in dataset.to_batches(columns=needed):
        kept = pa.Table.from_batches([batch]).filter(filter)
        if cols is not None:
            kept = kept.select(cols)
        yield from kept.to_batches()


def read_inputs(
    io: FileIO,
    entries: pa.Table,
    schema: TableSchema,
    store: MetaStore,
    *,
    what: str,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_entries` for a rewrite (``what``: ``"compaction"``, ``"delete"``) of files planned on an
    earlier snapshot, where a file missing from storage is named: a read that fails with an ``OSError`` while
    files of ``entries`` are missing raises :class:`~lakefmt.errors.RewriteConflictError` (``gone``: those files)
    when the latest snapshot no longer holds them (a concurrent commit removed them and an expiration deleted
    them: the rewrite lost a race), or :class:`~lakefmt.errors.CorruptMetadataError` when it still does (a file
    deleted behind the table's back). Any other failure is raised as it is."""
    try:
        yield from read_entries(io, entries, schema, columns=columns, filter=filter, schemas=store.schema)
    except OSError as exc:  # FileNotFoundError, or an object store's OSError for a missing object
        missing = [p for p in ents.paths(entries) if not _exists(io, p)]
        if not missing:
            raise
        raise _missing_error(store, missing, what) from exc


def _exists(io: FileIO, path: str) -> bool:
    try:
        return io.exists(path)
    except OSError:
        return True  # unknown: not counted as missing


def _missing_error(store: MetaStore, missing: list[str], what: str) -> LakefmtError:
    latest = store.latest_snapshot()
    live = set(ents.paths(ents.live_entries(store, latest))) if latest is not None else set()
    still = [p for p in missing if p in live]
    if still and latest is not None:
        return CorruptMetadataError(
            f"data file {still[0]} is missing from storage although the latest snapshot ({latest.id}) holds it "
            f"(deleted behind the table's back); nothing was committed by this {what}"
        )
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return RewriteConflictError(
        f"data file {missing[0]}{more} was removed by a concurrent commit and deleted by an expiration before this "
        f"{what} read it; nothing was committed by this {what}",
        gone=missing,
    )


class _Planned(Protocol):
    """A planned file (:class:`lakefmt.read.scan.FileTask`): its path under the root, its schema's id."""

    @property
    def path(self) -> str: ...
    @property
    def schema_id(self) -> int | None: ...
    @property
    def deletion_vector(self) -> Vector | None: ...


def read_planned(
    io: FileIO,
    store: MetaStore,
    files: Sequence[_Planned],
    schema: TableSchema,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
) -> Iterator[pa.RecordBatch]:
    """:meth:`lakefmt.Table.read_files`: the rows of planned files, in order, as ``schema``'s columns (each file
    matched to it by field id), keeping the rows where ``filter`` is true. Every path is checked to be inside the
    table before anything is read."""
    if not files:
        return iter(())
    entries = pa.table(
        {
            ents.PATH: pa.array([f.path for f in files], pa.string()),
            ents.SCHEMA_ID: pa.array([schema.id if f.schema_id is None else f.schema_id for f in files], pa.int64()),
        }
    )
    ents.check_data_paths(entries, "read_files")
    vectors = {f.path: v for f in files if (v := getattr(f, "deletion_vector", None)) is not None}
    if vectors:
        ents.check_data_paths(pa.array([v.file for v in vectors.values()], pa.string()), "read_files")
    return read_entries(io, entries, schema, columns=columns, filter=filter, schemas=store.schema, vectors=vectors)
