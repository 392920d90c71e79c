"""A bounded map, least recently used out first: the one shape of every in-process cache of things that never change
once written (manifests, a snapshot's live entries, deletion-vector files, key indexes, row groups).

Bounded by a number of entries and by a total size (each value's size from ``sizeof``); the newest entry is kept
even when it alone exceeds the size, so that a caller that just built a value can always find it once. Safe to
share between threads: every method takes the cache's lock (``sizeof`` is called before it is taken).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, overload

__all__ = ["BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


def _no_size(value: object) -> int:
    return 0


class BoundedCache(Generic[K, V]):
    """At most ``max_entries`` values (None: any number) of at most ``max_bytes`` in all (None: any size), but
    never fewer than the newest one."""

    def __init__(
        self, max_entries: int | None = None, max_bytes: int | None = None, sizeof: Callable[[V], int] = _no_size
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._sizeof = sizeof
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        """The value of ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return default
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V) -> None:
        """Set ``key`` to ``value`` (replacing any), then drop the least recently used entries while over a bound."""
        size = self._sizeof(value)
        with self._lock:
            self._store(key, value, size)

    def setdefault(self, key: K, value: V) -> V:
        """The value of ``key`` if it has one, else ``value``, stored (two threads that built a value each share the
        first one stored)."""
        size = self._sizeof(value)
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found[0]
            self._store(key, value, size)
            return value

    def pop(self, key: K) -> V | None:
        """Forget ``key``; its value, or None."""
        with self._lock:
            found = self._items.pop(key, None)
            if found is None:
                return None
            self._bytes -= found[1]
            return found[0]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def bytes(self) -> int:
        """The total size of the values held."""
        with self._lock:
            return self._bytes

    def _store(self, key: K, value: V, size: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._items[key] = (value, size)
        self._bytes += size
        while len(self._items) > 1 and self._over():
            _, (_, gone) = self._items.popitem(last=False)
            self._bytes -= gone

    def _over(self) -> bool:
        return (self.max_entries is not None and len(self._items) > self.max_entries) or (
            self.max_bytes is not None and self._bytes > self.max_bytes
        )
