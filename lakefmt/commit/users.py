"""The dedup memory a snapshot carries forward: each recent commit user's last identifier and commit time.

A user is forgotten only when its last commit is more than ``commit.user-retention`` older than a reference
time that one fast clock cannot push forward: the earlier of the committer's own clock and the lower median
of the *other* remembered users' last-commit times. So a host whose clock runs ahead (by any amount) cannot
make a user that committed within the retention be forgotten, unless at least half of the other remembered
users also committed from clocks that run ahead. The committing user's own entry is recorded no earlier than
that median, so a host whose clock runs behind cannot age out its own entry either. Times are wall-clock
times, never the snapshot's monotonic time (which one fast commit would push forward for every later commit).

The bound a writer can rely on: a commit user that stays silent for less than ``commit.user-retention``
(default 30 days) is still deduplicated when it comes back, as long as fewer than ``commit.user-max`` other
users committed since. A silent user may be remembered longer than that (until the reference time moves on).
The committing user is always kept, also when ``commit.user-max`` is reached with tied times.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakefmt.spec import Snapshot, UserMark

__all__ = ["already_committed", "next_commit_users", "reference_time"]


def already_committed(latest: Snapshot | None, user: str | None, identifier: int) -> bool:
    """Dedup: whether ``user`` committed ``identifier`` (or a later one) according to ``latest``. A one-off
    write (``user`` None) is never a replay."""
    if latest is None or user is None:
        return False
    mark = latest.commit_users.get(user)
    if mark is not None and identifier <= mark.identifier:
        return True
    return latest.commit_user == user and identifier <= latest.commit_identifier


def _others_median(users: Mapping[str, UserMark], committer: str | None) -> int | None:
    """The lower median of the other users' last-commit times (None if there are none)."""
    others = sorted(mark.time_millis for u, mark in users.items() if u != committer)
    return others[(len(others) - 1) // 2] if others else None


def reference_time(users: Mapping[str, UserMark], committer: str | None, clock_ms: int) -> int:
    """The time the retention horizon is measured from (see the module docstring)."""
    median = _others_median(users, committer)
    return clock_ms if median is None else min(clock_ms, median)


def next_commit_users(
    users: Mapping[str, UserMark],
    committer: str | None,
    identifier: int,
    clock_ms: int,
    *,
    retention_ms: int,
    max_users: int,
) -> dict[str, UserMark]:
    """The map the next snapshot carries: ``committer`` (None for a one-off write, which is not remembered)
    recorded with ``identifier`` at ``clock_ms``, users beyond the retention dropped, at most ``max_users``
    kept (the most recent first, the committer always)."""
    horizon = reference_time(users, committer, clock_ms) - retention_ms
    kept = {u: m for u, m in users.items() if u != committer and m.time_millis >= horizon}
    ranked = sorted(kept.items(), key=lambda um: (-um[1].time_millis, um[0]))  # newest first; ties by name
    out: dict[str, UserMark] = {}
    if committer is not None:
        # never recorded older than most other users say: a slow clock must not age out its own entry
        median = _others_median(users, committer)
        out[committer] = UserMark(identifier, clock_ms if median is None else max(clock_ms, median))
    for user, mark in ranked:
        if len(out) >= max_users:
            break
        out[user] = UserMark(*mark)
    return out
