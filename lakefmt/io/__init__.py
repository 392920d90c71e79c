"""Storage: bytes and relative paths under a table root. No knowledge of the table format."""

from lakefmt.io.backend import file_io_for
from lakefmt.io.fileio import FileInfo, FileIO, MemoryFileIO, S3FileIO
from lakefmt.io.local import LocalFileIO
from lakefmt.io.paths import check_relative, normalize_uri

__all__ = [
    "FileIO",
    "FileInfo",
    "LocalFileIO",
    "MemoryFileIO",
    "S3FileIO",
    "check_relative",
    "file_io_for",
    "normalize_uri",
]
