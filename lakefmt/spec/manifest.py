"""Manifest files: one entry per data file added or deleted, encoded as an Arrow IPC stream compressed as a
whole into one zstd frame (with its content size and checksum; see :mod:`lakefmt.spec.codec`).

Entries live as Arrow tables end to end (writers build them, the committer concatenates and slices them, the
planner filters them), so no code path touches entries one Python object at a time except the writer that
creates them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError
from lakefmt.spec.codec import read_arrow_file, write_arrow_file
from lakefmt.spec.types import type_family

__all__ = [
    "FIELD_STATS",
    "STATS",
    "ColumnStats",
    "DataFile",
    "FileContent",
    "FileKind",
    "ManifestFileMeta",
    "decode_manifest",
    "encode_manifest",
    "entries_table",
    "is_stats_type",
    "manifest_meta",
    "manifest_schema",
    "stats_type",
]

MANIFEST_KIND = "manifest"


class FileKind(enum.IntEnum):
    """Kind of a manifest entry (stored as int8 in column ``kind``)."""

    ADD = 0
    DELETE = 1


class FileContent(enum.IntEnum):
    """What the file of a manifest entry holds (int8 column ``content``, format version 3; without it: DATA).

    A DELETION_VECTORS entry names a Puffin file holding the deletion vectors of the data files of one partition
    and bucket; its ``row_count`` is the number of positions those vectors delete (so a manifest's and a
    snapshot's row counts are of live rows), and it has no column statistics. At most one such file is live per
    partition and bucket: a commit that changes a bucket's vectors replaces it."""

    DATA = 0
    DELETION_VECTORS = 1


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """min/max (None when unknown) and null count of one column of one data file."""

    min: Any
    max: Any
    null_count: int


@dataclass(frozen=True)
class DataFile:
    """Metadata of one data file, as a writer produces it. ``path`` is relative to the table root."""

    path: str
    file_size: int
    row_count: int
    schema_id: int
    partition: Mapping[str, Any]
    stats: Mapping[str, ColumnStats]
    creation_time_ms: int
    bucket: int = 0  #: a key table's bucket (format version 3)
    content: FileContent = FileContent.DATA


def is_stats_type(t: pa.DataType) -> bool:
    """Whether min/max statistics are kept for columns of type ``t`` (orderable primitives)."""
    family = type_family(t)
    if family == "decimal":
        return bool(t.bit_width >= 128)  # pyarrow has no min_max for decimal32/64
    if family == "float":
        return not pa.types.is_float16(t)
    return family in ("integer", "string", "binary", "boolean", "date", "timestamp", "time")


def stats_type(columns: pa.Schema, ids: Mapping[str, int] | None = None) -> pa.StructType:
    """``struct<col: struct<min, max, null_count>>`` over the stat-able columns of ``columns``, each child named
    after its column, or after its field id (``"3"``) when ``ids`` maps column names to ids."""
    return pa.struct(
        [
            pa.field(
                f.name if ids is None else str(ids[f.name]),
                pa.struct([("min", f.type), ("max", f.type), ("null_count", pa.int64())]),
            )
            for f in columns
            if is_stats_type(f.type)
        ]
    )


#: the stats column of format version 1 (children named after columns) and of version 2 (after field ids): two
#: columns, so that entries of both kinds can share a merged manifest without a name meeting an id
STATS = "stats"
FIELD_STATS = "field_stats"


def manifest_schema(
    table_schema: pa.Schema,
    partition_keys: Sequence[str],
    *,
    ids: Mapping[str, int] | None = None,
    version: int = 2,
) -> pa.Schema:
    """The Arrow schema of a manifest file for a table with these columns and partition keys. With ``ids``
    (column name -> field id: format version 2) the column statistics are ``field_stats``, keyed by field id;
    without, ``stats``, keyed by column name (version 1). Version 3 adds ``content`` (:class:`FileContent`) and
    ``bucket`` (int32)."""
    fields = [pa.field("kind", pa.int8(), nullable=False)]
    if version >= 3:
        fields += [pa.field("content", pa.int8(), nullable=False), pa.field("bucket", pa.int32(), nullable=False)]
    if partition_keys:
        fields.append(pa.field("partition", pa.struct([table_schema.field(k) for k in partition_keys])))
    fields += [
        pa.field("path", pa.string(), nullable=False),
        pa.field("file_size", pa.int64(), nullable=False),
        pa.field("row_count", pa.int64(), nullable=False),
        pa.field("schema_id", pa.int64(), nullable=False),
        pa.field("creation_time_ms", pa.int64(), nullable=False),
    ]
    st = stats_type(table_schema, ids)
    if st.num_fields:
        fields.append(pa.field(STATS if ids is None else FIELD_STATS, st))
    return pa.schema(fields)


def entries_table(
    kind: FileKind,
    files: Sequence[DataFile],
    table_schema: pa.Schema,
    partition_keys: Sequence[str],
    *,
    ids: Mapping[str, int] | None = None,
    version: int = 2,
) -> pa.Table:
    """Build manifest entries (all of one kind) for ``files`` (``ids``, ``version``: see :func:`manifest_schema`)."""
    schema = manifest_schema(table_schema, partition_keys, ids=ids, version=version)
    stats_column = STATS if ids is None else FIELD_STATS
    names = {str(i): n for n, i in (ids or {}).items()}
    n = len(files)
    columns: dict[str, pa.Array] = {"kind": pa.array([int(kind)] * n, pa.int8())}
    if version >= 3:
        columns["content"] = pa.array([int(f.content) for f in files], pa.int8())
        columns["bucket"] = pa.array([f.bucket for f in files], pa.int32())
    if partition_keys:
        columns["partition"] = pa.array(
            [{k: f.partition.get(k) for k in partition_keys} for f in files], schema.field("partition").type
        )
    columns["path"] = pa.array([f.path for f in files], pa.string())
    columns["file_size"] = pa.array([f.file_size for f in files], pa.int64())
    columns["row_count"] = pa.array([f.row_count for f in files], pa.int64())
    columns["schema_id"] = pa.array([f.schema_id for f in files], pa.int64())
    columns["creation_time_ms"] = pa.array([f.creation_time_ms for f in files], pa.int64())
    if stats_column in schema.names:
        st: pa.StructType = schema.field(stats_column).type
        children = []
        for i in range(st.num_fields):
            name = names.get(st.field(i).name, st.field(i).name)
            col_type = st.field(i).type.field("min").type
            per_file = [f.stats.get(name) for f in files]
            mins = pa.array([s.min if s else None for s in per_file], col_type)
            maxs = pa.array([s.max if s else None for s in per_file], col_type)
            nulls = pa.array([s.null_count if s else None for s in per_file], pa.int64())
            children.append(pa.StructArray.from_arrays([mins, maxs, nulls], names=["min", "max", "null_count"]))
        columns[stats_column] = pa.StructArray.from_arrays(children, fields=list(st))
    return pa.table(columns, schema=schema)


def encode_manifest(entries: pa.Table, version: int | None = None) -> bytes:
    """A manifest file's bytes (``version``: the table's format version; default: the newest)."""
    return write_arrow_file(entries, MANIFEST_KIND, version)


#: Columns every reader relies on; a manifest without them (e.g. a corrupted column name) is refused here.
_REQUIRED_COLUMNS = {"kind": pa.int8(), "path": pa.string(), "file_size": pa.int64(), "row_count": pa.int64()}
_V3_COLUMNS = {"content": pa.int8(), "bucket": pa.int32()}


def decode_manifest(data: bytes, what: str = "manifest") -> pa.Table:
    """Entries of a manifest file; CorruptMetadataError / UnsupportedFormatVersionError when unreadable."""
    table = read_arrow_file(data, MANIFEST_KIND, what)
    for name, t in _REQUIRED_COLUMNS.items():
        i = table.schema.get_field_index(name)
        if i < 0 or table.schema.field(i).type != t:
            raise CorruptMetadataError(f"{what} is malformed: no {t} column {name!r}")
    for name in ("row_count", "file_size"):  # offsets and masks are computed from them
        column = table.column(name)
        if column.null_count or (table.num_rows and pc.min(column).as_py() < 0):
            raise CorruptMetadataError(f"{what} is malformed: a null or negative {name!r}")
    if "content" in table.column_names or "bucket" in table.column_names:
        _check_v3_columns(table, what)
    return table


def _check_v3_columns(table: pa.Table, what: str) -> None:
    """A version-3 manifest's ``content`` (int8, 0 or 1) and ``bucket`` (int32, from 0): both present when one
    is, and never null. A reader that took a deletion-vector file for a data file, or a file for another
    bucket's, would misread rows or let an upsert miss a key's live row."""
    for name, t in _V3_COLUMNS.items():
        i = table.schema.get_field_index(name)
        if i < 0 or table.schema.field(i).type != t:
            raise CorruptMetadataError(f"{what} is malformed: no {t} column {name!r} (format version 3)")
        column = table.column(name)
        if column.null_count:
            raise CorruptMetadataError(f"{what} is malformed: its column {name!r} holds a null")
    content, bucket = table.column("content"), table.column("bucket")
    if table.num_rows and not pc.all(pc.is_in(content, value_set=pa.array([0, 1], pa.int8()))).as_py():
        raise CorruptMetadataError(
            f"{what} is malformed: a 'content' value other than 0 (data) or 1 (deletion vectors)"
        )
    if table.num_rows and pc.min(bucket).as_py() < 0:
        raise CorruptMetadataError(f"{what} is malformed: a negative 'bucket'")


@dataclass(frozen=True)
class ManifestFileMeta:
    """What a manifest list says about one manifest file. Small and picklable: this is a commit message's
    payload. ``partition_stats`` maps each partition key to its min, max and null count over the entries."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    num_added_rows: int
    num_deleted_rows: int
    schema_id: int
    partition_stats: Mapping[str, ColumnStats] = field(default_factory=dict)

    @property
    def num_entries(self) -> int:
        return self.num_added_files + self.num_deleted_files

    def may_hold(self, partition: Mapping[str, Any]) -> bool:
        """Whether this manifest may hold entries of ``partition`` (values of some or all partition keys), by its
        partition ranges: a cheap test per manifest (automatic compaction plans after every commit). A key
        without stats, a NaN value or a value of another type than the stats cannot rule it out."""
        for key, value in partition.items():
            s = self.partition_stats.get(key)
            if s is None or (value is not None and value != value):
                continue
            if value is None:
                if s.null_count == 0:
                    return False
                continue
            try:
                if s.min is None or s.max is None or not (s.min <= value <= s.max):
                    return False
            except TypeError:
                continue
        return True


def manifest_meta(file_name: str, file_size: int, entries: pa.Table, schema_id: int) -> ManifestFileMeta:
    """Summarise a manifest's entries (counts and partition ranges), vectorised."""
    kind = entries.column("kind")
    is_add = pc.equal(kind, int(FileKind.ADD))
    rows = entries.column("row_count")
    if "content" in entries.column_names:  # a deletion-vector file's rows are deleted ones: they count negative
        is_dv = pc.equal(entries.column("content"), int(FileContent.DELETION_VECTORS))
        rows = pc.if_else(is_dv, pc.negate(rows), rows)
    added_rows = pc.sum(pc.if_else(is_add, rows, 0)).as_py() or 0
    deleted_rows = pc.sum(pc.if_else(is_add, 0, rows)).as_py() or 0
    num_added = pc.sum(pc.cast(is_add, pa.int64())).as_py() or 0
    partition_stats: dict[str, ColumnStats] = {}
    if "partition" in entries.column_names:
        part = entries.column("partition").combine_chunks()
        for i in range(part.type.num_fields):
            child = part.field(i)
            mm = pc.min_max(child)
            partition_stats[part.type.field(i).name] = ColumnStats(
                mm["min"].as_py(), mm["max"].as_py(), child.null_count
            )
    return ManifestFileMeta(
        file_name=file_name,
        file_size=file_size,
        num_added_files=num_added,
        num_deleted_files=entries.num_rows - num_added,
        num_added_rows=added_rows,
        num_deleted_rows=deleted_rows,
        schema_id=schema_id,
        partition_stats=partition_stats,
    )
