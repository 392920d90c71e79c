"""The ``lakefmt`` Spark data source (pyspark >= 4.1 Python Data Source API).

Installed as the top-level module ``pyspark_lakefmt``, it is found by pyspark without a register call::

    df.write.format("lakefmt").mode("append").save("s3://bucket/events")
    df.writeStream.format("lakefmt").option("checkpointLocation", ck).start("/data/events")
    spark.read.format("lakefmt").option("snapshotId", 12).load("/data/events")

Built on lakefmt's public API only: tasks write with ``Table.new_writer()`` and return the small commit message;
the driver-side ``commit`` publishes with ``Table.new_committer(commit_user).commit(messages, identifier)``.
For streams the identifier is the micro-batch id, so a batch Spark replays after a crash is skipped.

Options (case-insensitive):

=====================  ===================================================================================
``path``               the table location (``save(uri)`` / ``load(uri)`` / ``start(uri)``)
``commitUser``         streams: the commit user (default: derived from the query id Spark keeps in
                       ``<checkpointLocation>/metadata``, stable across restarts from one checkpoint)
``createTable``        ``true``: create a missing table from the data's schema (else a missing table is an error)
``partitionBy``        with ``createTable``: comma-separated partition columns (Spark refuses ``partitionBy``
                       for Python sources)
``tableOptions``       with ``createTable``: table options as ``key=value,key=value``
``overwritePartition`` batch overwrite of one partition: ``dt=2026-11-01[,k=v]``
``snapshotId``         reads: time travel to a snapshot id
``pushFilters``        reads: ``true`` to prune files with Spark's filters (also set the session conf
                       ``spark.sql.python.filterPushdown.enabled=true``)
``asOf``               reads: time travel to an instant (epoch millis or ISO-8601)
``storage.<key>``      an fsspec/s3fs storage option, e.g. ``storage.endpoint_url``; never logged
=====================  ===================================================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import lakefmt
from lakefmt.read.scan import parse_as_of

__all__ = ["DefaultSource", "LakefmtDataSource"]

READ_SPLIT_BYTES = 128 << 20


def _flag(options: Mapping[str, str], key: str) -> bool:
    return str(options.get(key, "false")).strip().lower() in ("1", "true", "yes")


def _pairs(text: str, what: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise lakefmt.LakefmtError(f"option {what}: {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class TableRef:
    """Where the table is and how to reach it: picklable, travels to executors and the commit worker."""

    path: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # storage options (credentials) never printed
        return f"TableRef({self.path!r})"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> TableRef:
        path = options.get("path")
        if not path:
            raise lakefmt.LakefmtError("no table path: use .save(uri), .load(uri), .start(uri) or .option('path', uri)")
        storage = {k[len("storage.") :]: v for k, v in options.items() if k.lower().startswith("storage.")}
        return cls(str(path), storage)

    def open(self) -> lakefmt.Table:
        return lakefmt.open_table(self.path, storage_options=self.storage_options)


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


def _table_for_write(ref: TableRef, spark_schema: StructType, options: Mapping[str, str]) -> lakefmt.Table:
    """Open the target table (or create it when asked) and check the incoming schema against it, on the
    driver, before any task runs: a mismatch fails the job with the columns named and commits nothing."""
    incoming = _normalize(to_arrow_schema(spark_schema, timezone="UTC"))
    try:
        table = ref.open()
    except lakefmt.NotATableError:
        if not _flag(options, "createTable"):
            raise lakefmt.NotATableError(
                f"{ref.path} is not a lakefmt table; create it first, or set .option('createTable', 'true') "
                "to create it from the data's schema"
            ) from None
        partition_by = [p.strip() for p in str(options.get("partitionBy", "")).split(",") if p.strip()]
        table_options = _pairs(str(options.get("tableOptions", "")), "tableOptions")
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


class _BatchWriter(DataSourceArrowWriter):
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


class _StreamWriter(DataSourceStreamArrowWriter):
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
        """See :meth:`_BatchWriter.abort`."""


# -- reading -------------------------------------------------------------------------------------------
@dataclass
class _FilesPartition(InputPartition):
    paths: list[str]


_SPARK_TO_PC = {
    EqualTo: lambda c, v: c == v,
    GreaterThan: lambda c, v: c > v,
    GreaterThanOrEqual: lambda c, v: c >= v,
    LessThan: lambda c, v: c < v,
    LessThanOrEqual: lambda c, v: c <= v,
}


def _to_expression(f: Filter) -> pc.Expression | None:
    """A pyarrow expression for a simple Spark filter on a top-level column (None when not expressible)."""
    attr = getattr(f, "attribute", ())
    if len(attr) != 1:
        return None
    col = pc.field(attr[0])
    if type(f) in _SPARK_TO_PC:
        value = f.value  # type: ignore[attr-defined]
        if value is None or (isinstance(value, float) and value != value):
            return None
        return _SPARK_TO_PC[type(f)](col, value)  # type: ignore[no-untyped-call]
    if isinstance(f, In):
        if any(v is None for v in f.value):
            return None
        return col.isin(list(f.value))
    if isinstance(f, IsNull):
        return col.is_null()
    if isinstance(f, IsNotNull):
        return col.is_valid()
    return None


class _Reader(DataSourceReader):
    def __init__(self, ref: TableRef, options: Mapping[str, str]) -> None:
        self.ref = ref
        self.snapshot_id = int(options["snapshotid"]) if options.get("snapshotid") else None
        as_of = options.get("asof")
        self.as_of = parse_as_of(as_of) if as_of else None
        self.filter: pc.Expression | None = None

    def _scan(self) -> lakefmt.Scan:
        return self.ref.open().scan(filter=self.filter, snapshot_id=self.snapshot_id, as_of=self.as_of)

    def partitions(self) -> list[_FilesPartition]:
        """One partition per read task of about ``READ_SPLIT_BYTES`` (one empty partition for no files)."""
        parts = [_FilesPartition(task.paths) for task in self._scan().plan_tasks(READ_SPLIT_BYTES)]
        return parts or [_FilesPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _FilesPartition)
        if not partition.paths:
            return
        table = self.ref.open()
        schema = (
            table.schema() if self.snapshot_id is None else table.scan(snapshot_id=self.snapshot_id).schema.arrow_schema
        )
        dataset = ds.dataset(
            [table.io.full_path(p) for p in partition.paths],
            schema=schema,
            format="parquet",
            filesystem=table.io.arrow_filesystem(),
        )
        yield from dataset.to_batches()


class _PushdownReader(_Reader):
    """A reader that also prunes by Spark's filters (``spark.sql.python.filterPushdown.enabled=true`` and
    ``.option("pushFilters", "true")``; Spark refuses a reader with ``pushFilters`` when that conf is off)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Simple filters prune manifests and files by partition values and column min/max. Every filter
        is still handed back to Spark, which evaluates it on the rows: pruning only skips files."""
        for f in filters:
            expr = _to_expression(f)
            if expr is not None:
                self.filter = expr if self.filter is None else self.filter & expr
            yield f


class LakefmtDataSource(DataSource):
    """Spark data source ``lakefmt``: batch and streaming writes (exactly-once), batch reads."""

    @classmethod
    def name(cls) -> str:
        return "lakefmt"

    def schema(self) -> StructType:
        table = TableRef.from_options(self.options).open()
        return from_arrow_schema(table.schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = _PushdownReader if _flag(self.options, "pushFilters") else _Reader
        return cls(TableRef.from_options(self.options), self.options)

    def writer(self, schema: StructType, overwrite: bool) -> _BatchWriter:
        ref = TableRef.from_options(self.options)
        _table_for_write(ref, schema, self.options)
        partition = _pairs(str(self.options.get("overwritePartition", "")), "overwritePartition") or None
        if partition and not overwrite:
            raise lakefmt.LakefmtError("option overwritePartition needs .mode('overwrite')")
        return _BatchWriter(ref, overwrite, partition)

    def streamWriter(self, schema: StructType, overwrite: bool) -> _StreamWriter:
        ref = TableRef.from_options(self.options)
        commit_user = self._commit_user(ref)  # first: a stream refused for want of one creates no table
        _table_for_write(ref, schema, self.options)
        return _StreamWriter(ref, commit_user, complete=overwrite)

    def _commit_user(self, ref: TableRef) -> str:
        user = self.options.get("commitUser") or self.options.get("commituser")
        if user:
            return str(user)
        checkpoint = self.options.get("checkpointLocation") or self.options.get("checkpointlocation")
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


#: the name pyspark's data source lookup looks for in a ``pyspark_*`` module
DefaultSource = LakefmtDataSource
