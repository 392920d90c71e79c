"""File tasks: the engine-neutral units a scan hands out (one data file to read, or consecutive files one engine
task reads together), and the keywords that make a scan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefmt.read.masks import Vector

__all__ = ["SCAN_KEYWORDS", "FileTask", "ReadTask", "split_scan_kwargs"]

#: the keywords of a scan (``Table.scan``): the table's shortcuts (``to_pandas``) pass the others on
SCAN_KEYWORDS = frozenset({"filter", "columns", "snapshot_id", "as_of", "from_snapshot", "to_snapshot", "tag"})


def split_scan_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` split into a scan's keywords and the rest."""
    scan = {k: v for k, v in kwargs.items() if k in SCAN_KEYWORDS}
    return scan, {k: v for k, v in kwargs.items() if k not in SCAN_KEYWORDS}


@dataclass(frozen=True, slots=True)
class FileTask:
    """One data file to read: path relative to the table root, full path on the filesystem, size, rows,
    its partition values, and the id of the schema it was written with (read it with
    :meth:`lakefmt.Table.read_files`, which matches its columns to the scan's schema by field id)."""

    path: str
    full_path: str
    file_size: int
    row_count: int
    partition: dict[str, Any]
    schema_id: int | None = None
    #: the file's deletion vector (rows to leave out, by position), if it has one: read it with
    #: :meth:`lakefmt.Table.read_files`, which applies it
    deletion_vector: Vector | None = None


@dataclass(frozen=True, slots=True)
class ReadTask:
    """Data files one engine task reads together: consecutive files of a scan, about a split size in all."""

    files: tuple[FileTask, ...]

    @property
    def paths(self) -> list[str]:
        """The files' paths relative to the table root."""
        return [f.path for f in self.files]

    @property
    def size(self) -> int:
        """The files' bytes on storage."""
        return sum(f.file_size for f in self.files)
