"""What snapshot expiration must keep, whatever the retention rules say: *holds*.

A hold keeps every snapshot whose id is at least its ``snapshot_id`` (expiration only ever removes a contiguous
run of the oldest snapshots, so keeping one snapshot keeps every later one too). Holds can only shrink what an
expiration removes, never grow it: a hold at 0, 1 or below the earliest snapshot keeps everything; one past the
latest snapshot keeps nothing.

Today the holds are the table's live consumers (:mod:`lakefmt.meta.consumers`): a consumer holds from its
``next_snapshot`` until its record is older than the table option ``consumer.expiration-time``. Tags, later,
hold their snapshot the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakefmt.meta.consumers import list_consumers
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Consumer, Snapshot

__all__ = ["HeldBack", "Hold", "TableHolds", "apply_holds", "table_holds"]


@dataclass(frozen=True)
class Hold:
    """Keep every snapshot with id >= ``snapshot_id``, on behalf of ``kind`` ``name`` (e.g. consumer ``silver``)."""

    kind: str
    name: str
    snapshot_id: int


@dataclass(frozen=True)
class HeldBack:
    """A hold, and how many snapshots it keeps that the retention rules alone would have expired."""

    hold: Hold
    snapshots: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.hold.kind,
            "name": self.hold.name,
            "snapshot_id": self.hold.snapshot_id,
            "snapshots_held": self.snapshots,
        }


@dataclass(frozen=True)
class TableHolds:
    """The holds a table's own metadata asks for, and the consumers that no longer hold anything because
    their record is older than ``consumer.expiration-time`` (expiration deletes their records)."""

    holds: tuple[Hold, ...] = ()
    expired_consumers: tuple[Consumer, ...] = ()


def table_holds(store: MetaStore, now_ms: int) -> TableHolds:
    """The table's holds: one per consumer whose record is younger than ``consumer.expiration-time``.

    A consumer file that cannot be read raises :class:`CorruptMetadataError` (truncated, malformed) or
    :class:`UnsupportedFormatVersionError` (from a newer format): expiration cannot know what that consumer
    needs, so it expires nothing until the file is repaired or deleted (the safe side; the error says how)."""
    listing = list_consumers(store.io)
    consumers = listing.check()
    expiration_ms = store.latest_schema().table_options.consumer_expiration_ms
    live = [c for c in consumers if not c.expired(expiration_ms, now_ms)]
    expired = [c for c in consumers if c.expired(expiration_ms, now_ms)]
    return TableHolds(tuple(Hold("consumer", c.consumer_id, c.next_snapshot) for c in live), tuple(expired))


def apply_holds(snapshots: Sequence[Snapshot], count: int, holds: Sequence[Hold]) -> tuple[int, tuple[HeldBack, ...]]:
    """Cap ``count`` (how many of the oldest ``snapshots`` the retention rules expire) so that no held snapshot
    goes; return the new count and, per hold, how many of the ``count`` snapshots it alone would keep."""
    held: list[HeldBack] = []
    capped = count
    for hold in holds:
        first_kept = next((i for i, s in enumerate(snapshots[:count]) if s.id >= hold.snapshot_id), count)
        held.append(HeldBack(hold, count - first_kept))
        capped = min(capped, first_kept)
    return capped, tuple(held)
