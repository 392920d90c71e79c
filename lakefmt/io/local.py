"""Local disk: atomic publish by hard link (a temp file in the same folder, fsync, ``os.link`` to the final
name, which fails if it is taken), atomic replace by rename, every path kept inside the root."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs

from lakefmt.errors import PathOutsideTableError
from lakefmt.io.fileio import FileInfo, FileIO
from lakefmt.io.paths import temp_name

__all__ = ["LocalFileIO"]


class LocalFileIO(FileIO):
    """Local disk. ``publish`` = write temp, fsync, ``os.link`` (fails if taken), unlink temp, fsync folder."""

    protocol = "file"
    ASYNC_PUTS = False

    def _make_fs(self) -> fsspec.AbstractFileSystem:
        return fsspec.filesystem("file")

    def _root_path(self) -> str:
        return self.uri  # normalized: an absolute path, however the location was written

    def local_path(self, rel: str) -> str | None:
        return self.full_path(rel)

    def read(self, rel: str) -> bytes:
        with open(self.full_path(rel), "rb") as f:
            return f.read()

    def write(self, rel: str, data: bytes, *, sync: bool = True) -> None:
        path = self.full_path(rel)
        self._makedirs_for(path)
        _write_file(path, data, sync)

    def open_output(self, rel: str) -> Any:
        path = self.full_path(rel)
        self._makedirs_for(path)
        return pa.OSFile(path, "wb")  # native stream: no Python call per Parquet page

    def sync(self, rel: str) -> None:
        _fsync_path(self.full_path(rel))

    def replace(self, rel: str, data: bytes, *, sync: bool = True) -> None:
        """Temp file beside the target, fsync, ``os.replace`` (an atomic rename on POSIX), fsync the folder."""
        path = self.full_path(rel)
        self._makedirs_for(path)
        tmp = temp_name(path)
        try:
            _write_file(tmp, data, sync)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if sync:
            _fsync_path(os.path.dirname(path))

    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        folder = os.path.dirname(path)
        tmp = temp_name(path)
        try:
            _write_file(tmp, data, sync)
            os.link(tmp, path)  # atomic, fails with FileExistsError if the name is taken
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # the temp file goes whatever happened
            raise
        # created: from here on no error may read as "not created" (not even a PermissionError)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if sync:
                _fsync_path(folder)
        except OSError as exc:
            raise OSError(errno.EIO, f"{path} was created, then {type(exc).__name__}: {exc}") from exc

    def list(self, rel_dir: str) -> list[str]:
        try:
            with os.scandir(self.full_path(rel_dir)) as it:
                return sorted(e.name for e in it if e.is_file(follow_symlinks=False) or e.is_symlink())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def walk(self) -> Iterator[FileInfo]:
        root = self.root
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            # a link to a folder is content too (it is never followed; deleting it removes the link only)
            links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
            for name in sorted(files + links):
                full = os.path.join(folder, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                yield FileInfo(rel, st.st_size, int(st.st_mtime * 1000))

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.full_path(rel))

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.full_path(rel))

    def _makedirs_for(self, path: str) -> None:
        """Create the file's folder, refusing first (before any folder is made) to go through a link that
        leads out of the root. A folder's containment is checked once per object (a commit writes several
        files into the same few folders, and resolving links costs a system call per path component)."""
        parent = os.path.dirname(path)
        checked: set[str] = self.__dict__.setdefault("_checked_folders", set())
        if parent not in checked:
            self._check_contained(path)
            if len(checked) > 4096:
                checked.clear()
            checked.add(parent)
        os.makedirs(parent, exist_ok=True)
        if os.path.islink(path):
            rel = os.path.relpath(path, self.root)
            raise PathOutsideTableError(f"{rel!r} is a link; lakefmt never writes through one")

    def _check_contained(self, path: str) -> None:
        """The folder a file goes into must resolve inside the root: a symlinked folder under the root that
        points elsewhere is never written through. (The root itself may be a link; it is resolved too.)"""
        folder = os.path.realpath(os.path.dirname(path))
        root = os.path.realpath(self.root)
        if folder != root and not folder.startswith(root.rstrip(os.sep) + os.sep):
            raise PathOutsideTableError(
                f"{os.path.relpath(path, self.root)!r} would be written to {folder}, outside the table root "
                f"{self.root}: a folder under the root is a link that leads out of it"
            )

    def arrow_filesystem(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()


def _write_file(path: str, data: bytes, sync: bool) -> None:
    """Write ``data`` to a new local file, fsynced before it is closed when ``sync``."""
    with open(path, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def _fsync_path(path: str) -> None:
    """fsync a local file or folder by path (a folder's fsync makes the names in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
