"""Writing: batch and streaming sinks. Tasks write data files with ``Table.new_writer()`` and return lakefmt's small
commit message; the driver-side ``commit`` publishes them with ``Table.new_committer(user)``. For streams the
identifier is the micro-batch id, so a batch Spark replays after a crash is recognised and skipped."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import fsspec
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import lakefmt

from .options import TableRef, flag, pairs

__all__ = ["BatchWriter", "LakefmtCommitMessage", "StreamWriter", "commit_user", "table_for_write"]


def _normalize(schema: pa.Schema) -> pa.Schema:
    """Spark hands Arrow large_string/large_binary (useLargeVarTypes); tables store string/binary."""

    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(fix(t.value_type)))
        if pa.types.is_struct(t):
            return pa.struct([t.field(i).with_type(fix(t.field(i).type)) for i in range(t.num_fields)])
        if pa.types.is_map(t):
            return pa.map_(fix(t.key_type), t.item_field.with_type(fix(t.item_type)))
        return t

    return pa.schema([f.with_type(fix(f.type)) for f in schema])


def table_for_write(ref: TableRef, spark_schema: StructType, options: Mapping[str, str]) -> lakefmt.Table:
    """Open the target table (or create it when asked) and check the incoming schema against it, on the
    driver, before any task runs: a mismatch fails the job with the columns named and commits nothing."""
    incoming = _normalize(to_arrow_schema(spark_schema, timezone="UTC"))
    try:
        table = ref.open()
    except lakefmt.NotATableError:
        if not flag(options, "createTable"):
            raise lakefmt.NotATableError(
                f"{ref.path} is not a lakefmt table; create it first, or set .option('createTable', 'true') "
                "to create it from the data's schema"
            ) from None
        partition_by = [p.strip() for p in str(options.get("partitionBy", "")).split(",") if p.strip()]
        table_options = pairs(str(options.get("tableOptions", "")), "tableOptions")
        try:
            table = lakefmt.create_table(
                ref.path,
                incoming,
                partition_by=partition_by,
                options=table_options,
                storage_options=ref.storage_options,
            )
        except lakefmt.TableAlreadyExistsError:
            table = ref.open()  # created concurrently: use it
    lakefmt.TableWriter.check_schema(incoming, table.schema())
    return table


@dataclass
class LakefmtCommitMessage(WriterCommitMessage):
    """A task's commit message: lakefmt's own (per-task manifest metadata), nothing per file."""

    message: lakefmt.CommitMessage


def _write_task(ref: TableRef, iterator: Iterator[pa.RecordBatch]) -> LakefmtCommitMessage:
    table = ref.open()
    writer = table.new_writer()
    with writer:
        for batch in iterator:
            writer.write(batch)
        return LakefmtCommitMessage(writer.prepare_commit())


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[lakefmt.CommitMessage]:
    return [m.message for m in messages if isinstance(m, LakefmtCommitMessage)]


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, ref: TableRef, overwrite: bool, partition: dict[str, str] | None) -> None:
        self.ref = ref
        self.overwrite = overwrite
        self.partition = partition

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakefmtCommitMessage:
        return _write_task(self.ref, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        table = self.ref.open()
        committer = table.new_committer()  # a one-off write: a fresh commit user, never replayed
        if self.overwrite:
            committer.overwrite(_messages(messages), identifier=0, partition=self.partition)
        else:
            committer.commit(_messages(messages), identifier=0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: nothing is visible before commit; the tasks' files are left to orphan-clean
        (Spark may pass None for every message, so nothing here may depend on them)."""


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, ref: TableRef, commit_user: str, complete: bool) -> None:
        self.ref = ref
        self.commit_user = commit_user
        self.complete = complete

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakefmtCommitMessage:
        return _write_task(self.ref, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        table = self.ref.open()
        committer = table.new_committer(commit_user=self.commit_user)
        msgs = _messages(messages)
        if self.complete:
            snap = committer.overwrite(msgs, identifier=batchId)
        else:
            snap = committer.commit(msgs, identifier=batchId)
        result = committer.last_result
        if snap is None and result is not None and result.outcome is lakefmt.CommitOutcome.ALREADY_COMMITTED:
            table.discard(msgs)  # a replayed batch: skipped; this attempt's files are referenced by nothing

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """See :meth:`BatchWriter.abort`."""


def commit_user(options: Mapping[str, str]) -> str:
    """A stream's commit user: ``commitUser``, else one derived from the query id in the checkpoint."""
    user = options.get("commitUser") or options.get("commituser")
    if user:
        return str(user)
    checkpoint = options.get("checkpointLocation") or options.get("checkpointlocation")
    if checkpoint:
        # The query id, not the checkpoint's path: a checkpoint deleted and recreated at the same path
        # starts again at batch 0, and under a path-derived user dedup would skip those batches as done.
        digest = hashlib.sha256(_query_id(str(checkpoint)).encode()).hexdigest()[:16]
        return f"spark-stream-{digest}"
    raise lakefmt.LakefmtError(
        "a lakefmt streaming sink needs a stable commit user for exactly-once: set "
        ".option('checkpointLocation', ...) or .option('commitUser', ...)"
    )


def _query_id(checkpoint: str) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (written when the query starts, before its first
    batch): the same across restarts from that checkpoint, new for a new checkpoint even at the same path."""
    try:
        fs, root = fsspec.core.url_to_fs(checkpoint)
        with fs.open(f"{root.rstrip('/')}/metadata", "rb") as f:
            return str(json.loads(f.readline())["id"])
    except Exception as exc:  # any failure: never guess a commit user
        raise lakefmt.LakefmtError(
            f"cannot read the streaming query id from {checkpoint}/metadata ({type(exc).__name__}: {exc}); "
            "set .option('commitUser', ...) to a name stable for this query"
        ) from None

