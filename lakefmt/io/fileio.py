"""FileIO: bytes and relative paths under one table root, over fsspec. Knows nothing of the format.

Guarantees per operation, on every backend:

* ``read``: the whole object or :class:`FileNotFoundError`. Never cached.
* ``write``: for uniquely named immutable files; may overwrite (names never repeat).
* ``publish``: put-if-absent. Exactly one of several racing callers gets ``True``; a reader never sees a
  partial object; a retry of a publish whose answer was lost still returns ``True`` (the object is read back
  and compared). How each backend gets there is documented on its ``_publish``.
* ``replace``: create or overwrite a small mutable file atomically: a reader sees the old bytes or the new,
  never a partial object (local disk: temp file, fsync, rename; S3: one PUT; memory: one assignment).
* ``list``: fresh (no listing cache), names only, sorted.
* ``delete``: idempotent; deleting a missing file is not an error.

``storage_options`` go to fsspec and nowhere else: not into metadata, ``repr`` or logs.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec
import pyarrow.fs as pafs

from lakefmt.errors import CommitStateUnknownError, NotATableError
from lakefmt.io.paths import check_relative, normalize_uri, temp_name
from lakefmt.io.storage import storage_errors
from lakefmt.retry import backoff

__all__ = ["FileIO", "FileInfo", "FsspecFileIO", "MemoryFileIO", "S3FileIO"]

#: errors that prove a publish created nothing: the store refused the request as a whole
DEFINITE_REFUSALS: tuple[type[BaseException], ...] = (
    PermissionError,
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
)


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file under the root: path relative to the root, size in bytes, modification time (ms since epoch)."""

    path: str
    size: int
    mtime_ms: int


