"""The entries algebra: manifest entries as Arrow tables, and the few operations every layer needs on them
(the ADDs, the DELETEs, the live files, their paths, checked). Column names live here as constants.

Used by the committer (merges, overwrites), the planner and maintenance alike, so that "ADD minus DELETE"
and the path rules are written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError
from lakefmt.io.paths import BAD_RELATIVE_PATH, check_relative_paths
from lakefmt.meta.store import MetaStore
from lakefmt.spec import DataFile, FileKind, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest import FileContent, entries_table, manifest_schema

__all__ = [
    "KIND",
    "PARTITION",
    "PATH",
    "added_entries_for",
    "adds",
    "as_deletes",
    "cancel_pairs",
    "check_data_paths",
    "concat_entries",
    "data_files",
    "deletes",
    "empty_entries",
    "empty_entries_for",
    "live",
    "live_entries",
    "net_added",
    "paths",
    "read_manifests",
    "schema_ids",
    "vector_files",
]

KIND = "kind"
PARTITION = "partition"
PATH = "path"
FILE_SIZE = "file_size"
ROW_COUNT = "row_count"
STATS = "stats"  #: column statistics keyed by column name (format version 1)
FIELD_STATS = "field_stats"  #: keyed by field id (format version 2); read both with lakefmt.read.bounds
SCHEMA_ID = "schema_id"
CONTENT = "content"  #: format version 3: DATA or DELETION_VECTORS (lakefmt.spec.manifest.FileContent)
BUCKET = "bucket"  #: format version 3: a key table's bucket

#: data files never live in the metadata folders (a DELETE entry naming schema/schema-0 would make expire
#: delete the schema)
_METADATA_PATH = r"^(schema|snapshot|manifest)(/|$)"
_ANY_BAD = f"{BAD_RELATIVE_PATH}|{_METADATA_PATH}"


def _is_add(entries: pa.Table) -> pa.ChunkedArray:
    return pc.equal(entries.column(KIND), int(FileKind.ADD))


def adds(entries: pa.Table) -> pa.Table:
    """The ADD entries."""
    return entries.filter(_is_add(entries))


def deletes(entries: pa.Table) -> pa.Table:
    """The DELETE entries."""
    return entries.filter(pc.invert(_is_add(entries)))


def _is_vectors(entries: pa.Table) -> pa.ChunkedArray | None:
    if CONTENT not in entries.column_names:
        return None
    return pc.equal(entries.column(CONTENT), int(FileContent.DELETION_VECTORS))


def data_files(entries: pa.Table) -> pa.Table:
    """The entries of data files (all of them before format version 3)."""
    is_dv = _is_vectors(entries)
    if is_dv is None or not pc.any(is_dv).as_py():
        return entries
    return entries.filter(pc.invert(is_dv))


def vector_files(entries: pa.Table) -> pa.Table:
    """The entries of deletion-vector files (none before format version 3)."""
    is_dv = _is_vectors(entries)
    if is_dv is None:
        return entries.slice(0, 0)
    return entries.filter(is_dv)


def paths(entries: pa.Table) -> list[str]:
    """The data-file paths of ``entries``, as Python strings."""
    out: list[str] = entries.column(PATH).to_pylist()
    return out


def as_deletes(entries: pa.Table) -> pa.Table:
    """The same entries, marked DELETE (an overwrite's or a rewrite's removals)."""
    kind = pa.array([int(FileKind.DELETE)] * entries.num_rows, pa.int8())
    return entries.set_column(entries.schema.get_field_index(KIND), KIND, kind)


def live(entries: pa.Table) -> pa.Table:
    """ADD entries whose file no DELETE entry in ``entries`` removes (ADD minus DELETE)."""
    kind = entries.column(KIND)
    if entries.num_rows == 0 or pc.max(kind).as_py() == int(FileKind.ADD):  # no DELETE: nothing to subtract
        return entries
    is_add = pc.equal(kind, int(FileKind.ADD))
    added = entries.filter(is_add)
    gone = entries.filter(pc.invert(is_add)).column(PATH).combine_chunks()
    return added.filter(pc.invert(pc.is_in(added.column(PATH), value_set=gone)))


def cancel_pairs(entries: pa.Table) -> pa.Table:
    """Drop every ADD whose DELETE is in the same table, and that DELETE (what a manifest merge may do)."""
    is_add = _is_add(entries)
    added = entries.filter(is_add)
    if added.num_rows == entries.num_rows:
        return entries
    dels = entries.filter(pc.invert(is_add))
    add_paths = added.column(PATH).combine_chunks()
    del_paths = dels.column(PATH).combine_chunks()
    added = added.filter(pc.invert(pc.is_in(added.column(PATH), value_set=del_paths)))
    dels = dels.filter(pc.invert(pc.is_in(dels.column(PATH), value_set=add_paths)))
    return concat_entries([added, dels])


def net_added(tables: Sequence[pa.Table]) -> pa.Table:
    """The ADD entries of files that ``tables`` (entries of consecutive snapshots' deltas, oldest first) leave
    added: for each path the last entry decides. A path DELETEd and ADDed again later (a restore) counts as
    added; one ADDed and then DELETEd does not."""
    if not tables:
        raise ValueError("net_added needs at least one entries table")
    entries = concat_entries(tables)
    if entries.num_rows == 0 or pc.max(entries.column(KIND)).as_py() == int(FileKind.ADD):
        return entries  # no DELETE: every path is added once
    order = pa.table({PATH: entries.column(PATH), "i": pa.array(range(entries.num_rows), pa.int64())})
    last = order.group_by(PATH, use_threads=False).aggregate([("i", "max")]).column("i_max")
    return adds(entries.take(pc.take(last, pc.sort_indices(last))))  # in order


def concat_entries(tables: Sequence[pa.Table]) -> pa.Table:
    """Concatenate manifest entry tables (unifying schemas written by different schema versions)."""
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def check_data_paths(entries_or_paths: pa.Table | pa.ChunkedArray | pa.Array, what: str) -> None:
    """Refuse data-file paths that could resolve outside the root (:class:`PathOutsideTableError`) or that
    name a file in the table's metadata folders (:class:`CorruptMetadataError`). One vectorised pass."""
    column = entries_or_paths.column(PATH) if isinstance(entries_or_paths, pa.Table) else entries_or_paths
    bad = pc.match_substring_regex(column, _ANY_BAD)  # one pass over every path; the rare hit is sorted below
    if not pc.any(bad).as_py():
        return
    check_relative_paths(column.filter(bad), what)  # PathOutsideTableError names the first such path
    sample = column.filter(bad)[0].as_py()
    raise CorruptMetadataError(
        f"{what} lists data file {sample!r}, which is in the table's metadata folders: the metadata is corrupt"
    )


def check_changelog_paths(entries: pa.Table, what: str) -> None:
    """As :func:`check_data_paths`, and refuse a path outside the changelog folder (:class:`CorruptMetadataError`):
    the changelog files a snapshot names are deleted with it, so a list naming a data file must not reach that."""
    check_data_paths(entries, what)
    column = entries.column(PATH)
    outside = pc.invert(pc.starts_with(column, f"{layout.CHANGELOG_DIR}/"))
    if pc.any(outside).as_py():
        sample = column.filter(outside)[0].as_py()
        raise CorruptMetadataError(
            f"{what} list {sample!r}, which is not in the table's {layout.CHANGELOG_DIR}/ folder: "
            "the metadata is corrupt"
        )


def read_manifests(store: MetaStore, metas: Sequence[ManifestFileMeta]) -> list[pa.Table]:
    """The entries of ``metas`` (in parallel on object stores, where each read is a round trip)."""
    names = [m.file_name for m in metas]
    if len(names) <= 2 or store.io.protocol in ("file", "memory"):
        return [store.manifest(n) for n in names]
    with ThreadPoolExecutor(max_workers=min(16, len(names))) as pool:
        return list(pool.map(store.manifest, names))


def added_entries_for(files: Sequence[DataFile], schema: TableSchema) -> pa.Table:
    """ADD entries of ``files`` (written under ``schema``), with the manifest schema of that table schema."""
    return entries_table(
        FileKind.ADD,
        files,
        schema.arrow_schema,
        schema.partition_keys,
        ids=schema.stats_ids,
        version=schema.format_version,
    )


def schema_ids(entries: pa.Table) -> list[int | None]:
    """Each entry's schema id (None throughout for entries of a table version without them: its first schema)."""
    if SCHEMA_ID not in entries.column_names:
        return [None] * entries.num_rows
    out: list[int | None] = entries.column(SCHEMA_ID).to_pylist()
    return out


def empty_entries_for(schema: TableSchema) -> pa.Table:
    """No entries, with the manifest schema of a table schema."""
    return manifest_schema(
        schema.arrow_schema, schema.partition_keys, ids=schema.stats_ids, version=schema.format_version
    ).empty_table()


def empty_entries(store: MetaStore, snap: Snapshot) -> pa.Table:
    """No entries, with the manifest schema of ``snap``'s table schema."""
    return empty_entries_for(store.schema(snap.schema_id))


def live_entries(store: MetaStore, snap: Snapshot, metas: Sequence[ManifestFileMeta] | None = None) -> pa.Table:
    """ADD entries of the files live in ``snap``, from its manifests (or only from ``metas``, a subset chosen
    by partition ranges: a file's ADD and DELETE always share its partition), paths checked. Those of every
    manifest are remembered by the store for the next call on the same snapshot."""
    whole = metas is None  # every manifest: the result is remembered by the store (MetaStore.live_of)
    if whole and (known := store.live_of(snap)) is not None:
        return known
    metas = store.snapshot_manifests(snap) if metas is None else metas
    if not metas:
        return empty_entries(store, snap)
    out = live(concat_entries(read_manifests(store, metas)))
    check_data_paths(out, f"a manifest of snapshot {snap.id}")
    if BUCKET in out.column_names and out.num_rows:
        schema = store.schema(snap.schema_id)
        buckets = schema.table_options.bucket if schema.has_primary_key else 1
        top = pc.max(out.column(BUCKET)).as_py()
        if top is not None and top >= buckets:  # a lookup in the key's bucket would miss that file's rows
            raise CorruptMetadataError(
                f"a manifest of snapshot {snap.id} puts a file in bucket {top}; the table has {buckets} bucket(s)"
            )
    if whole:
        store.remember_live(snap, out)
    return out
