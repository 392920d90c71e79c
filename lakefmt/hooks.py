"""Observation points in the commit path, for tests and tools (fault injection, crash tests, tracing).

A hook is called as ``hook(phase, snapshot)`` with phase ``"before-publish"`` (the commit's manifests and lists
are written, the snapshot not yet) or ``"after-publish"`` (the snapshot landed; the after-commit work has not
run yet). A hook that raises changes what the committer sees there, which is the point for fault tests; in
production no hook is registered and the cost is one empty loop.

>>> remove = add_publish_hook(lambda phase, snap: print(phase, snap.id))
>>> remove()
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from lakefmt.spec import Snapshot

__all__ = ["Phase", "PublishHook", "add_publish_hook", "fire_publish"]

Phase = Literal["before-publish", "after-publish"]
PublishHook = Callable[[Phase, Snapshot], None]

_hooks: list[PublishHook] = []
_lock = threading.Lock()


def add_publish_hook(hook: PublishHook) -> Callable[[], None]:
    """Register ``hook`` for every commit in this process; returns a function that removes it."""
    with _lock:
        _hooks.append(hook)

    def remove() -> None:
        with _lock:
            if hook in _hooks:
                _hooks.remove(hook)

    return remove


def fire_publish(phase: Phase, snap: Snapshot) -> None:
    """Call the registered hooks (in registration order)."""
    for hook in list(_hooks):
        hook(phase, snap)
