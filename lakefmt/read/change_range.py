"""Where a change feed's range starts and ends: one convention per spelling.

lakefmt's own spellings start *after* a snapshot (``Table.changes(a, b)``, ``from_snapshot=``, ``scan(
from_snapshot=)``, ``lakefmt changes --from``, ``lakefmt_table_changes(uri, a)``), as incremental reads always did;
Delta's spellings start *at* one (``starting_version=``, ``starting_timestamp=`` as in delta-rs' ``load_cdf``;
Spark's ``startingVersion``), version 0 being the table's creation. Every end is inclusive. Both resolve to the
range ``(start, end]`` of snapshot ids that :func:`lakefmt.read.changes.read_changes` reads.
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from lakefmt.errors import InvalidOptionError, SnapshotNotFoundError
from lakefmt.io import FileIO
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import tagged_snapshot
from lakefmt.meta.versions import snapshot_as_of
from lakefmt.spec.instants import Instant, to_millis
from lakefmt.spec.snapshot import check_snapshot_id

__all__ = ["RangeSpellings", "change_range"]


class RangeSpellings(TypedDict, total=False):
    """The ends of a change range named otherwise than by ``from_snapshot``/``to_snapshot`` (:func:`change_range`)."""

    from_timestamp: Instant | None
    to_timestamp: Instant | None
    from_tag: str | None
    to_tag: str | None
    starting_version: int | None
    ending_version: int | None
    starting_timestamp: Instant | None
    ending_timestamp: Instant | None


def change_range(
    io: FileIO,
    store: MetaStore,
    *,
    from_snapshot: int | None = None,
    to_snapshot: int | None = None,
    now_ms: int,
    **spellings: Unpack[RangeSpellings],
) -> tuple[int, int]:
    """The range ``(start, end]`` of snapshot ids a change feed covers.

    lakefmt's spellings start *after* a snapshot: ``from_snapshot`` (0: from the first commit), ``from_timestamp``
    (the snapshot current then: changes committed after it) or ``from_tag``. Delta's spellings (delta-rs'
    ``load_cdf``) start *at* one: ``starting_version`` (the first snapshot read, inclusive; 0: from the table's
    creation, as snapshot ids start at 1) or ``starting_timestamp`` (changes committed at or after it). None: from
    the first commit. The end is inclusive in every spelling: ``to_snapshot`` or ``ending_version``,
    ``to_timestamp`` or ``ending_timestamp`` (the snapshot current then), ``to_tag``; none: the latest snapshot
    (0 for a table without commits). Each end is named once (:class:`InvalidOptionError` otherwise)."""
    from_timestamp, to_timestamp = spellings.get("from_timestamp"), spellings.get("to_timestamp")
    from_tag, to_tag = spellings.get("from_tag"), spellings.get("to_tag")
    starting_version, ending_version = spellings.get("starting_version"), spellings.get("ending_version")
    starting_timestamp, ending_timestamp = spellings.get("starting_timestamp"), spellings.get("ending_timestamp")
    starts = {
        "from_snapshot": from_snapshot, "from_timestamp": from_timestamp, "from_tag": from_tag,
        "starting_version": starting_version, "starting_timestamp": starting_timestamp,
    }  # fmt: skip
    ends = {
        "to_snapshot": to_snapshot, "to_timestamp": to_timestamp, "to_tag": to_tag,
        "ending_version": ending_version, "ending_timestamp": ending_timestamp,
    }  # fmt: skip
    for side, given in (("start", starts), ("end", ends)):
        named = [k for k, v in given.items() if v is not None]
        if len(named) > 1:
            raise InvalidOptionError(
                f"the change feed's {side} is named {len(named)} times ({', '.join(named)}): name it once, "
                f"with one of {', '.join(given)}"
            )
    start = 0
    if from_snapshot is not None:
        start = check_snapshot_id(from_snapshot, "from_snapshot", minimum=0)
    elif starting_version is not None:
        start = max(check_snapshot_id(starting_version, "starting_version", minimum=0) - 1, 0)
    elif from_timestamp is not None:
        start = _current_at(store, from_timestamp)
    elif starting_timestamp is not None:  # changes at or after it: those after the snapshot current a moment before
        start = _current_at(store, to_millis(starting_timestamp, "starting_timestamp") - 1)
    elif from_tag is not None:
        start = tagged_snapshot(io, from_tag, now_ms).snapshot_id
    if to_snapshot is not None:
        end = check_snapshot_id(to_snapshot, "to_snapshot")
    elif ending_version is not None:  # 0: up to the table's creation, which changed no row
        end = check_snapshot_id(ending_version, "ending_version", minimum=0)
    elif (at := to_timestamp if to_timestamp is not None else ending_timestamp) is not None:
        end = snapshot_as_of(store, at).id
    elif to_tag is not None:
        end = tagged_snapshot(io, to_tag, now_ms).snapshot_id
    else:
        latest = store.latest_snapshot()
        end = latest.id if latest is not None else 0
    if start > end:
        first = f"starting_version {starting_version}" if starting_version is not None else f"after snapshot {start}"
        raise InvalidOptionError(
            f"the change feed's range starts after it ends: it starts {first} and ends at snapshot {end}"
        )
    return start, end


def _current_at(store: MetaStore, instant: Instant) -> int:
    """The id of the snapshot current at ``instant``; 0 before the first commit (every commit is after it)."""
    try:
        return snapshot_as_of(store, instant).id
    except SnapshotNotFoundError:
        return 0
