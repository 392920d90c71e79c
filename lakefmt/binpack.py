"""Greedy, order-preserving bin packing: the manifest merge packs small manifests into target-size groups with
it, and scan planning packs data files into read tasks of about a split size."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["pack"]

T = TypeVar("T")


def pack(items: Sequence[T], size: Callable[[T], int], target: int) -> list[list[T]]:
    """Greedy, order-preserving bin packing: consecutive items go in one bin until it reaches ``target``."""
    bins: list[list[T]] = []
    current: list[T] = []
    total = 0
    for item in items:
        current.append(item)
        total += size(item)
        if total >= target:
            bins.append(current)
            current, total = [], 0
    if current:
        bins.append(current)
    return bins
