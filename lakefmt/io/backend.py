"""Which FileIO a location gets: local disk, memory, S3 (s3fs) or any other fsspec protocol."""

from __future__ import annotations

from typing import Any

from lakefmt.io.fileio import FileIO, FsspecFileIO, MemoryFileIO, S3FileIO
from lakefmt.io.local import LocalFileIO
from lakefmt.io.paths import normalize_uri
from lakefmt.io.storage import s3_storage_options

__all__ = ["file_io_for"]


def file_io_for(uri: str, storage_options: dict[str, Any] | None = None) -> FileIO:
    """The FileIO backend for ``uri``: a plain path or ``file://`` (local), ``memory://``, ``s3://``/``s3a://``,
    or any other fsspec protocol (generic; its publish is not atomic, so one committer per table)."""
    uri = normalize_uri(uri)
    if "://" not in uri:  # a local table: normalized to an absolute path
        return LocalFileIO(uri, storage_options)
    scheme = uri.split("://", 1)[0].lower()
    if scheme == "memory":
        return MemoryFileIO(uri, storage_options)
    if scheme in ("s3", "s3a"):
        if scheme == "s3a":
            uri = "s3://" + uri.split("://", 1)[1]
        return S3FileIO(uri, s3_storage_options(storage_options or {}))  # deltalake's keys translated
    return FsspecFileIO(uri, storage_options)