def _mtime_ms(info: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    return 0


class FileIO(abc.ABC):
    """The storage contract, over an fsspec filesystem. Use :func:`file_io_for` for the backend of a URI.

    A backend implements :meth:`_publish` (the put-if-absent primitive) and says whether it is atomic
    (:attr:`atomic_publish`); everything else has working defaults over fsspec that backends may speed up.
    """

    protocol: str = "generic"
    #: errors of a publish attempt that prove nothing was created (the store refused the request as a whole);
    #: object stores have none, since their clients retry internally and an earlier try may have landed
    definite_refusals: tuple[type[BaseException], ...] = DEFINITE_REFUSALS
    #: whether :meth:`publish` is an atomic put-if-absent (exactly one of several racing callers wins); the
    #: committer refuses storage without it unless the table's options accept the risk
    atomic_publish: bool = True
    #: attempts of one publish whose outcome stays unknown (and of the read-back that resolves a taken name)
    PUBLISH_ATTEMPTS = 8
    #: whether a request whose answer was lost may still be applied later (object stores: yes; a local
    #: filesystem call that returned has finished)
    ASYNC_PUTS = True

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None) -> None:
        self.uri = normalize_uri(uri)  # one spelling per location: file:/x, file:///x and /x are one table
        self._storage_options = dict(storage_options or {})
        self._fs: fsspec.AbstractFileSystem | None = None
        self.root = self._root_path()

    # -- plumbing ---------------------------------------------------------------------------------------
    def _make_fs(self) -> fsspec.AbstractFileSystem:
        fs, _ = fsspec.core.url_to_fs(self.uri, **self._storage_options)
        return fs

    def _root_path(self) -> str:
        _, path = fsspec.core.url_to_fs(self.uri, **self._storage_options)
        return str(path).rstrip("/")

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The underlying fsspec filesystem (created lazily; not pickled)."""
        if self._fs is None:
            self._fs = self._make_fs()
        return self._fs

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None  # live clients and caches never travel to executors
        state.pop("_checked_folders", None)
        return state

    def explained(self) -> contextlib.AbstractContextManager[None]:
        """A block within which a storage client's failure (no credentials, an endpoint gone away) is raised as the
        lakefmt error that explains it (:func:`lakefmt.io.storage.storage_errors`)."""
        return storage_errors(self.uri, self._storage_options, opening=False)

    def __repr__(self) -> str:  # storage options deliberately left out
        return f"{type(self).__name__}({self.uri!r})"

    def full_path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (checked: it cannot leave the root)."""
        return f"{self.root}/{check_relative(rel)}"

    def local_path(self, rel: str) -> str | None:
        """The operating system's path of ``rel`` when the table is on local disk (a file can then be mapped into
        memory), else None."""
        return None

    def read_ranges(self, rel: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of ``rel`` for each of ``ranges`` (object stores fetch them concurrently)."""
        path = self.full_path(rel)
        if not ranges:
            return []
        out: list[bytes] = self.fs.cat_ranges([path] * len(ranges), [r[0] for r in ranges], [r[1] for r in ranges])
        for data in out:
            if isinstance(data, BaseException):
                raise data
        return out

    def new_temp_name(self, rel: str) -> str:
        """A unique sibling name for a temporary file that will become ``rel``."""
        return temp_name(rel)

    # -- operations -------------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes:
        """Read a whole file; :class:`FileNotFoundError` if it does not exist."""
        data: bytes = self.fs.cat_file(self.full_path(rel))
        return data

    def write(self, rel: str, data: bytes, *, sync: bool = True) -> None:
        """Write a uniquely named immutable file (creating parent folders). ``sync=False``: skip the fsync
        where the backend does one (local disk); the file survives a process crash, not a power loss."""
        path = self.full_path(rel)
        self._makedirs_for(path)
        self.fs.pipe_file(path, data)

    def open_output(self, rel: str) -> Any:
        """A writable binary stream (``write``, ``tell``, ``close``) for a uniquely named immutable file."""
        path = self.full_path(rel)
        self._makedirs_for(path)
        return self.fs.open(path, "wb")

    def sync(self, rel: str) -> None:
        """Make a closed file durable where the backend needs it (local disk: fsync). Object stores: no-op."""
        return None

    def replace(self, rel: str, data: bytes, *, sync: bool = True) -> None:
        """Create or overwrite ``rel`` with ``data`` atomically: a concurrent reader sees the old bytes or the
        new ones, never a mix or a partial file. For the few files of a table that change in place (consumer
        positions); last writer wins. S3: one PUT (atomic by the store); memory: one assignment; a generic
        fsspec filesystem: its ``pipe_file``, as atomic as that filesystem's writes. ``sync=False`` skips the
        fsyncs of local disk."""
        path = self.full_path(rel)
        self._makedirs_for(path)
        self.fs.pipe_file(path, data)

    def publish(self, rel: str, data: bytes, *, sync: bool = True) -> bool:
        """Create ``rel`` with ``data`` only if absent. ``True``: ours is there; ``False``: someone else's is.
        Atomic whatever ``sync`` says; ``sync=False`` skips the fsyncs that make it survive a power loss.

        An error whose outcome is unknown (anything but a definite refusal: a dropped connection, a timeout, a
        5xx, an ``EIO``) may have created the object, or may still create it (a request in flight). It is
        resolved by putting the same bytes again: the retry either creates the object or finds it taken, and
        then reading it back tells ours from someone else's. What stays unresolved after
        :attr:`PUBLISH_ATTEMPTS` attempts raises :class:`CommitStateUnknownError`: the caller must then not
        delete anything the object would reference. A definite refusal on the first attempt (permission, a
        missing bucket or folder) is raised as it is: nothing was created. An interrupt (``KeyboardInterrupt``)
        is never swallowed; its outcome is unknown to the caller too.
        """
        path = self.full_path(rel)
        self._makedirs_for(path)
        unknown: BaseException | None = None
        for delay in backoff(self.PUBLISH_ATTEMPTS):
            try:
                self._publish(path, data, sync)
                return True
            except FileExistsError:
                try:
                    return self._is_ours(rel, data)
                except FileNotFoundError:
                    return False  # taken, then gone: it was not ours (nobody deletes a published object)
            except self.definite_refusals:
                if unknown is None:
                    raise  # refused before anything of ours reached storage
                break
            except Exception as exc:
                unknown = exc
            if delay is not None:
                time.sleep(delay)
        # Out of attempts. A synchronous backend has no request in flight: what is there now is final
        if not self.ASYNC_PUTS:
            try:
                return self._is_ours(rel, data)
            except FileNotFoundError:
                assert unknown is not None
                raise unknown from None  # definitely not created
            except CommitStateUnknownError:
                pass
        raise CommitStateUnknownError(
            f"publishing {rel} failed {self.PUBLISH_ATTEMPTS} times and whether it was created is unknown "
            f"(last error: {type(unknown).__name__}: {unknown}); do not delete anything it references: retry "
            "with the same commit user and identifier, dedup makes that safe"
        ) from unknown

    @abc.abstractmethod
    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        """Create ``path`` with ``data``; raise ``FileExistsError`` if it exists. The backend's guarantee."""

    def _is_ours(self, rel: str, data: bytes) -> bool:
        """After a FileExistsError: is the object there the one we tried to put (a retried PUT whose first
        answer was lost)? One read through the backend's own ``read`` (a single GET on S3), retried while the
        read itself fails; :class:`CommitStateUnknownError` if it cannot be read at all."""
        error: BaseException | None = None
        for delay in backoff(self.PUBLISH_ATTEMPTS):
            try:
                existing = self.read(rel)
                return bool(existing == data)
            except FileNotFoundError:
                if error is None:
                    raise
            except Exception as exc:
                error = exc
            if delay is not None:
                time.sleep(delay)
        raise CommitStateUnknownError(
            f"{rel} exists but cannot be read back to tell whether it is ours ({type(error).__name__}: {error}); "
            "do not delete anything it references: retry with the same commit user and identifier"
        ) from error

    def list(self, rel_dir: str) -> list[str]:
        """Names (not paths) of the files directly inside ``rel_dir``, sorted; empty if it does not exist."""
        path = self.full_path(rel_dir)
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        names = [str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") != "directory"]
        return sorted(names)

    def walk(self) -> Iterator[FileInfo]:
        """Every file under the root, recursively, with size and modification time."""
        try:
            found = self.fs.find(self.root, detail=True)
        except FileNotFoundError:
            return
        prefix = self.root.rstrip("/") + "/"
        for name, info in sorted(found.items()):
            name = str(name)
            if not name.startswith(prefix) or info.get("type") == "directory":
                continue
            yield FileInfo(name[len(prefix) :], int(info.get("size") or 0), _mtime_ms(info))

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists (by reading its metadata; prefer ``read`` where the content is needed)."""
        return bool(self.fs.exists(self.full_path(rel)))

    def delete(self, rel: str) -> None:
        """Delete a file; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.full_path(rel))

    def delete_many(self, rels: Sequence[str]) -> None:
        """Delete several files (missing ones are not an error); object stores do it in bulk requests."""
        for rel in rels:
            self.delete(rel)

    def _makedirs_for(self, path: str) -> None:
        """Object stores need no folders; local and memory backends override (local disk also refuses a
        folder that is a link leading out of the root)."""
        return None

    # -- bridge to pyarrow ------------------------------------------------------------------------------
    def missing_bucket(self) -> str | None:
        """The bucket (or other container) the location names when it does not exist; None when it exists, when
        the storage has none, or when it cannot be told. Asked only when a table is not found or created."""
        return None

    def arrow_filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem on which :meth:`full_path` paths are valid."""
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))


class MemoryFileIO(FileIO):
    """fsspec's in-process memory filesystem (tests, notebooks). ``publish`` is check-and-set under a lock."""

    protocol = "memory"
    ASYNC_PUTS = False
    _lock = threading.Lock()

    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        with MemoryFileIO._lock:
            if self.fs.exists(path):
                raise FileExistsError(path)
            self.fs.pipe_file(path, data)

    def _makedirs_for(self, path: str) -> None:
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)


