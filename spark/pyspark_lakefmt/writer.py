"""Writing: batch and streaming sinks. Tasks write data files with ``Table.new_writer()`` and return lakefmt's small
commit message; the driver-side ``commit`` publishes them with ``Table.new_committer(user)``. For streams the
identifier is the micro-batch id, so a batch Spark replays after a crash is recognised and skipped.

A batch overwrite with no scope option follows Spark's session conf ``spark.sql.sources.partitionOverwriteMode``.
The driver side of a Python data source never sees the session conf, but Spark copies every conf set in the
session into each task's local properties: each task records what it saw in its commit message, and ``commit``
decides from those (:func:`session_overwrite`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import fsspec
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import lakefmt
from lakefmt.options import TableOptions

from .evolution import write_schema
from .options import Options, TableRef

__all__ = [
    "OVERWRITE_MODE_CONF",
    "BatchWriter",
    "LakefmtCommitMessage",
    "Overwrite",
    "StreamWriter",
    "commit_user",
    "overwrite_from_options",
    "overwrite_scope",
    "session_overwrite",
    "table_for_write",
]

#: Spark's session conf for what an overwrite replaces (``static``, its default: everything; ``dynamic``: the
#: partitions written). Seen by the write tasks only, never by a Python data source's driver side.
OVERWRITE_MODE_CONF = "spark.sql.sources.partitionOverwriteMode"


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


def table_for_write(ref: TableRef, spark_schema: StructType, options: Options) -> tuple[lakefmt.Table, int]:
    """Open the target table (or create it when asked) and check the incoming schema against it, on the
    driver, before any task runs: a mismatch fails the job with the columns named and commits nothing. Returns
    the table and the id of the schema the tasks write under (:func:`.evolution.write_schema`: with
    ``mergeSchema``, the data's new columns are added first).

    ``partitionBy`` and ``tableOptions`` apply when ``createTable`` creates the table; given for a table that
    exists, they must match it (a job that changed them would otherwise silently keep the old layout)."""
    incoming = _normalize(to_arrow_schema(spark_schema, timezone="UTC"))
    partition_by: list[str] = options.get("partitionBy", [])
    table_options: dict[str, str] = options.get("tableOptions", {})
    try:
        TableOptions.check_keys(table_options)
    except lakefmt.InvalidOptionError as exc:
        raise type(exc)(f"option tableOptions: {exc}") from None
    try:
        table = ref.open()
    except lakefmt.NotATableError:
        if not options.get("createTable"):
            raise lakefmt.NotATableError(
                f"{ref.path} is not a lakefmt table; create it first, or set .option('createTable', 'true') "
                "to create it from the data's schema"
            ) from None
        try:
            created = _create(ref, incoming, partition_by, table_options)
            return created, created.table_schema().id
        except lakefmt.TableAlreadyExistsError:
            table = ref.open()  # created concurrently: use it, if it is the same
    _check_layout(table, options)
    return table, write_schema(table, incoming, merge=bool(options.get("mergeSchema"))).id


def _create(ref: TableRef, schema: pa.Schema, partition_by: list[str], options: dict[str, str]) -> lakefmt.Table:
    try:
        return lakefmt.create_table(
            ref.path, schema, partition_by=partition_by, options=options, storage_options=ref.storage_options
        )
    except lakefmt.InvalidOptionError as exc:
        raise type(exc)(f"option tableOptions: {exc}") from None


def _check_layout(table: lakefmt.Table, options: Options) -> None:
    """``partitionBy`` / ``tableOptions`` given for an existing table: they must be what the table has."""
    if "partitionBy" in options and list(options.get("partitionBy")) != list(table.partition_keys):
        raise lakefmt.InvalidOptionError(
            f"option partitionBy: {','.join(options.get('partitionBy')) or 'nothing'} differs from the existing "
            f"table's partition keys ({','.join(table.partition_keys) or 'none'}); partitionBy applies only when "
            "createTable creates the table: leave it out, or match the table"
        )
    stored = table.options
    differ = {k: v for k, v in options.get("tableOptions", {}).items() if stored.get(k) != v}
    if differ:
        shown = ", ".join(f"{k}={v} (the table has {stored.get(k, 'no value')})" for k, v in differ.items())
        raise lakefmt.InvalidOptionError(
            f"option tableOptions: {shown}; tableOptions apply only when createTable creates the table: leave "
            "them out, or match the table"
        )


@dataclass(frozen=True)
class Overwrite:
    """What a batch overwrite replaces: the committer's arguments (``partition``, ``where``, ``dynamic``; none:
    the whole table) and their :class:`lakefmt.OverwriteScope`, bound on the driver, which every task checks its
    rows with before it writes them. ``from_conf``: no scope option was given, so the session conf the tasks saw
    decides at commit (:func:`session_overwrite`); until then the scope is the whole table's, which checks no
    row (a dynamic overwrite takes every row's partition)."""

    scope: lakefmt.OverwriteScope
    partition: dict[str, str] | None = None
    where: str | None = None
    dynamic: bool = False
    from_conf: bool = False

    def commit(self, committer: lakefmt.Committer, messages: list[lakefmt.CommitMessage], identifier: int) -> None:
        committer.overwrite(
            messages, identifier, partition=self.partition, where=self.where, dynamic=self.dynamic
        )


def overwrite_scope(
    table: lakefmt.Table,
    *,
    partition: Mapping[str, str] | None = None,
    where: str | None = None,
    dynamic: bool = False,
    option: str | None = None,
) -> Overwrite:
    """The connector's one entry for an overwrite of ``table``: the whole table (nothing given), a partition, the
    partitions matching ``where`` (a predicate on partition columns) or the partitions written (``dynamic``).
    Checked now, on the driver: an error names ``option`` (the option or clause the scope came from)."""
    try:
        scope = table.overwrite_scope(partition=partition, where=where, dynamic=dynamic)
    except (lakefmt.InvalidPartitionError, lakefmt.InvalidPredicateError) as exc:
        raise type(exc)(f"option {option}: {exc}" if option else str(exc)) from None
    return Overwrite(scope, dict(partition) if partition else None, where, dynamic)


def overwrite_from_options(table: lakefmt.Table, options: Options, overwrite: bool) -> Overwrite | None:
    """A batch write's overwrite (None: an append) from ``.mode(...)`` and the options ``overwritePartition``,
    ``replaceWhere`` and ``partitionOverwriteMode``; at most one of those, and only with ``.mode('overwrite')``.
    With none of them, the session conf ``spark.sql.sources.partitionOverwriteMode`` decides at commit
    (``from_conf``); an explicit option, ``partitionOverwriteMode=static`` included, wins over the conf."""
    dynamic = options.get("partitionOverwriteMode") == "dynamic"
    given = [n for n in ("overwritePartition", "replaceWhere") if n in options]
    given += ["partitionOverwriteMode"] if dynamic else []
    if not overwrite:
        if given:
            raise lakefmt.InvalidOptionError(
                f"option {options.spelled(given[0])} needs .mode('overwrite') (this write appends)"
            )
        return None
    if len(given) > 1:
        raise lakefmt.InvalidOptionError(
            f"options {' and '.join(options.spelled(n) for n in given)} are two overwrite scopes; give one"
        )
    if "overwritePartition" in options:
        return overwrite_scope(table, partition=options.get("overwritePartition"), option="overwritePartition")
    if "replaceWhere" in options:
        return overwrite_scope(table, where=options.get("replaceWhere"), option=options.spelled("replaceWhere"))
    explicit = "partitionOverwriteMode" in options
    return dataclasses.replace(overwrite_scope(table, dynamic=dynamic), from_conf=not explicit)


def session_overwrite(
    table: lakefmt.Table, overwrite: Overwrite, messages: Sequence[WriterCommitMessage | None]
) -> Overwrite:
    """The overwrite a batch job asked for: ``overwrite`` itself unless it is ``from_conf``; then the whole table
    (the conf unset or ``static``) or the partitions written (``dynamic``), as the job's tasks saw the session
    conf; on an unpartitioned table the conf changes nothing, as in Spark's file sources. Refused
    (:class:`lakefmt.InvalidOptionError`, nothing committed) when no task reported it, as when
    Spark ran no task: replacing the whole table could delete what a dynamic overwrite keeps, and replacing
    nothing would leave in place what a static one was asked to remove, so lakefmt guesses neither. Refused too
    when tasks disagree (one job has one conf: a message from elsewhere)."""
    if not overwrite.from_conf:
        return overwrite
    seen = {m.overwrite_mode for m in messages if isinstance(m, LakefmtCommitMessage)}
    if not seen:
        raise lakefmt.InvalidOptionError(
            f"this overwrite names no scope and no write task reported the session conf {OVERWRITE_MODE_CONF} "
            "(Spark ran no task), so lakefmt cannot tell whether to replace the whole table or only the partitions "
            "written, and guesses neither; nothing was committed. Say which: "
            ".option('partitionOverwriteMode', 'static') for the whole table, 'dynamic' for the partitions written"
        )
    modes = {(m or "static").strip().lower() for m in seen}  # unset: Spark's default, static
    if len(modes) > 1:
        raise lakefmt.InvalidOptionError(
            f"the write tasks saw the session conf {OVERWRITE_MODE_CONF} as {', '.join(sorted(modes))}; one job "
            "has one value, so these messages are not one job's; nothing was committed. "
            "Set .option('partitionOverwriteMode', ...) to say which"
        )
    if not modes <= {"static", "dynamic"}:
        raise lakefmt.InvalidOptionError(
            f"the session conf {OVERWRITE_MODE_CONF}: {seen.pop()!r} is not an overwrite mode; use static or "
            "dynamic; nothing was committed"
        )
    if modes == {"dynamic"} and table.partition_keys:  # as in Spark's file sources: the conf needs partitions
        return overwrite_scope(table, dynamic=True, option=OVERWRITE_MODE_CONF)
    return dataclasses.replace(overwrite, from_conf=False)


@dataclass
class LakefmtCommitMessage(WriterCommitMessage):
    """A task's commit message: lakefmt's own (per-task manifest metadata), nothing per file, and the value of
    the session conf ``spark.sql.sources.partitionOverwriteMode`` the task saw (None: not set, or not run by
    Spark), which decides a batch overwrite that names no scope."""

    message: lakefmt.CommitMessage
    overwrite_mode: str | None = None


def _write_task(
    ref: TableRef,
    iterator: Iterator[pa.RecordBatch],
    scope: lakefmt.OverwriteScope | None = None,
    schema_id: int | None = None,
) -> LakefmtCommitMessage:
    """One task: each batch is checked against the overwrite's scope before it reaches the writer, so a row
    outside it fails the task before its file is written; a failing task deletes what it wrote. ``schema_id``:
    the schema the driver checked the data against, which the task writes under (None: the current one)."""
    table = ref.open()
    writer = table.new_writer(schema_id=schema_id)
    with writer:
        for batch in iterator:
            if scope is not None:
                scope.check_rows(batch)
            writer.write(batch)
        return LakefmtCommitMessage(writer.prepare_commit(), _task_overwrite_mode())


def _task_overwrite_mode() -> str | None:
    """The session conf ``spark.sql.sources.partitionOverwriteMode`` as this task sees it: Spark copies every
    conf set in the session into the job's local properties (None: not set, or not in a Spark task)."""
    context = TaskContext.get()
    return context.getLocalProperty(OVERWRITE_MODE_CONF) if context is not None else None


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[lakefmt.CommitMessage]:
    return [m.message for m in messages if isinstance(m, LakefmtCommitMessage)]


class BatchWriter(DataSourceArrowWriter):
    """A batch write: an append, or an overwrite of the scope of ``overwrite``, in one snapshot."""

    def __init__(
        self, ref: TableRef, overwrite: Overwrite | None, *, write_only: bool = False, schema_id: int | None = None
    ) -> None:
        self.ref = ref
        self.overwrite = overwrite
        self.write_only = write_only  #: option writeOnly: the commit never compacts nor expires automatically
        self.schema_id = schema_id  #: the schema the tasks write under (see .evolution)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakefmtCommitMessage:
        return _write_task(self.ref, iterator, self.overwrite.scope if self.overwrite else None, self.schema_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        table = self.ref.open()
        # a one-off write: a fresh commit user, never replayed
        committer = table.new_committer(write_only=self.write_only, compact_in_background=False)
        if self.overwrite is not None:
            try:
                overwrite = session_overwrite(table, self.overwrite, messages)
            except lakefmt.InvalidOptionError:
                table.discard(_messages(messages))  # refused before any publish: its files are no one's
                raise
            overwrite.commit(committer, _messages(messages), identifier=0)
        else:
            committer.commit(_messages(messages), identifier=0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: nothing is visible before commit; the tasks' files are left to orphan-clean
        (Spark may pass None for every message, so nothing here may depend on them)."""


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(
        self,
        ref: TableRef,
        commit_user: str,
        complete: bool,
        *,
        write_only: bool = False,
        schema_id: int | None = None,
    ) -> None:
        self.ref = ref
        self.commit_user = commit_user
        self.complete = complete
        self.write_only = write_only  #: option writeOnly: the commits never compact nor expire automatically
        self.schema_id = schema_id  #: the schema this micro-batch's tasks write under (see .evolution)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakefmtCommitMessage:
        return _write_task(self.ref, iterator, schema_id=self.schema_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        table = self.ref.open()
        committer = table.new_committer(
            commit_user=self.commit_user, write_only=self.write_only, compact_in_background=False
        )
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

