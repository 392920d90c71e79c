"""Streaming reads: ``spark.readStream.format("lakefmt").load(uri)``.

An offset is a position in the table's history: ``{"snapshot": s, "index": i, "initial": b}``. Everything before
snapshot ``s`` has been read, and so have the first ``i`` files (ordered by path) of snapshot ``s``'s *unit*: the
files that snapshot added (read with the core's incremental scan), or, when ``initial`` is true, the whole content
of snapshot ``s`` (the table as it was when a stream started without a starting option). Once a unit is read the
position moves to ``{"snapshot": s + 1, "index": 0, "initial": false}``, which is also the next snapshot the stream
needs: what a consumer (``consumerId``) records so that expiration keeps it.

What a snapshot means to the stream is one rule, :func:`snapshot_rule`, decided by what its commit did to rows and
not by its kind: a compaction is skipped, a commit that deleted or replaced rows stops the stream (or is skipped with
``skipChangeCommits``), any other commit's added files are read. A micro-batch takes whole units and,
under ``maxFilesPerTrigger`` / ``maxBytesPerTrigger``, may end inside one (the index), so a large initial snapshot
is read over several micro-batches; every micro-batch takes at least one file, and a file is read exactly once.

Spark asks for the initial offset again whenever it replans the first micro-batch (also after a restart), so a
start that depends on the time it is resolved (the latest snapshot) cannot be the initial offset: the initial
offset is ``{"origin": "pending"}``, and the first micro-batch's end offset carries the resolved start
(``"origin"``), which the checkpoint then keeps.

A checkpoint names positions by snapshot id, and ids start again at 1 in a table re-created at the same location
(or in another table a checkpoint is wrongly pointed at). So every offset also carries ``"verify": {"snapshot": r,
"nonce": n}``, the nonce of the last snapshot it has read (``r``: ``s - 1``, or ``s`` for an initial unit), and a
stream resumed from an offset whose snapshot ``r`` is another commit, or is past the table's latest, fails
(:meth:`StreamReader._verify`) instead of reading the wrong table from the middle.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

import lakefmt
from lakefmt.options import InvalidOptionError
from lakefmt.read.removals import removes_rows

from .evolution import check_spark_schema, stream_readable
from .options import Options, TableRef, parse_options
from .stream_units import (
    PENDING,
    Budget,
    ConsumerRecorder,
    KindRule,
    Position,
    StreamPartition,
    consumer_id_option,
    pending_origin,
    plan_read_tasks,
    snapshot_rule,
)

__all__ = [
    "DEFAULT_MAX_FILES_PER_TRIGGER",
    "PENDING",
    "KindRule",
    "StreamReader",
    "plan_read_tasks",
    "snapshot_rule",
]

log = logging.getLogger("pyspark_lakefmt.stream")

#: files per micro-batch when neither ``maxFilesPerTrigger`` nor ``maxBytesPerTrigger`` is set (Delta's default)
DEFAULT_MAX_FILES_PER_TRIGGER = 1000


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's stream reader for a lakefmt table. Planning (offsets, partitions, commit) runs in one long-lived
    driver-side Python worker, which keeps the table open and the file lists of recent snapshots; only the small
    options and :class:`StreamPartition` travel to executors."""

    def __init__(
        self, ref: TableRef, options: Mapping[str, str] | Options, spark_schema: StructType | None = None
    ) -> None:
        """``options``: Spark's (checked here against the stream-read options) or already checked ones;
        ``spark_schema``: what ``schema()`` returned when the query started (the stream's columns)."""
        opts = options if isinstance(options, Options) else parse_options(options, "stream-read")
        self.ref = ref
        self.spark_schema = spark_schema
        starting = opts.get("startingSnapshot")
        self.starting_latest = starting == "latest"
        self.starting_snapshot: int | None = None if starting in (None, "latest") else int(starting)
        self.starting_millis: int | None = opts.get("startingTimestamp")
        if starting is not None and self.starting_millis is not None:
            raise InvalidOptionError(
                f"options {opts.spelled('startingSnapshot')} and {opts.spelled('startingTimestamp')}: "
                "give one, not both"
            )
        self.max_files: int | None = opts.get("maxFilesPerTrigger")
        self.max_bytes: int | None = opts.get("maxBytesPerTrigger")
        self.skip_change_commits: bool = opts.get("skipChangeCommits", False)
        self.fail_on_data_loss: bool = opts.get("failOnDataLoss", True)
        self.consumer_id = consumer_id_option(opts)
        self._init_state()

    def _init_state(self) -> None:
        self._table: lakefmt.Table | None = None
        self._target: int | None = None  # Trigger.AvailableNow: the latest snapshot when the query started
        self._units: dict[tuple[int, bool], list[lakefmt.FileTask]] = {}
        self._rules: dict[int, tuple[KindRule, lakefmt.Snapshot]] = {}  # each snapshot's rule, and the snapshot
        self._consumer = ConsumerRecorder(self.consumer_id)
        self._table_latest = 0  # the table's latest snapshot when _latest() last looked
        self._schema: lakefmt.TableSchema | None = None  # the schema the stream returns (see read_schema)
        self._readable: dict[int, str | None] = {}  # schema id -> why its files cannot be read into it

    def __getstate__(self) -> dict[str, Any]:  # executors need the options only
        state = dict(self.__dict__)
        for key in ("_table", "_target", "_units", "_rules", "_consumer", "_table_latest", "_schema", "_readable"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_state()

    # -- the table ----------------------------------------------------------------------------------------
    @property
    def table(self) -> lakefmt.Table:
        if self._table is None:
            self._table = self.ref.open()
        return self._table

    def read_schema(self) -> lakefmt.TableSchema:
        """The schema the stream returns: the table's when the stream's planning began, which must be the one
        Spark was given when the query started (else the table's schema changed in between: restart)."""
        if self._schema is None:
            schema = self.table.table_schema()
            check_spark_schema(self.spark_schema, schema, "this streaming query")
            self._schema = schema
        return self._schema

    def _check_readable(self, files: list[lakefmt.FileTask]) -> None:
        """Refuse a micro-batch holding files of a later schema that cannot be read into the stream's without
        losing something (:func:`.evolution.stream_readable`): restarting the query reads with the new one."""
        schema = self.read_schema()
        for sid in sorted({f.schema_id for f in files if f.schema_id is not None and f.schema_id > schema.id}):
            if sid not in self._readable:
                written = next((s for s in self.table.schemas() if s.id == sid), None)
                self._readable[sid] = None if written is None else stream_readable(written, schema)
            reason = self._readable[sid]
            if reason is not None:
                raise lakefmt.SchemaMismatchError(
                    f"this streaming query reads {self.ref.path} with its schema {schema.id} of when the query "
                    f"started, and the table's schema changed since: {reason}, so its rows cannot be shown in the "
                    "query's columns without losing values. Restart the query: it then reads with the table's "
                    "current schema"
                )

    def _latest(self) -> int:
        """The latest snapshot id the stream may read up to (0: none yet)."""
        snap = self.table.latest_snapshot()
        latest = snap.id if snap is not None else 0
        self._table_latest = latest  # the table's own, for _verify
        return latest if self._target is None else min(latest, self._target)

    def _earliest(self) -> int:
        snaps = self.table.snapshots()
        return snaps[0].id if snaps else 1

    def _lost(self, pos: Position) -> Position:
        """The stream needs ``pos`` but its snapshot is gone: the error, or, if it expired and
        ``failOnDataLoss=false``, the position of the earliest retained snapshot."""
        ids = [snap.id for snap in self.table.snapshots()]
        if not ids or pos.snapshot > ids[-1]:
            span = f"snapshots {ids[0]}..{ids[-1]}" if ids else "no snapshots"
            raise lakefmt.SnapshotNotFoundError(
                f"snapshot {pos.snapshot}, where this stream's checkpoint says to read next, does not exist: the "
                f"table has {span} (was it re-created?); start the stream again from a new checkpoint"
            )
        if pos.snapshot >= ids[0]:  # not expired (expiration removes the oldest first): a gap in the history
            raise lakefmt.MissingMetadataError(f"snapshot {pos.snapshot} is missing from the table's history")
        if self.fail_on_data_loss:
            raise lakefmt.SnapshotNotFoundError(
                f"snapshot {pos.snapshot}, the next one this stream needs, has expired (the earliest retained "
                f"snapshot is {ids[0]}): its rows are lost to this stream. Restart with "
                ".option('failOnDataLoss', 'false') to continue from the earliest retained snapshot; give a stream "
                ".option('consumerId', ...) so that expiration keeps what it still needs"
            )
        log.warning(
            "lakefmt stream on %s: snapshot %d has expired; skipping to the earliest retained snapshot %d "
            "(failOnDataLoss=false): the rows of snapshots %d..%d are not read",
            self.ref.path,
            pos.snapshot,
            ids[0],
            pos.snapshot,
            ids[0] - 1,
        )
        return Position(ids[0])

    def _rule(self, sid: int) -> tuple[KindRule, lakefmt.Snapshot]:
        """What the stream does at snapshot ``sid`` (:func:`snapshot_rule`), and the snapshot."""
        if sid not in self._rules:
            snap = self.table.snapshot(sid)
            target = self.table.rewrite_target()
            # the recorded removesRows is checked against the delta, which the unit's read plans from anyway
            removes = removes_rows(target.io, target.store, snap, check=True)
            self._rules[sid] = (snapshot_rule(snap.commit_kind, removes), snap)
        return self._rules[sid]

    def _files(self, pos: Position) -> list[lakefmt.FileTask]:
        """The unit's files, ordered by path."""
        key = (pos.snapshot, pos.initial)
        if key not in self._units:
            if pos.initial:
                scan = self.table.scan(snapshot_id=pos.snapshot)
            else:
                scan = self.table.scan(from_snapshot=pos.snapshot - 1, to_snapshot=pos.snapshot)
            self._units[key] = sorted(scan.files(), key=lambda f: f.path)
        return self._units[key]

    def _unit(self, pos: Position) -> tuple[Position, KindRule, list[lakefmt.FileTask]]:
        """What is at ``pos`` (a snapshot that exists): the position (moved on if it had expired), the rule and
        the unit's files (empty unless READ)."""
        while True:
            try:
                if pos.initial:
                    return pos, KindRule.READ, self._files(pos)
                rule = self._rule(pos.snapshot)[0]
                return pos, rule, self._files(pos) if rule is KindRule.READ else []
            except lakefmt.SnapshotNotFoundError:
                pass
            pos = self._lost(pos)  # outside the handler: its error is the whole story, not a chained one

    def _stamp(self, offset: dict[str, Any], pos: Position) -> dict[str, Any]:
        """``offset`` with the nonce of the last snapshot it has read (the module's docstring), if it exists."""
        last = pos.snapshot if pos.initial else pos.snapshot - 1
        if last >= 1:
            with contextlib.suppress(lakefmt.SnapshotNotFoundError):  # expired (failOnDataLoss=false skipped it)
                offset["verify"] = {"snapshot": last, "nonce": _nonce(self.table.snapshot(last))}
        return offset

    def _verify(self, offset: Mapping[str, Any], latest: int, *, nonce: bool = True) -> None:
        """Refuse an offset that this table cannot have given: one that has read past the table's ``latest``
        snapshot, or (``nonce``) whose last snapshot read is another commit than the table's snapshot of that id.
        A snapshot that has expired since cannot be compared, and passes."""
        pos = Position.from_offset(offset)
        last = pos.snapshot if pos.initial else pos.snapshot - 1
        if last > latest:
            raise self._other_table(f"the checkpoint has read snapshot {last}, and the table's latest is {latest}")
        check = offset.get("verify")
        if not nonce or not isinstance(check, Mapping):
            return
        try:
            sid = int(check["snapshot"])
            snap = self.table.snapshot(sid)
        except lakefmt.SnapshotNotFoundError:
            return
        except (KeyError, TypeError, ValueError):
            raise lakefmt.LakefmtError(f"{dict(offset)!r} is not a lakefmt stream offset") from None
        if _nonce(snap) != check.get("nonce"):
            raise self._other_table(f"its snapshot {sid} is another commit than the snapshot {sid} the checkpoint read")

    def _other_table(self, why: str) -> lakefmt.LakefmtError:
        return lakefmt.LakefmtError(
            f"{self.ref.path} is not the table this stream's checkpoint was reading: {why} (was the table re-created "
            "at this location, or the checkpoint made for another table?). Nothing was read; start the stream "
            "again from a new checkpoint"
        )

    def _change_error(self, sid: int) -> lakefmt.LakefmtError:
        snap = self._rule(sid)[1]
        return lakefmt.LakefmtError(
            f"snapshot {sid} ({snap.operation.value}, kind {snap.commit_kind.value}) deleted or replaced rows that "
            "were live before it, which a stream of appended rows cannot express. Set "
            ".option('skipChangeCommits', 'true') to skip such snapshots (their new rows are not read either), or "
            "read the table's changes, deletes and updates included, with .option('readChangeFeed', 'true'); or "
            "restart the stream from a new checkpoint"
        )

    # -- where a stream starts ----------------------------------------------------------------------------
    def _origin(self) -> Position:
        latest = self._latest()
        if self.starting_latest:
            return Position(latest + 1)
        if self.starting_snapshot is not None:
            if self.starting_snapshot > latest + 1:
                raise lakefmt.LakefmtError(
                    f"option startingSnapshot: {self.starting_snapshot} is after the latest snapshot {latest} "
                    "(use 'latest' to read only what is committed from now on)"
                )
            return Position(self.starting_snapshot)
        if self.starting_millis is not None:
            if latest == 0:
                return Position(1)
            try:  # the first snapshot committed at or after the time: one after the last one before it
                before = self.table.scan(as_of=self.starting_millis - 1).snapshot
            except lakefmt.SnapshotNotFoundError:  # every retained snapshot is later: from the earliest (Delta)
                return Position(self._earliest())
            return Position((before.id if before is not None else 0) + 1)
        if self.consumer_id is not None:
            recorded = self.table.consumer(self.consumer_id)  # its own record: others' never stop it
            if recorded is not None:
                log.info(
                    "lakefmt stream on %s resumes consumer %s at snapshot %d",
                    self.ref.path,
                    self.consumer_id,
                    recorded.next_snapshot,
                )
                return Position(recorded.next_snapshot)
        return Position(latest, initial=True) if latest else Position(1)

    def _begin(self, start: Mapping[str, Any], end: Mapping[str, Any] | None = None) -> Position:
        """The position an offset names; the pending initial offset resolves to the origin ``end`` carries, or
        (for a new micro-batch) to a freshly resolved one."""
        if start.get("origin") == "pending":
            origin = pending_origin(start, end, lambda: self._origin().to_offset())
            if origin is not None:
                return Position.from_offset(origin)
        return Position.from_offset(start)

    # -- Spark's calls --------------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return dict(PENDING)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes is not None:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxFiles(DEFAULT_MAX_FILES_PER_TRIGGER)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = None
        self._target = self._latest()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return Position(self._latest() + 1).to_offset()

    def _budget(self, limit: ReadLimit) -> Budget:
        if isinstance(limit, ReadAllAvailable):
            return Budget(None, None, None)
        budget = Budget(self.max_files, self.max_bytes, None)
        if isinstance(limit, ReadMaxFiles):
            budget.files = limit.max_files
        elif isinstance(limit, ReadMaxBytes):
            budget.bytes = limit.max_bytes
        elif isinstance(limit, ReadMaxRows):
            budget.rows = limit.max_rows
        if budget.files is None and budget.bytes is None and budget.rows is None:
            budget.files = DEFAULT_MAX_FILES_PER_TRIGGER
        return budget

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self.read_schema()  # pinned at the query's first trigger, right after Spark took the table's schema
        pending = "snapshot" not in start
        begin = self._begin(start)
        latest = self._latest()
        if not pending:
            self._verify(start, self._table_latest, nonce=False)  # no read: the nonce is checked for new offsets
            self._record_consumer(begin, renew=True)  # every row before ``start`` has been processed
        budget = self._budget(limit)
        end = begin
        while end.initial or end.snapshot <= latest:
            end, rule, files = self._unit(end)
            if not end.initial and end.snapshot > latest:
                break
            if rule is KindRule.SKIP or (rule is KindRule.CHANGE and self.skip_change_commits):
                end = end.unit_done()
                continue
            if rule is KindRule.CHANGE:
                if budget.taken:
                    break  # this micro-batch reads what came before; the next one fails here
                raise self._change_error(end.snapshot)
            index = end.index
            while index < len(files) and budget.admits(files[index]):
                budget.take(files[index])
                index += 1
            if index < len(files):
                end = Position(end.snapshot, index, end.initial)
                break
            end = end.unit_done()
        if end == begin and not pending:
            return start  # nothing new: the very offset Spark gave, so that it plans no micro-batch
        if not pending:
            self._verify(start, self._table_latest)
        offset = self._stamp(end.to_offset(), end)
        if pending:
            offset["origin"] = {"snapshot": begin.snapshot, "initial": begin.initial}
            self._record_consumer(begin, renew=False)
        return offset

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[StreamPartition]:
        pos, stop = self._begin(start, end), Position.from_offset(end)
        latest = self.table.latest_snapshot()
        self._verify(start if "snapshot" in start else end, latest.id if latest is not None else 0)
        files: list[lakefmt.FileTask] = []
        while pos < stop:
            pos, rule, unit = self._unit(pos)
            if pos >= stop:
                break
            if rule is KindRule.CHANGE and not self.skip_change_commits:
                raise self._change_error(pos.snapshot)
            last = stop.index if (pos.snapshot, pos.initial) == (stop.snapshot, stop.initial) else len(unit)
            files.extend(unit[pos.index : last])
            pos = pos.unit_done()
        self._check_readable(files)
        sid = self.read_schema().id
        by_path = {f.path: f for f in files}
        return [
            StreamPartition([by_path[p] for p in paths], sid) for paths in plan_read_tasks(files, os.cpu_count() or 1)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's files as the stream's schema, matched by field id."""
        assert isinstance(partition, StreamPartition)
        if partition.files:
            yield from self.ref.open().read_files(partition.files, schema=partition.schema_id)

    def commit(self, end: dict[str, Any]) -> None:
        pos = Position.from_offset(end)
        self._record_consumer(pos, renew=False)
        for key in [k for k in self._units if k[0] < pos.snapshot]:  # never needed again
            del self._units[key]
        for sid in [s for s in self._rules if s < pos.snapshot]:
            del self._rules[sid]

    def _record_consumer(self, pos: Position, *, renew: bool) -> None:
        """Record ``pos.snapshot`` as the consumer's next snapshot (:class:`ConsumerRecorder`)."""
        if self.consumer_id is not None:
            self._consumer.record(self.table, pos.snapshot, renew=renew)


def _nonce(snap: lakefmt.Snapshot) -> str:
    """What tells one commit from another of the same id (snapshots older than nonces: their time)."""
    return snap.nonce or f"time-{snap.time_millis}"
