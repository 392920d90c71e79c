"""The change data feed in Spark: ``.option("readChangeFeed", "true")`` on a batch or a streaming read.

Both return the table's columns, then ``_change_type`` (``insert``, ``update_preimage``, ``update_postimage``,
``delete``), ``_commit_snapshot``, ``_commit_version`` (the same id under Delta's name) and ``_commit_timestamp``,
computed by the core's :meth:`lakefmt.Table.changes` on the executors.

**Batch.** ``startingVersion`` (or ``startingSnapshot``; inclusive) or ``startingTimestamp`` (changes committed at
or after it) starts the range, ``endingVersion`` (inclusive) or ``endingTimestamp`` ends it (default: the latest
snapshot). The range is split into contiguous runs of snapshots, one read task each.

**Streaming.** An offset is ``{"snapshot": s}``: every snapshot before ``s`` has been read. A micro-batch reads the
changes of the snapshots it spans (each kind of commit: appends, overwrites, deletes, upserts; compactions yield no
row), so a delete no longer stops the stream. A stream without a start (``startingVersion`` / ``startingTimestamp``
/ a recorded ``consumerId``) first reads the table as of its latest snapshot as inserts (``{"snapshot": s,
"initial": true}``), as Delta does. As in :mod:`.stream_reader`, the initial offset is pending and the first
micro-batch's end offset carries the resolved start, so a replanned first micro-batch reads the same snapshots.
With ``consumerId`` the position is recorded on every commit as the last snapshot read (the next snapshot's changes
are computed against its files): expiration keeps it and every later snapshot.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

import lakefmt
from lakefmt.options import InvalidOptionError

from .options import Options, TableRef
from .stream_units import ConsumerRecorder, consumer_id_option, pending_origin

__all__ = [
    "COMMIT_VERSION",
    "FEED_OPTIONS",
    "ChangeFeedReader",
    "ChangeFeedStreamReader",
    "feed_schema",
]

#: Delta's name for the commit's snapshot id, a copy of ``_commit_snapshot``
COMMIT_VERSION = "_commit_version"
#: the options that only a change-feed read takes (a plain read given one is refused)
FEED_OPTIONS = ("startingSnapshot", "endingVersion", "startingTimestamp", "endingTimestamp")


def feed_schema(table: lakefmt.Table) -> pa.Schema:
    """The Arrow schema of the feed: the table's columns and the change columns, ``_commit_version`` after
    ``_commit_snapshot``."""
    base = lakefmt.change_schema(table.table_schema())
    at = base.get_field_index(lakefmt.COMMIT_SNAPSHOT) + 1
    stamp = base.get_field_index(lakefmt.COMMIT_TIMESTAMP)  # Spark's timestamps are microseconds
    base = base.set(stamp, pa.field(lakefmt.COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), False))
    return base.insert(at, pa.field(COMMIT_VERSION, pa.int64(), False))


def spark_feed_schema(table: lakefmt.Table) -> StructType:
    """:func:`feed_schema` as Spark's."""
    return from_arrow_schema(feed_schema(table))


