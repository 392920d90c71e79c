"""The consumer store: one small JSON file per consumer under ``consumer/`` (``consumer/consumer-<id>``, as in
Paimon), each overwritten in place, atomically, when its consumer moves. Reading, recording and deleting
positions through a FileIO; what expiration makes of them lives in :mod:`lakefmt.maintenance.holds`."""

from __future__ import annotations

from dataclasses import dataclass

from lakefmt.errors import (
    ConsumerNotFoundError,
    CorruptMetadataError,
    InvalidSnapshotIdError,
    UnsupportedFormatVersionError,
)
from lakefmt.io import FileIO
from lakefmt.spec import Consumer, layout
from lakefmt.spec.consumer import MAX_SNAPSHOT_ID, check_consumer_id, parse_consumer_name

__all__ = [
    "ConsumerListing",
    "UnreadableConsumer",
    "delete_consumer",
    "delete_consumer_if_unchanged",
    "list_consumers",
    "read_consumer",
    "write_consumer",
]


@dataclass(frozen=True)
class UnreadableConsumer:
    """A consumer file that exists but cannot be used: empty, truncated, malformed, or from a newer format."""

    consumer_id: str
    path: str  #: relative to the root
    error: str
    newer_format: bool = False  #: written by a newer format version (upgrade lakefmt), not damaged


@dataclass(frozen=True)
class ConsumerListing:
    """Every consumer file of a table: the readable ones (by id) and the unreadable ones."""

    consumers: tuple[Consumer, ...] = ()
    unreadable: tuple[UnreadableConsumer, ...] = ()

    def check(self) -> tuple[Consumer, ...]:
        """The consumers; :class:`CorruptMetadataError` naming every unreadable file and what to do about it
        (:class:`UnsupportedFormatVersionError` if one is from a newer format version)."""
        if self.unreadable:
            errors = "; ".join(u.error for u in self.unreadable)
            ids = ", ".join(repr(u.consumer_id) for u in self.unreadable)
            error = (
                UnsupportedFormatVersionError
                if any(u.newer_format for u in self.unreadable)
                else CorruptMetadataError
            )
            raise error(
                f"{errors}. Snapshot expiration expires nothing while a consumer's record cannot be read: repair "
                f"it, or delete the record of {ids} if that consumer is gone (lakefmt consumers URI --delete ID, "
                "or Table.delete_consumer)"
            )
        return self.consumers


def read_consumer(io: FileIO, consumer_id: str) -> Consumer | None:
    """One consumer's record, or None if it has none; :class:`CorruptMetadataError` (or
    :class:`UnsupportedFormatVersionError`) if its file cannot be used."""
    path = layout.consumer_path(check_consumer_id(consumer_id))
    try:
        data = io.read(path)
    except FileNotFoundError:
        return None
    consumer = Consumer.from_json(data, what=f"consumer file {path}")
    if consumer.consumer_id != consumer_id:  # e.g. an operator's copy of another consumer's file
        raise CorruptMetadataError(
            f"consumer file {path} holds consumer {consumer.consumer_id!r}; its id must match its name"
        )
    return consumer


def list_consumers(io: FileIO) -> ConsumerListing:
    """Every consumer file (one LIST, then one read each). Other names in ``consumer/`` (temp files of
    interrupted writes, anything else) are not consumers and are skipped; a consumer file that cannot be read
    is listed as unreadable, never skipped."""
    good: list[Consumer] = []
    bad: list[UnreadableConsumer] = []
    for name in io.list(layout.CONSUMER_DIR):
        consumer_id = parse_consumer_name(name)
        if consumer_id is None:
            continue
        try:
            consumer = read_consumer(io, consumer_id)
        except (CorruptMetadataError, UnsupportedFormatVersionError) as exc:
            newer = isinstance(exc, UnsupportedFormatVersionError)
            bad.append(UnreadableConsumer(consumer_id, layout.consumer_path(consumer_id), str(exc), newer))
            continue
        if consumer is not None:  # deleted since the listing
            good.append(consumer)
    return ConsumerListing(tuple(good), tuple(bad))


def write_consumer(io: FileIO, consumer: Consumer, *, sync: bool = True) -> None:
    """Record ``consumer`` (create its file, or replace it atomically: readers see the old position or the new)."""
    check_consumer_id(consumer.consumer_id)
    io.replace(layout.consumer_path(consumer.consumer_id), consumer.to_json(), sync=sync)


def delete_consumer(io: FileIO, consumer_id: str) -> None:
    """Delete a consumer's file (a missing one is not an error here; the caller decides)."""
    io.delete(layout.consumer_path(check_consumer_id(consumer_id)))


def delete_consumer_if_unchanged(io: FileIO, consumer: Consumer) -> bool:
    """Delete a consumer's file only if it still records exactly ``consumer`` (it has not moved since it was
    read, e.g. by an expiration that found it stale); whether it was deleted. A consumer that records a new
    position between this read and the delete loses its record until it records the next one."""
    try:
        current = read_consumer(io, consumer.consumer_id)
    except (CorruptMetadataError, UnsupportedFormatVersionError):
        return False
    if current != consumer:
        return False
    io.delete(layout.consumer_path(consumer.consumer_id))
    return True


def record_consumer(io: FileIO, consumer_id: str, next_snapshot: int, *, now_ms: int, sync: bool = True) -> None:
    """:meth:`lakefmt.Table.set_consumer`: ``consumer_id`` checked (:class:`InvalidConsumerIdError`),
    ``next_snapshot`` a snapshot id (``TypeError``, :class:`InvalidSnapshotIdError`), then one atomic write."""
    check_consumer_id(consumer_id)
    if isinstance(next_snapshot, bool) or not isinstance(next_snapshot, int):
        raise TypeError(f"next_snapshot must be a whole number, got {next_snapshot!r}")
    if not 1 <= next_snapshot <= MAX_SNAPSHOT_ID:
        raise InvalidSnapshotIdError(
            f"next_snapshot {next_snapshot} is invalid: a consumer's next snapshot is a snapshot id (1 or more)"
        )
    write_consumer(io, Consumer(consumer_id, next_snapshot, now_ms), sync=sync)


def delete_consumer_named(io: FileIO, consumer_id: str, uri: str) -> None:
    """Delete consumer ``consumer_id``'s record (also an unreadable one); :class:`ConsumerNotFoundError` naming the
    table (``uri``) and its consumers if there is none."""
    path = layout.consumer_path(check_consumer_id(consumer_id))
    try:
        io.read(path)
    except FileNotFoundError:
        known = ", ".join(c.consumer_id for c in list_consumers(io).consumers) or "none"
        raise ConsumerNotFoundError(f"{uri} has no consumer {consumer_id!r} (its consumers: {known})") from None
    delete_consumer(io, consumer_id)
