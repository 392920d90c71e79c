"""Reads of a snapshot that expires under them: a file missing because an expiration deleted it (or an interrupted
one left the snapshot half-deleted) is :class:`~lakefmt.errors.SnapshotNotFoundError` naming the snapshot, not the
storage's error. A file missing from a retained snapshot is not called expired: its error stands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lakefmt.errors import MissingMetadataError, SnapshotNotFoundError
from lakefmt.meta.store import MetaStore

__all__ = ["expired_reads"]


@contextlib.contextmanager
def expired_reads(store: MetaStore, snapshot_id: int, reader: str) -> Iterator[None]:
    """Within the block, ``reader`` (``"this scan"``) reads files of snapshot ``snapshot_id``."""
    try:
        yield
    except (OSError, MissingMetadataError) as exc:  # OSError: also an object store's error for a missing object
        try:
            reason = store.expiring(snapshot_id)
        except Exception:  # unknown: the read's own error is raised
            reason = None
        if reason is None:
            raise
        raise SnapshotNotFoundError(
            f"{reason}, and files {reader} needs were deleted while it read them: plan the read again (a tag, or a "
            "consumer of the streaming source, keeps a snapshot from expiring)"
        ) from exc
