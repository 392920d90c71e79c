"""The small named types the commit path passes around: what a commit asks for, how it ended."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from lakefmt.spec import ManifestFileMeta, Snapshot

__all__ = ["CommitOutcome", "CommitRequest", "CommitResult", "ListRef"]


class CommitOutcome(enum.Enum):
    """How a commit call ended, when it did not raise."""

    COMMITTED = "committed"  #: a new snapshot was published
    ALREADY_COMMITTED = "already-committed"  #: this (user, identifier) had landed before: nothing done
    NOTHING_TO_COMMIT = "nothing-to-commit"  #: no file added or removed: no snapshot written


@dataclass(frozen=True)
class CommitResult:
    """The outcome of a commit, and the snapshot it published (COMMITTED only)."""

    outcome: CommitOutcome
    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class CommitRequest:
    """What one commit asks for: who (``user`` None: a one-off write, never remembered for dedup; ``name``
    is written as ``commitUser`` either way), which identifier, the writers' manifests, and extras."""

    user: str | None
    name: str
    identifier: int
    added: Sequence[ManifestFileMeta]
    watermark: int | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


class ListRef(NamedTuple):
    """A manifest list written for a snapshot: its file name and size (and, for a changelog list, its rows)."""

    name: str
    size: int
    rows: int = 0
