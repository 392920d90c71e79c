"""Shared decoding guards: every metadata file is checked for emptiness, syntax and format version."""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pyarrow as pa
import zstandard

from lakefmt.errors import CorruptMetadataError, UnsupportedFormatVersionError

__all__ = [
    "BASE_FORMAT_VERSION",
    "FORMAT_VERSION",
    "check_version",
    "decode_json",
    "decode_metadata",
    "encode_json",
    "read_arrow_file",
    "write_arrow_file",
]

#: The newest format version this library reads and writes. A table's files are written with the table's own
#: version (its current schema's): a version-1 table stays readable by version-1 readers until it is upgraded
#: (docs/format.md, "Compatibility rules"). Version 3 is that of key tables and of tables with deletion vectors;
#: other tables are created with version 2 (:data:`BASE_FORMAT_VERSION`), which version-2 readers still read.
FORMAT_VERSION = 3
#: the version a table without a primary key or deletion vectors is created with
BASE_FORMAT_VERSION = 2

VERSION_KEY = b"lakefmt.format-version"
KIND_KEY = b"lakefmt.kind"

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: A metadata file that claims to decode to more than this is corrupt (a manifest is ~8 MiB compressed).
MAX_DECODED_BYTES = 1 << 31
# Most metadata files are small (one manifest per commit, two lists) and dominated by the Arrow schema:
# level 9 makes them ~3% smaller than level 3 for ~50 us (level 19: 7%, but ~0.6 ms a file, three files a
# commit). Large merged manifests use level 3 (~300 MB/s). The frame checksum turns bit rot into a clear
# CorruptMetadataError.
_SMALL_FILE = 256 << 10
_compressors = threading.local()  # a zstd context must not be shared between threads (it crashes)


def _compressor(level: int) -> zstandard.ZstdCompressor:
    c: zstandard.ZstdCompressor | None = getattr(_compressors, f"level{level}", None)
    if c is None:
        c = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
        setattr(_compressors, f"level{level}", c)
    return c


def check_version(version: Any, what: str) -> int:
    """Refuse a metadata file written by a newer format version, with an error that says so."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CorruptMetadataError(f"{what}: invalid format version {version!r}")
    if version > FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"{what} was written with lakefmt format version {version}; this library reads up to "
            f"version {FORMAT_VERSION}: upgrade lakefmt to read this table"
        )
    return version


def encode_json(obj: Any) -> bytes:
    """Compact, deterministic JSON (sorted keys are not needed: field order is fixed by the writers). Compact
    because a snapshot is written per commit: indentation alone would be a fifth of its bytes."""
    return orjson.dumps(obj)


def decode_json(data: bytes, what: str) -> dict[str, Any]:
    """Parse a JSON metadata object; empty, truncated or non-object content raises CorruptMetadataError."""
    if not data:
        raise CorruptMetadataError(f"{what} is empty")
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptMetadataError(f"{what} is not valid JSON (truncated or corrupt): {exc}") from exc
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"{what} is not a JSON object")
    return obj


def decode_metadata(data: bytes, what: str) -> tuple[dict[str, Any], int]:
    """A JSON metadata file's object and its format version (``"version"``), checked by :func:`decode_json` and
    :func:`check_version`."""
    obj = decode_json(data, what)
    return obj, check_version(obj.get("version"), what)


def write_arrow_file(table: pa.Table, kind: str, version: int | None = None) -> bytes:
    """Encode ``table`` as a metadata file: an Arrow IPC stream in one zstd frame (with its content size and
    checksum), its schema tagged with its kind and the format version (the table's; default: the newest)."""
    meta = dict(table.schema.metadata or {})
    meta[KIND_KEY] = kind.encode()
    meta[VERSION_KEY] = str(FORMAT_VERSION if version is None else version).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    raw = sink.getvalue()
    return _compressor(9 if raw.size <= _SMALL_FILE else 3).compress(raw)


def _check_names(fields: list[pa.Field]) -> None:
    """Raise UnicodeDecodeError if any (nested) field name is not UTF-8: pyarrow decodes names lazily, so a
    corrupt name would otherwise surface deep inside a reader (e.g. in ``to_pylist``)."""
    for f in fields:
        _ = f.name
        t = f.type
        _check_names([t.field(i) for i in range(t.num_fields)] if hasattr(t, "field") else [])


def read_arrow_file(data: bytes, kind: str, what: str) -> pa.Table:
    """Decode an Arrow metadata file (a zstd frame holding an Arrow IPC stream), checking that it is complete,
    of ``kind``, and not from the future."""
    if not data:
        raise CorruptMetadataError(f"{what} is empty")
    try:
        if data[:4] != ZSTD_MAGIC:
            raise CorruptMetadataError(f"{what} is not a lakefmt metadata file (unknown leading bytes {data[:6]!r})")
        table = pa.ipc.open_stream(pa.py_buffer(_decompress(data, what))).read_all()
        # Corrupt bytes can decode into arrays with impossible offsets or invalid UTF-8 that crash the
        # process later (a C++ check failure in to_pylist): full validation costs ~25 ns per entry.
        table.validate(full=True)
        _check_names(list(table.schema))
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # incl. NotImplemented, Memory errors
        raise CorruptMetadataError(f"{what} is not a readable Arrow stream (truncated or corrupt): {exc}") from exc
    meta = table.schema.metadata or {}
    if meta.get(KIND_KEY) != kind.encode():
        raise CorruptMetadataError(f"{what} is not a lakefmt {kind} file")
    raw = meta.get(VERSION_KEY, b"")
    try:
        version = int(raw)
    except ValueError as exc:
        raise CorruptMetadataError(f"{what}: invalid format version {raw!r}") from exc
    check_version(version, what)
    return table


def _decompress(data: bytes, what: str) -> bytes:
    """The content of one zstd frame, checked against its declared size and checksum."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CorruptMetadataError(f"{what} has a corrupt zstd frame header: {exc}") from exc
    if size < 0 or size > MAX_DECODED_BYTES:
        raise CorruptMetadataError(f"{what} declares an impossible decoded size ({size} bytes)")
    try:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out = frame.decompress(data)
    except zstandard.ZstdError as exc:
        raise CorruptMetadataError(f"{what} is truncated or corrupt (zstd: {exc})") from exc
    if not frame.eof:
        raise CorruptMetadataError(f"{what} is truncated (its zstd frame does not end)")
    if frame.unused_data:
        raise CorruptMetadataError(f"{what} has {len(frame.unused_data)} unexpected bytes after its zstd frame")
    if len(out) != size:
        raise CorruptMetadataError(f"{what} decodes to {len(out)} bytes, not the {size} its header declares")
    return out
