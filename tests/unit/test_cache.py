"""``lakefmt.cache.BoundedCache``: least recently used out first, bounded by count and by size, the newest entry
always kept, safe to share between threads."""

from __future__ import annotations

import threading

from lakefmt.cache import BoundedCache


def test_least_recently_used_goes_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2


def test_bounded_by_size_and_the_newest_is_kept_even_alone_over_it() -> None:
    cache: BoundedCache[str, bytes] = BoundedCache(max_bytes=10, sizeof=len)
    cache.put("a", b"1234")
    cache.put("b", b"5678")
    assert cache.bytes == 8
    cache.put("c", b"90")  # 10: fits
    assert len(cache) == 3 and cache.bytes == 10
    cache.put("d", b"x")  # 11: a goes
    assert "a" not in cache and cache.bytes == 7
    cache.put("huge", b"y" * 50)
    assert list(cache._items) == ["huge"] and cache.bytes == 50
    cache.put("huge", b"z")  # replaced: its old size no longer counts
    assert cache.bytes == 1


def test_get_default_setdefault_pop_and_clear() -> None:
    cache: BoundedCache[str, int | None] = BoundedCache()
    missing = object()
    assert cache.get("x") is None and cache.get("x", missing) is missing
    cache.put("none", None)  # a None value is a value
    assert cache.get("none", missing) is None and "none" in cache
    assert cache.setdefault("k", 1) == 1 and cache.setdefault("k", 2) == 1
    assert cache.pop("k") == 1 and cache.pop("k") is None
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0


def test_threads_share_one_value_and_the_bounds_hold() -> None:
    cache: BoundedCache[int, list[int]] = BoundedCache(max_entries=50, max_bytes=400, sizeof=len)
    broken: list[str] = []

    def work(worker: int) -> None:
        for i in range(2000):
            key = i % 80
            mine = [worker] * (key % 9 + 1)
            got = cache.setdefault(key, mine)
            if got != [got[0]] * (key % 9 + 1):
                broken.append(f"key {key} holds {got}")
            if len(cache) > 50 or cache.bytes > 400:
                broken.append(f"over the bounds: {len(cache)} entries, {cache.bytes} bytes")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not broken, broken[:3]
    assert len(cache) <= 50 and cache.bytes == sum(len(v) for v, _ in cache._items.values())
