"""The progress callback of long operations (maintenance, compaction): called as ``progress(done, total, what)``;
the CLI draws a bar with it."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

#: called as progress(done, total, what) during long runs; the CLI draws a bar with it
Progress = Callable[[int, int, str], None]
