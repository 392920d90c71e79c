"""After a publish on a table that expires snapshots after every commit: is the new snapshot in the table's
history, or did it take an id that a concurrent expiration had freed?

Exclusive create only says a name is free *now*. If, while a commit runs, other committers publish ``L+1`` and
``L+2`` and an expiration deletes ``L`` and ``L+1``, the commit's create of ``snapshot-(L+1)`` succeeds under a
deleted name, outside the history. Expiration deletes the oldest first and never the latest, so while the new
snapshot's parent is still there nothing after it was expired: one GET answers in the usual case.
"""

from __future__ import annotations

from lakefmt.commit.types import CommitRequest
from lakefmt.errors import CommitStateUnknownError
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot

__all__ = ["verify_in_history"]


def verify_in_history(store: MetaStore, snap: Snapshot, request: CommitRequest) -> None:
    """Return if ``snap`` (just published for ``request``) is in the history; otherwise, or if that cannot be
    checked, raise :class:`CommitStateUnknownError` (never "not landed": nothing of the commit may go)."""
    try:
        if _in_history(store, snap, request):
            return
    except Exception as exc:
        raise CommitStateUnknownError(
            f"snapshot {snap.id} was published, but checking that expiration had not freed its id failed "
            f"({type(exc).__name__}: {exc}); do not delete this commit's files: retry with the same commit "
            "user and identifier, or check the table before re-running a one-off write"
        ) from exc
    raise CommitStateUnknownError(
        f"snapshot {snap.id} was published, but newer snapshots exist and its parent was expired while this "
        "commit ran: its id may have been freed by an expiration, and then it is not part of the table's history. "
        "Do not delete this commit's files; retry with the same commit user and identifier (dedup tells whether "
        "it landed), or check the table before re-running a one-off write"
    )


def _in_history(store: MetaStore, snap: Snapshot, request: CommitRequest) -> bool:
    if snap.id > 1 and store.try_snapshot(snap.id - 1) is not None:
        return True  # the parent is still there: nothing after it was expired
    ids = store.snapshot_ids()
    if not ids or ids[-1] <= snap.id:
        return True  # nothing after it: the parent was expired after this commit landed
    latest = store.latest_snapshot(strict=True)
    mark = latest.commit_users.get(request.user) if latest is not None and request.user is not None else None
    return mark is not None and mark.identifier >= request.identifier  # a later snapshot carries it forward
