"""Shared decoding guards: every metadata file is checked for emptiness, syntax and format version."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from lakefmt.errors import CorruptMetadataError, UnsupportedFormatVersionError

__all__ = [
    "FORMAT_VERSION",
    "check_version",
    "decode_json",
    "encode_json",
    "read_arrow_file",
    "write_arrow_file",
]

#: The format version this library writes and the newest it reads.
FORMAT_VERSION = 1

VERSION_KEY = b"lakefmt.format-version"
KIND_KEY = b"lakefmt.kind"


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
    """Compact, deterministic JSON (sorted keys are not needed: field order is fixed by the writers)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2)


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


def write_arrow_file(table: pa.Table, kind: str) -> bytes:
    """Encode ``table`` as an Arrow IPC file (zstd), tagged with its kind and the format version."""
    meta = dict(table.schema.metadata or {})
    meta[KIND_KEY] = kind.encode()
    meta[VERSION_KEY] = str(FORMAT_VERSION).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_file(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _check_names(fields: list[pa.Field]) -> None:
    """Raise UnicodeDecodeError if any (nested) field name is not UTF-8: pyarrow decodes names lazily, so a
    corrupt name would otherwise surface deep inside a reader (e.g. in ``to_pylist``)."""
    for f in fields:
        _ = f.name
        t = f.type
        _check_names([t.field(i) for i in range(t.num_fields)] if hasattr(t, "field") else [])


def read_arrow_file(data: bytes, kind: str, what: str) -> pa.Table:
    """Decode an Arrow IPC metadata file, checking that it is complete, of ``kind``, and not from the future."""
    if not data:
        raise CorruptMetadataError(f"{what} is empty")
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        table = reader.read_all()
        # Corrupt bytes can decode into arrays with impossible offsets or invalid UTF-8 that crash the
        # process later (a C++ check failure in to_pylist): full validation costs ~25 ns per entry.
        table.validate(full=True)
        _check_names(list(table.schema))
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # incl. NotImplemented, Memory errors
        raise CorruptMetadataError(f"{what} is not a readable Arrow file (truncated or corrupt): {exc}") from exc
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
