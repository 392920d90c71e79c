"""Manifest lists: the metadata of a set of manifest files, encoded as an Arrow IPC stream in one zstd frame
(see :mod:`lakefmt.spec.codec`)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lakefmt.errors import CorruptMetadataError
from lakefmt.spec.codec import read_arrow_file, write_arrow_file
from lakefmt.spec.manifest import ColumnStats, ManifestFileMeta, stats_type

__all__ = ["decode_manifest_list", "encode_manifest_list"]

MANIFEST_LIST_KIND = "manifest-list"

_BASE_FIELDS = [
    pa.field("file_name", pa.string(), nullable=False),
    pa.field("file_size", pa.int64(), nullable=False),
    pa.field("num_added_files", pa.int64(), nullable=False),
    pa.field("num_deleted_files", pa.int64(), nullable=False),
    pa.field("num_added_rows", pa.int64(), nullable=False),
    pa.field("num_deleted_rows", pa.int64(), nullable=False),
    pa.field("schema_id", pa.int64(), nullable=False),
]


def encode_manifest_list(
    metas: Sequence[ManifestFileMeta], partition_schema: pa.Schema, version: int | None = None
) -> bytes:
    """A manifest list file's bytes (``version``: the table's format version; default: the newest)."""
    columns: dict[str, pa.Array] = {f.name: pa.array([getattr(m, f.name) for m in metas], f.type) for f in _BASE_FIELDS}
    fields = list(_BASE_FIELDS)
    if len(partition_schema):
        st = stats_type(partition_schema)
        fields.append(pa.field("partition_stats", st))
        children = []
        for f in partition_schema:
            stats = [m.partition_stats.get(f.name) for m in metas]
            children.append(
                pa.StructArray.from_arrays(
                    [
                        pa.array([s.min if s else None for s in stats], f.type),
                        pa.array([s.max if s else None for s in stats], f.type),
                        pa.array([s.null_count if s else None for s in stats], pa.int64()),
                    ],
                    names=["min", "max", "null_count"],
                )
            )
        columns["partition_stats"] = pa.StructArray.from_arrays(children, fields=list(st))
    table = pa.table(columns, schema=pa.schema(fields))
    return write_arrow_file(table, MANIFEST_LIST_KIND, version)


def decode_manifest_list(data: bytes, what: str = "manifest list") -> list[ManifestFileMeta]:
    """The manifest metadata in a manifest list file."""
    table = read_arrow_file(data, MANIFEST_LIST_KIND, what)
    try:
        rows = table.to_pylist()
    except pa.ArrowInvalid as exc:  # pragma: no cover - read_all already validated the data
        raise CorruptMetadataError(f"{what} is malformed: {exc}") from exc
    out = []
    try:
        for r in rows:
            stats = {
                k: ColumnStats(v["min"], v["max"], v["null_count"])
                for k, v in (r.get("partition_stats") or {}).items()
                if v is not None
            }
            out.append(
                ManifestFileMeta(
                    file_name=r["file_name"],
                    file_size=r["file_size"],
                    num_added_files=r["num_added_files"],
                    num_deleted_files=r["num_deleted_files"],
                    num_added_rows=r["num_added_rows"],
                    num_deleted_rows=r["num_deleted_rows"],
                    schema_id=r["schema_id"],
                    partition_stats=stats,
                )
            )
    except (KeyError, TypeError) as exc:
        raise CorruptMetadataError(f"{what} is malformed: missing field {exc}") from exc
    return out
