"""Which snapshot a version names: by time (the latest committed at or before an instant), and, for a restore or
any other command that takes one of several spellings, by id, tag or time."""

from __future__ import annotations

from lakefmt.errors import InvalidOptionError, SnapshotNotFoundError
from lakefmt.io import FileIO
from lakefmt.meta import tags as tags_store
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot
from lakefmt.spec.instants import Instant, format_instant, seconds_hint
from lakefmt.spec.instants import to_millis as _to_millis
from lakefmt.spec.snapshot import check_snapshot_id
from lakefmt.spec.tag import check_tag_name

__all__ = ["snapshot_as_of", "version"]


def snapshot_as_of(store: MetaStore, as_of: Instant) -> Snapshot:
    """The latest snapshot committed at or before ``as_of`` (any :data:`~lakefmt.spec.instants.Instant`; binary
    search over retained snapshots)."""
    millis = _to_millis(as_of)
    ids = store.snapshot_ids()
    latest = store.latest_snapshot()
    if latest is not None and (not ids or ids[-1] < latest.id):
        ids.append(latest.id)
    times: dict[int, int] = {}

    def time_of(i: int) -> int:
        if i not in times:
            times[i] = store.snapshot(ids[i]).time_millis
        return times[i]

    lo, hi = 0, len(ids)
    while lo < hi:  # first index with time > millis
        mid = (lo + hi) // 2
        if time_of(mid) <= millis:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        earliest = time_of(0) if ids else None
        first = "" if earliest is None else f"; the earliest retained snapshot is from {format_instant(earliest)}"
        raise SnapshotNotFoundError(
            f"no snapshot was committed at or before {format_instant(millis)}{first}{seconds_hint(millis, earliest)}"
        )
    return store.snapshot(ids[lo - 1])


def version(
    io: FileIO, store: MetaStore, snapshot_id: int | None, tag: str | None, as_of: Instant | None, now_ms: int
) -> Snapshot:
    """The snapshot named by exactly one of ``snapshot_id``, ``tag`` (its own copy: it reads after the snapshot
    expired) or ``as_of`` (:class:`InvalidOptionError` for none or several)."""
    given = [n for n, v in (("snapshot_id", snapshot_id), ("tag", tag), ("as_of", as_of)) if v is not None]
    if len(given) != 1:
        got = given or "none"
        raise InvalidOptionError(f"name the version to restore: one of snapshot_id, tag or as_of, got {got}")
    if tag is not None:
        return tags_store.tagged_snapshot(io, check_tag_name(tag), now_ms).snapshot
    if snapshot_id is not None:
        return store.snapshot(check_snapshot_id(snapshot_id))
    assert as_of is not None
    return snapshot_as_of(store, as_of)