class S3FileIO(FileIO):
    """S3 through s3fs. ``publish`` = PutObject with ``If-None-Match: *``.

    A PUT that landed but whose answer was lost is retried (by botocore, or by :meth:`FileIO.publish` for a
    dropped connection, which botocore raises as a ``BotoCoreError``, not an ``OSError``) and then answered 412:
    the object is read back and compared, so the winner never mistakes its own write for a loss. AWS's 409
    ConditionalRequestConflict (a concurrent conditional PUT still in flight) surfaces as ``OSError(EIO)`` and
    is retried the same way. Listing caches are off, so a probe never sees a stale answer.
    """

    protocol = "s3"
    definite_refusals = ()

    def _make_fs(self) -> fsspec.AbstractFileSystem:
        options = {"use_listings_cache": False, "skip_instance_cache": True, **self._storage_options}
        return fsspec.filesystem("s3", **options)

    def _root_path(self) -> str:
        root = self.uri.partition("://")[2].rstrip("/")
        if not root or root.startswith("/"):
            raise NotATableError(f"{self.uri!r} names no bucket: an S3 table URI is s3://bucket/path")
        return root

    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        self.fs.pipe_file(path, data, mode="create")

    def missing_bucket(self) -> str | None:
        bucket = self._root_path().split("/", 1)[0]
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            return bucket
        except Exception:  # no permission to look, say: the operation that failed says why
            return None
        return None

    def delete_many(self, rels: Sequence[str]) -> None:
        if rels:  # one DeleteObjects request per 1,000 keys instead of a DELETE each
            self.fs.rm([self.full_path(rel) for rel in rels])

    def read(self, rel: str) -> bytes:
        # max_concurrency=1: one GET. Otherwise s3fs first HEADs for the size (and, for a missing key, LISTs
        # to rule out a folder), which doubles the cost of every metadata read and of every snapshot probe.
        data: bytes = self.fs.cat_file(self.full_path(rel), max_concurrency=1)
        return data


class FsspecFileIO(FileIO):
    """Any other fsspec filesystem. ``publish`` is fsspec's check-then-write: NOT atomic, so the committer
    refuses it unless the table option ``commit.allow-non-atomic-publish`` accepts the risk."""

    atomic_publish = False

    def _publish(self, path: str, data: bytes, sync: bool) -> None:
        self.fs.pipe_file(path, data, mode="create")