def _with_version(rows: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    at = rows.schema.get_field_index(lakefmt.COMMIT_SNAPSHOT) + 1
    out = rows.add_column(at, schema.field(COMMIT_VERSION), rows.column(lakefmt.COMMIT_SNAPSHOT))
    yield from out.cast(schema).to_batches()


@dataclass
class FeedPartition(InputPartition):
    """One read task: the changes of snapshots ``start+1 .. end``, or (``initial``) the rows of snapshot ``end``
    as inserts."""

    start: int
    end: int
    initial: bool = False


def _read_partition(ref: TableRef, part: FeedPartition) -> Iterator[pa.RecordBatch]:
    table = ref.open()
    schema = feed_schema(table)
    if part.initial:
        snap = table.snapshot(part.end)
        rows = table.scan(snapshot_id=part.end).to_arrow().cast(table.schema())
        n = rows.num_rows
        extra = {
            lakefmt.CHANGE_TYPE: pa.array(["insert"] * n, pa.string()),
            lakefmt.COMMIT_SNAPSHOT: pa.array(np.full(n, snap.id, np.int64)),
            COMMIT_VERSION: pa.array(np.full(n, snap.id, np.int64)),
            lakefmt.COMMIT_TIMESTAMP: pa.array(
                np.full(n, snap.time_millis * 1000), schema.field(lakefmt.COMMIT_TIMESTAMP).type
            ),
        }
        for name, values in extra.items():
            rows = rows.append_column(schema.field(name), values)
        yield from rows.select(schema.names).to_batches()
        return
    if part.end > part.start:
        yield from _with_version(table.changes(part.start, part.end), schema)


def _runs(start: int, end: int, parts: int) -> list[FeedPartition]:
    """``start+1 .. end`` as up to ``parts`` contiguous runs (one empty partition for an empty range)."""
    n = end - start
    if n <= 0:
        return [FeedPartition(start, start)]
    edges = np.linspace(start, end, min(parts, n) + 1).round().astype(int).tolist()
    return [FeedPartition(a, b) for a, b in itertools.pairwise(edges) if b > a]


def _check_retained(table: lakefmt.Table, start: int, end: int) -> None:
    """Refuse, on the driver, a range ``start+1 .. end`` whose changes cannot be read: the snapshot before it (the
    files its first snapshot replaced) or one of its ends has expired."""
    if end <= start:
        return
    for sid in sorted({max(start, 1), start + 1, end}):
        try:
            table.snapshot(sid)
        except lakefmt.SnapshotNotFoundError as exc:
            raise lakefmt.SnapshotNotFoundError(
                f"the changes of snapshots {start + 1}..{end} need snapshot {sid}"
                f"{' (the files its successor replaced)' if sid == start else ''}: {exc}"
            ) from None


def _first_at(table: lakefmt.Table, millis: int) -> int:
    """The id of the first snapshot committed at or after ``millis`` (one past the latest if none)."""
    latest = table.latest_snapshot()
    for snap in table.snapshots():
        if snap.time_millis >= millis:
            return snap.id
    return (latest.id if latest is not None else 0) + 1


class ChangeFeedReader(DataSourceReader):
    """A batch read of the change feed (see the module's docstring)."""

    def __init__(self, ref: TableRef, options: Options, parallelism: int = 4) -> None:
        self.ref = ref
        travel = [options.spelled(k) for k in ("snapshotId", "asOf", "tag") if options.get(k) is not None]
        if travel:
            raise InvalidOptionError(
                f"option {travel[0]} picks one snapshot; a change feed reads a range: use "
                "startingVersion and endingVersion (or startingTimestamp, endingTimestamp)"
            )
        start = options.get("startingSnapshot")
        if start == "latest":
            raise InvalidOptionError(
                f"option {options.spelled('startingSnapshot')}: a batch change feed needs a snapshot id, not latest"
            )
        for a, b in (("startingSnapshot", "startingTimestamp"), ("endingVersion", "endingTimestamp")):
            if options.get(a) is not None and options.get(b) is not None:
                raise InvalidOptionError(f"options {options.spelled(a)} and {b}: give one, not both")
        if start is None and options.get("startingTimestamp") is None:
            raise InvalidOptionError(
                "a change feed read needs where it starts: option startingVersion (a snapshot id) or startingTimestamp"
            )
        self.start: int | None = start
        self.start_millis: int | None = options.get("startingTimestamp")
        self.end: int | None = options.get("endingVersion")
        self.end_millis: int | None = options.get("endingTimestamp")
        self.parallelism = parallelism

    def range(self, table: lakefmt.Table) -> tuple[int, int]:
        """The range ``(start, end]`` of snapshot ids the options name."""
        first = self.start if self.start is not None else _first_at(table, int(self.start_millis or 0))
        latest = table.latest_snapshot()
        last = latest.id if latest is not None else 0
        if self.end is not None:
            last = self.end
        elif self.end_millis is not None:
            last = _first_at(table, self.end_millis + 1) - 1
        if self.end is not None and latest is not None and self.end > latest.id:
            raise lakefmt.SnapshotNotFoundError(
                f"option endingVersion: snapshot {self.end} is after the latest snapshot {latest.id}"
            )
        if first - 1 > last:
            raise InvalidOptionError(
                f"the change feed's range starts after it ends: it starts at snapshot {first} (startingVersion, "
                f"startingTimestamp: inclusive) and ends at snapshot {last}"
            )
        return first - 1, last

    def partitions(self) -> list[FeedPartition]:
        table = self.ref.open()
        start, end = self.range(table)
        _check_retained(table, start, end)
        return _runs(start, end, self.parallelism)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FeedPartition)
        yield from _read_partition(self.ref, partition)


class ChangeFeedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of the change feed (see the module's docstring)."""

    def __init__(self, ref: TableRef, options: Options) -> None:
        self.ref = ref
        start = options.get("startingSnapshot")
        self.start_latest = start == "latest"
        self.start: int | None = None if start in (None, "latest") else int(start)
        self.start_millis: int | None = options.get("startingTimestamp")
        if start is not None and self.start_millis is not None:
            raise InvalidOptionError(f"options {options.spelled('startingSnapshot')} and startingTimestamp: give one")
        self.consumer_id = consumer_id_option(options)
        self._init_state()

    def _init_state(self) -> None:
        self._table: lakefmt.Table | None = None
        self._target: int | None = None
        self._consumer = ConsumerRecorder(self.consumer_id)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_table", "_target", "_consumer"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_state()

    @property
    def table(self) -> lakefmt.Table:
        if self._table is None:
            self._table = self.ref.open()
        return self._table

    def _latest(self) -> int:
        snap = self.table.latest_snapshot()
        latest = snap.id if snap is not None else 0
        return latest if self._target is None else min(latest, self._target)

    def _origin(self) -> dict[str, Any]:
        latest = self._latest()
        if self.start_latest:
            return {"snapshot": latest + 1}
        if self.start is not None:
            if self.start > latest + 1:
                raise lakefmt.LakefmtError(
                    f"option startingVersion: {self.start} is after the latest snapshot {latest}"
                )
            return {"snapshot": self.start}
        if self.start_millis is not None:
            return {"snapshot": _first_at(self.table, self.start_millis)}
        if self.consumer_id is not None:
            recorded = self.table.consumer(self.consumer_id)
            if recorded is not None:  # it records the last snapshot read (see _record)
                return {"snapshot": recorded.next_snapshot + 1}
        if latest == 0:
            return {"snapshot": 1}
        return {"snapshot": latest, "initial": True}

    def _begin(self, start: Mapping[str, Any], end: Mapping[str, Any] | None = None) -> dict[str, Any]:
        origin = pending_origin(start, end, self._origin)
        return dict(start if origin is None else origin)

    def initialOffset(self) -> dict[str, Any]:
        return {"origin": "pending"}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = None
        self._target = self._latest()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return {"snapshot": self._latest() + 1}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        pending = "snapshot" not in start
        begin = self._begin(start)
        if not pending:
            self._record(int(begin["snapshot"]), renew=True)
        end: dict[str, Any] = {"snapshot": max(self._latest() + 1, int(begin["snapshot"]) + bool(begin.get("initial")))}
        if not pending:
            return start if end["snapshot"] == begin["snapshot"] else end
        self._record(int(begin["snapshot"]), renew=False)
        return {**end, "origin": begin}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[FeedPartition]:
        begin = self._begin(start, end)
        stop = int(end["snapshot"])
        first = int(begin["snapshot"])
        parts: list[FeedPartition] = []
        if begin.get("initial"):
            parts.append(FeedPartition(0, first, initial=True))
            first += 1
        if stop > first:
            _check_retained(self.table, first - 1, stop - 1)
            parts.extend(_runs(first - 1, stop - 1, 4))
        return parts or [FeedPartition(0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FeedPartition)
        yield from _read_partition(self.ref, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._record(int(end["snapshot"]), renew=False)

    def _record(self, next_snapshot: int, *, renew: bool) -> None:
        """Record the consumer at the last snapshot read, ``next_snapshot - 1``: the changes of the next one are
        computed against the files of that one, which expiration must keep (at the table's first snapshot there is
        nothing before it to keep, and nothing is recorded)."""
        if self.consumer_id is not None and next_snapshot > 1:
            self._consumer.record(self.table, next_snapshot - 1, renew=renew)
