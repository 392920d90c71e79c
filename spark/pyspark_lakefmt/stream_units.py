"""The pieces a stream reader plans with: what each snapshot means to a stream (:func:`snapshot_rule`), a
position in the table's history (:class:`Position`, the offsets Spark checkpoints), a micro-batch's read tasks
(:func:`plan_read_tasks`, :class:`StreamPartition`) and its admission budget (:class:`Budget`). The reader that
uses them, and the offset format, are in :mod:`pyspark_lakefmt.stream_reader`."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

import lakefmt
from lakefmt.options import InvalidOptionError
from lakefmt.spec.consumer import check_consumer_id

from .reader import READ_SPLIT_BYTES

__all__ = [
    "CONSUMER_RENEW_SECONDS",
    "OPEN_COST_BYTES",
    "PENDING",
    "Budget",
    "ConsumerRecorder",
    "KindRule",
    "Position",
    "StreamPartition",
    "consumer_id_option",
    "pending_origin",
    "plan_read_tasks",
    "snapshot_rule",
]


class KindRule(enum.Enum):
    """What a stream does at a snapshot."""

    READ = "read"  # read the files it added
    SKIP = "skip"  # nothing new for a reader: the rows it rewrote were read already
    CHANGE = "change"  # it replaced or deleted rows: an error, unless skipChangeCommits


def snapshot_rule(kind: lakefmt.CommitKind, removes_rows: bool) -> KindRule:
    """What a stream does at a snapshot, decided by what its commit did to rows, not by its kind: a compaction
    (COMPACT) moved rows unchanged, SKIP; a commit that deleted or replaced rows that were live before it
    (``removes_rows``: :func:`lakefmt.read.removals.removes_rows`; an overwrite, a delete, an upsert that replaced a
    key's row, a row-kind delete, a MERGE) is a CHANGE; any other commit only added rows, READ (an append, an upsert
    of new keys, an overwrite of an empty scope)."""
    if kind is lakefmt.CommitKind.COMPACT:
        return KindRule.SKIP
    return KindRule.CHANGE if removes_rows else KindRule.READ


@dataclass(frozen=True, order=True)
class Position:
    """A stream position (see the module's docstring). Ordered by (snapshot, index): one stream never has an
    initial unit and an incremental unit at the same snapshot."""

    snapshot: int
    index: int = 0
    initial: bool = False

    def to_offset(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot, "index": self.index, "initial": self.initial}

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> Position:
        try:
            pos = cls(int(offset["snapshot"]), int(offset.get("index", 0)), bool(offset.get("initial", False)))
        except (KeyError, TypeError, ValueError):
            raise lakefmt.LakefmtError(f"{offset!r} is not a lakefmt stream offset") from None
        if pos.snapshot < 1 or pos.index < 0:
            raise lakefmt.LakefmtError(f"{offset!r} is not a lakefmt stream offset")
        return pos

    def unit_done(self) -> Position:
        return Position(self.snapshot + 1)


PENDING: dict[str, Any] = {"origin": "pending"}

#: a stream writes its consumer's record again after this many seconds even when it has not moved, so that an idle
#: stream's consumer does not expire (``consumer.expiration-time``)
CONSUMER_RENEW_SECONDS = 10.0


def consumer_id_option(options: Any) -> str | None:
    """The option ``consumerId``, checked (:class:`InvalidOptionError` naming the option when it cannot be one)."""
    consumer_id: str | None = options.get("consumerId")
    if consumer_id is not None:
        try:
            check_consumer_id(consumer_id)
        except lakefmt.LakefmtError as exc:
            raise InvalidOptionError(f"option consumerId: {exc}") from None
    return consumer_id


def pending_origin(
    start: Mapping[str, Any], end: Mapping[str, Any] | None, resolve: Callable[[], Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """For the pending initial offset (:data:`PENDING`): the origin the first micro-batch's ``end`` offset carries,
    or a freshly resolved one (``resolve()``) while that micro-batch is being planned; None when ``start`` names a
    snapshot already."""
    if "snapshot" in start:
        return None
    if end is None:
        return resolve()
    origin = end.get("origin")
    if not isinstance(origin, Mapping):
        raise lakefmt.LakefmtError(f"end offset {dict(end)!r} of the first micro-batch carries no origin")
    return origin


class ConsumerRecorder:
    """Writes a stream's consumer record (``consumerId``): when the position moved, or, with ``renew``, when the
    last write is older than :data:`CONSUMER_RENEW_SECONDS`."""

    def __init__(self, consumer_id: str | None) -> None:
        self.consumer_id = consumer_id
        self._recorded: tuple[int, float] | None = None  # the snapshot written, and when (monotonic)

    def record(self, table: lakefmt.Table, next_snapshot: int, *, renew: bool) -> None:
        if self.consumer_id is None:
            return
        now = time.monotonic()
        recorded = self._recorded
        if (
            recorded is not None
            and recorded[0] == next_snapshot
            and (not renew or now - recorded[1] < CONSUMER_RENEW_SECONDS)
        ):
            return
        table.set_consumer(self.consumer_id, next_snapshot)
        self._recorded = (next_snapshot, now)

#: Spark's ``spark.sql.files.openCostInBytes``: what opening a file is worth in bytes when files are packed
OPEN_COST_BYTES = 4 << 20


def plan_read_tasks(files: list[lakefmt.FileTask], parallelism: int) -> list[list[str]]:
    """A micro-batch's files (in order) as read tasks, the way Spark's file source splits a read: each file
    weighs its size plus :data:`OPEN_COST_BYTES`, and a task takes files up to ``min(READ_SPLIT_BYTES,
    max(OPEN_COST_BYTES, total weight / parallelism))``, so that a small micro-batch still spreads over the
    cores (a Python source cannot see Spark's ``defaultParallelism``: the driver's core count stands in for it).
    A file heavier than the split is a task of its own."""
    weight = [f.file_size + OPEN_COST_BYTES for f in files]
    split = min(READ_SPLIT_BYTES, max(OPEN_COST_BYTES, -(-sum(weight) // max(1, parallelism))))
    tasks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for f, w in zip(files, weight, strict=True):
        if current and size + w > split:
            tasks.append(current)
            current, size = [], 0
        current.append(f.path)
        size += w
    if current:
        tasks.append(current)
    return tasks


@dataclass
class StreamPartition(InputPartition):
    """One read task of a micro-batch: data files (each with the id of the schema it was written under) and the
    id of the schema the stream returns, which they are matched to by field id."""

    files: list[lakefmt.FileTask]
    schema_id: int | None = None

    @property
    def paths(self) -> list[str]:
        """The files' paths, relative to the table root."""
        return [f.path for f in self.files]


@dataclass
class Budget:
    """What a micro-batch may still admit; the first file is always admitted (progress)."""

    files: int | None
    bytes: int | None
    rows: int | None
    taken: int = 0
    taken_bytes: int = 0
    taken_rows: int = 0

    def admits(self, f: lakefmt.FileTask) -> bool:
        if self.taken == 0:
            return True
        return (
            (self.files is None or self.taken < self.files)
            and (self.bytes is None or self.taken_bytes + f.file_size <= self.bytes)
            and (self.rows is None or self.taken_rows + f.row_count <= self.rows)
        )

    def take(self, f: lakefmt.FileTask) -> None:
        self.taken += 1
        self.taken_bytes += f.file_size
        self.taken_rows += f.row_count
