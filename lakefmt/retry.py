"""One backoff schedule for every retry loop in lakefmt (publish, read-back, the committer's lost races)."""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = ["backoff"]


def backoff(attempts: int, first: float = 0.05, cap: float = 1.0) -> Iterator[float | None]:
    """Yield once per attempt: the sleep to take after that attempt fails before the next one (exponential
    from ``first`` up to ``cap``, with jitter so racing processes spread out), and None after the last attempt.

    >>> [d is None for d in backoff(3)]
    [False, False, True]
    """
    delay = first
    for attempt in range(attempts):
        if attempt == attempts - 1:
            yield None
        else:
            yield delay * (1 + random.random())
            delay = min(delay * 2, cap)
