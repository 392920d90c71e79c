"""Compaction's data: a group of small files to rewrite together (:class:`CompactionGroup`), a plan of groups
(:class:`CompactionPlan`), and what a compaction did (:class:`CompactionReport`, :class:`GivenUp`). Planned in
:mod:`lakefmt.rewrite.compact.plan`, carried out in :mod:`lakefmt.rewrite.compact.run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.meta import entries as ents
from lakefmt.spec import Snapshot
from lakefmt.spec.partition import describe_partition

__all__ = ["CompactionGroup", "CompactionPlan", "CompactionReport", "GivenUp", "Partition", "describe", "partition_key"]

Partition = dict[str, Any]


def partition_key(partition: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((partition or {}).items(), key=lambda kv: kv[0]))


def describe(partition: Mapping[str, Any]) -> str:
    """``dt=2026-11-01``, ``dt=__null__`` (as the folder and ``lakefmt compact --partition`` spell a null)."""
    return describe_partition(partition) if partition else "(unpartitioned)"


@dataclass(frozen=True)
class CompactionGroup:
    """Input files rewritten together into new files: all in one partition (and, on a format-version-3 table,
    one bucket). Picklable (the entries are Arrow tables), so an engine ships it to the task that runs
    :func:`rewrite_group`.

    ``vectors``: on a format-version-3 table, the entry of the live deletion-vector file of the group's partition
    and bucket when it was planned (none if the bucket had no deleted row): its vectors mask the input files'
    rows when they are read (deleted rows are dropped, never rewritten), and the compaction's commit replaces it
    with a file holding only the vectors of the bucket's files it did not rewrite. ``deleted_rows``: how many
    rows of the input files those vectors delete."""

    group_id: str  #: also the writer id of its commit message, which is how a commit finds the group's files
    partition: Partition
    entries: pa.Table  #: ADD entries of the input files (manifest schema)
    vectors: pa.Table | None = None  #: ADD entries of the bucket's live deletion-vector file (at most one)
    deleted_rows: int = 0

    def __repr__(self) -> str:
        return (
            f"CompactionGroup({self.group_id!r}, partition={self.partition}, files={self.entries.num_rows}, "
            f"deleted_rows={self.deleted_rows})"
        )

    @property
    def paths(self) -> list[str]:
        """The input data files."""
        return ents.paths(self.entries)

    @property
    def vector_paths(self) -> list[str]:
        """The deletion-vector file(s) the group's commit replaces."""
        return [] if self.vectors is None else ents.paths(self.vectors)

    @property
    def inputs(self) -> list[str]:
        """Every file the group's commit removes: its data files and its bucket's deletion-vector file (a
        concurrent commit that removed any of them makes the group lose)."""
        return self.paths + self.vector_paths

    @property
    def bucket(self) -> int:
        """The bucket of the input files (0 on tables without buckets)."""
        if ents.BUCKET not in self.entries.column_names or self.entries.num_rows == 0:
            return 0
        return int(self.entries.column(ents.BUCKET)[0].as_py() or 0)

    @property
    def num_files(self) -> int:
        return int(self.entries.num_rows)

    @property
    def num_bytes(self) -> int:
        return int(pc.sum(self.entries.column(ents.FILE_SIZE)).as_py() or 0)

    @property
    def num_rows(self) -> int:
        """The live rows of the input files (their rows less those their deletion vectors delete)."""
        return int(pc.sum(self.entries.column(ents.ROW_COUNT)).as_py() or 0) - self.deleted_rows


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction rewrites, planned on one snapshot: groups of input files, and the totals of the live
    files in the planned scope (the partitions asked for, or the whole table) before it."""

    snapshot_id: int | None
    target_file_size: int
    sort_by: tuple[str, ...]
    groups: tuple[CompactionGroup, ...]
    files_before: int
    bytes_before: int
    min_files: int = 5
    tiered: bool = False

    @property
    def partitions(self) -> list[Partition]:
        """The partitions the plan rewrites files of, each once, in plan order."""
        seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
        for g in self.groups:
            seen.setdefault(partition_key(g.partition), g.partition)
        return list(seen.values())

    @property
    def num_files(self) -> int:
        return sum(g.num_files for g in self.groups)

    def __repr__(self) -> str:
        return (
            f"CompactionPlan(snapshot_id={self.snapshot_id}, groups={len(self.groups)}, files={self.num_files} of "
            f"{self.files_before}, bytes={self.num_bytes} of {self.bytes_before}, target_file_size="
            f"{self.target_file_size})"
        )

    @property
    def num_bytes(self) -> int:
        return sum(g.num_bytes for g in self.groups)


@dataclass(frozen=True)
class GivenUp:
    """A partition a compaction left as it was, and why (a concurrent commit removed its input files twice)."""

    partition: Partition
    reason: str


@dataclass
class CompactionReport:
    """What a compaction did (or, with ``dry_run``, would do). ``files_before``/``bytes_before``: the live files
    in the planned scope when it was planned; ``files_after``/``bytes_after``: the same, less the files rewritten
    plus the files written (commits that landed meanwhile not counted)."""

    dry_run: bool
    snapshot: Snapshot | None = None
    files_before: int = 0
    bytes_before: int = 0
    rewritten_files: int = 0
    rewritten_bytes: int = 0
    written_files: int = 0
    written_bytes: int = 0
    rows: int = 0
    #: rows dropped because deletion vectors deleted them (format version 3): read from the input files, not written
    purged_rows: int = 0
    partitions: list[Partition] = field(default_factory=list)  #: the partitions compacted
    given_up: list[GivenUp] = field(default_factory=list)
    replanned: list[Partition] = field(default_factory=list)  #: partitions re-planned after losing a race
    seconds: float = 0.0

    def __repr__(self) -> str:
        snap = f"snapshot={self.snapshot.id}, " if self.snapshot else ""
        after = "" if self.dry_run else f" -> {self.files_after} file(s), {self.bytes_after} bytes"
        return (
            f"CompactionReport({'dry run, ' if self.dry_run else ''}{snap}partitions={len(self.partitions)}, "
            f"{self.files_before} file(s), {self.bytes_before} bytes{after}, rewritten={self.rewritten_files}, "
            f"written={self.written_files}, rows={self.rows}, given_up={len(self.given_up)}, "
            f"seconds={self.seconds:.2f})"
        )

    @property
    def files_after(self) -> int:
        return self.files_before - self.rewritten_files + self.written_files

    @property
    def bytes_after(self) -> int:
        return self.bytes_before - self.rewritten_bytes + self.written_bytes

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (``--json``)."""
        return {
            "operation": "compact",
            "dry_run": self.dry_run,
            "snapshot": self.snapshot.id if self.snapshot else None,
            "files_before": self.files_before,
            "bytes_before": self.bytes_before,
            "files_after": None if self.dry_run else self.files_after,
            "bytes_after": None if self.dry_run else self.bytes_after,
            "rewritten_files": self.rewritten_files,
            "rewritten_bytes": self.rewritten_bytes,
            "written_files": None if self.dry_run else self.written_files,
            "written_bytes": None if self.dry_run else self.written_bytes,
            "rows": self.rows,
            "purged_rows": self.purged_rows,
            "partitions": self.partitions,
            "given_up": [{"partition": g.partition, "reason": g.reason} for g in self.given_up],
            "replanned": self.replanned,
            "seconds": round(self.seconds, 3),
        }
