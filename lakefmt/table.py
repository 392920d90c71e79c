"""The public face: create_table, open_table, Table."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.committer import Committer
from lakefmt.commit.restore import RestorePlan, commit_restore, commit_shown_plan, plan_restore, restore_replans
from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.errors import (
    BucketNotFoundError,
    ConsumerNotFoundError,
    InvalidOptionError,
    InvalidSnapshotIdError,
    LakefmtError,
    LocationNotEmptyError,
    NotATableError,
    SnapshotNotFoundError,
    TableAlreadyExistsError,
    TagNotFoundError,
)
from lakefmt.io import FileIO, file_io_for
from lakefmt.io.paths import is_temp_of
from lakefmt.io.storage import storage_errors
from lakefmt.maintenance import MaintenanceReport, Progress, expire_snapshots, remove_orphan_files
from lakefmt.maintenance import background as background_compaction
from lakefmt.maintenance.compact import auto_compact, auto_compact_after
from lakefmt.meta import consumers as cons
from lakefmt.meta import entries as ents
from lakefmt.meta import tags as tags_store
from lakefmt.meta.store import MetaStore
from lakefmt.options import DEFAULT_ORPHAN_OLDER_THAN, Duration, TableOptions, duration_ms  # also importable here
from lakefmt.read.files import read_entries
from lakefmt.read.scan import FileTask, Scan, check_snapshot_id
from lakefmt.rewrite.base import RewriteTarget
from lakefmt.rewrite.compact import compact
from lakefmt.rewrite.compact_types import CompactionReport
from lakefmt.rewrite.delete import delete_rows
from lakefmt.spec import CommitKind, CommitMessage, Consumer, Snapshot, TableSchema, layout
from lakefmt.spec.consumer import MAX_SNAPSHOT_ID, check_consumer_id
from lakefmt.spec.instants import Instant
from lakefmt.spec.scope import OverwriteScope, check_partition_given
from lakefmt.spec.tag import Tag, check_tag_name
from lakefmt.spec.types import type_to_json
from lakefmt.write.conform import conform, fill_missing
from lakefmt.write.writer import TableWriter, as_tables

__all__ = ["Table", "create_table", "open_table"]

log = logging.getLogger("lakefmt.table")


def create_table(
    uri: str,
    schema: pa.Schema,
    partition_by: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Table:
    """Create an empty table at ``uri`` (a path, ``file://``, ``s3://``, ``memory://`` or any fsspec URL).

    Refuses a location that already holds a table (:class:`TableAlreadyExistsError`) or any other files
    (:class:`LocationNotEmptyError`: maintenance deletes unreferenced files under a table root, so a table
    must own its folder).
    """
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    for f in schema:
        type_to_json(f.type)  # UnsupportedTypeError names the type early
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    TableOptions.check_keys(opts)  # UnknownOptionError: a typo never silently leaves a default in force
    TableOptions.from_map(opts).check()  # InvalidOptionError names a bad option before anything is written
    table_schema = TableSchema(
        id=0,
        arrow_schema=pa.schema(list(schema)),
        partition_keys=tuple(partition_by or ()),
        options=opts,
        time_millis=int(time.time() * 1000),
    )
    with storage_errors(uri, storage_options or {}):  # no credentials, an endpoint that does not answer, ...
        io = file_io_for(uri, dict(storage_options or {}))
        bucket = io.missing_bucket()
        if bucket is not None:
            raise BucketNotFoundError(f"cannot create a table at {uri}: the bucket {bucket!r} does not exist")
        return _create_table(uri, io, table_schema, dict(storage_options or {}))


def _create_table(uri: str, io: FileIO, table_schema: TableSchema, storage_options: dict[str, Any]) -> Table:
    store = MetaStore(io)
    if store.schema_ids():
        raise TableAlreadyExistsError(f"a lakefmt table already exists at {uri}")
    outer = _enclosing_table(io.uri, storage_options)
    if outer is not None:
        raise LocationNotEmptyError(
            f"{uri} is inside the lakefmt table at {outer}, whose maintenance owns every file under its root "
            "(orphan-clean would delete this table); create the table outside it"
        )
    # a temp file of an interrupted create (schema/.schema-0.tmp-...) is not someone else's data
    stray = next((f for f in io.walk() if not is_temp_of(layout.schema_path(0), f.path)), None)
    if stray is not None:
        raise LocationNotEmptyError(
            f"{uri} is not empty (it holds {stray.path!r}); create the table in an empty location"
        )
    if not io.publish(layout.schema_path(0), table_schema.to_json()):
        raise TableAlreadyExistsError(f"a lakefmt table was created at {uri} concurrently")
    return Table(io, store)


def open_table(uri: str, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Open an existing table; :class:`NotATableError` if ``uri`` holds none (:class:`BucketNotFoundError`, a
    kind of it, when its bucket does not exist).

    ``storage_options`` go to the filesystem (s3fs for ``s3://``); deltalake's keys (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_REGION``, ...) are translated to s3fs's. Missing credentials, an endpoint that
    refuses connections and an unknown option raise lakefmt errors that say what to do (:class:`StorageError`,
    :class:`InvalidStorageOptionError`)."""
    with storage_errors(uri, storage_options or {}):
        io = file_io_for(uri, dict(storage_options or {}))
        store = MetaStore(io)
        try:
            store.latest_schema()  # raises NotATableError
        except NotATableError as exc:
            bucket = io.missing_bucket()
            if bucket is not None:
                message = f"{uri} is not a lakefmt table: the bucket {bucket!r} does not exist"
                raise BucketNotFoundError(message) from exc
            raise
    return Table(io, store)


class Table:
    """A lakefmt table. Cheap to create; holds no open resources; picklable (storage options included,
    live clients excluded).

    A Table object is bound to the table it opened, like an open file: it keeps its schema and caches the
    metadata it read or wrote (immutable files, and the last snapshot it saw). If the folder is deleted and
    a new table is created at the same location, open that one anew."""

    def __init__(self, io: FileIO, store: MetaStore, *, clock: Callable[[], float] | None = None) -> None:
        self.io = io
        self._store = store
        self._clock = clock  # seconds since the epoch, for the snapshots' commit times (tests set it)

    def __repr__(self) -> str:
        return f"Table({self.io.uri!r})"

    @property
    def uri(self) -> str:
        return self.io.uri

    # -- schema ----------------------------------------------------------------------------------------
    def table_schema(self, snapshot_id: int | None = None) -> TableSchema:
        """The current schema with partition keys, options and field ids; with ``snapshot_id``, the schema that
        snapshot was committed under (what time travel to it reads with)."""
        if snapshot_id is None:
            return self._store.latest_schema()
        return self._store.schema(self._store.snapshot(check_snapshot_id(snapshot_id)).schema_id)

    def schema(self, snapshot_id: int | None = None) -> pa.Schema:
        """The current Arrow schema; with ``snapshot_id``, the one that snapshot was committed under."""
        return self.table_schema(snapshot_id).arrow_schema

    def schemas(self) -> list[TableSchema]:
        """Every schema the table has had, oldest first (``schema/schema-<id>``; a fresh listing)."""
        ids = self._store.schema_ids()
        if ids:
            self._store.latest_schema(refresh=True)
        return [self._store.schema(i) for i in ids]

    def update_schema(self) -> UpdateSchema:
        """Change the schema: ``with t.update_schema() as u: u.add_column("country", pa.string())`` (also
        ``delete_column``/``drop_column``, ``rename_column``, ``update_column`` to widen a type,
        ``make_column_optional``/``make_nullable``, ``move_first``, ``move_before``, ``move_after``,
        ``union_by_name``: pyiceberg's names and keywords). The changes apply in order and commit together as
        the next schema when the block ends; a refused change raises :class:`SchemaEvolutionError` and the table
        stays as it was. Files are never rewritten: readers match them by field id. The first change of a
        format-version-1 table upgrades it to version 2."""
        return UpdateSchema(self.io, self._store, clock=self._clock, after_commit=self._after_commit)

    def upgrade(self, *, dry_run: bool = False) -> TableSchema:
        """Upgrade a format-version-1 table to version 2: a new schema with the same columns and field ids
        assigned in column order (``schema/schema-<n+1>``), and a snapshot that records it. Version-1 readers can
        no longer read the table's new snapshots afterwards. Returns the new schema (``dry_run``: the schema it
        would publish, nothing written); a version-2 table is returned as it is."""
        update = UpdateSchema(self.io, self._store, clock=self._clock, upgrade=True, after_commit=self._after_commit)
        if dry_run:
            return update.preview() or update.base
        return update.commit()

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.table_schema().partition_keys

    @property
    def options(self) -> dict[str, str]:
        return dict(self.table_schema().options)

    # -- writing ---------------------------------------------------------------------------------------
    def new_writer(
        self,
        *,
        writer_id: str | None = None,
        target_file_size: int | None = None,
        schema_id: int | None = None,
        creation_time_ms: int | None = None,
    ) -> TableWriter:
        """A task-side writer: ``write`` batches, then ``prepare_commit()`` for a small, picklable message.
        ``target_file_size`` (bytes) overrides the table option ``target-file-size`` for this writer.
        ``schema_id``: write under that schema, not the current one (an engine that checked the data against a
        schema on its driver, and whose tasks start later: a schema change in between must not change what its
        tasks accept; the commit then checks that the files are readable under the schema it records).
        ``creation_time_ms``: the creation time every file records (a rewrite gives its inputs' newest)."""
        schema = self.table_schema()
        if schema_id is not None and schema_id != schema.id:  # its columns, the table's options of now
            schema = dataclasses.replace(self._store.schema(schema_id), options=dict(schema.options))
        if target_file_size is not None:
            schema = dataclasses.replace(schema, options={**schema.options, "target-file-size": str(target_file_size)})
        return TableWriter(
            self.io,
            schema,
            writer_id=writer_id,
            on_manifest=self._store.remember_manifest,
            creation_time_ms=creation_time_ms,
        )

    def new_committer(
        self,
        commit_user: str | None = None,
        *,
        clock: Callable[[], float] | None = None,
        write_only: bool = False,
        compact_in_background: bool | None = None,
    ) -> Committer:
        """A committer; ``commit(messages, identifier=n)`` publishes exactly once per (commit user, n).

        ``commit_user`` must be stable across restarts of one logical writer (a non-empty string); None makes
        a one-off user that is never remembered for dedup. ``write_only=True``: its commits never compact
        automatically, whatever ``compaction.auto`` says (one dedicated compactor serves many writers; Paimon's
        ``write-only``). ``compact_in_background``: whether the automatic compaction after a commit runs in
        the table object's worker thread (True) or before ``commit`` returns (False); None follows the table
        option ``compaction.async``. A process that ends right after committing (a Spark driver-side worker)
        wants False. ``clock`` (seconds since the epoch) is for tests."""
        clock = clock if clock is not None else self._clock
        after = functools.partial(self._after_commit, compact=not write_only, background=compact_in_background)
        return Committer(self.io, self._store, commit_user, after_commit=after, clock=clock)

    def wait_for_compaction(self, timeout: float | None = None) -> bool:
        """Wait until the automatic compactions that commits through this table object handed to its worker
        thread (``compaction.async``) are done; False if ``timeout`` seconds passed first. Returns at once when
        there are none. At interpreter exit the worker finishes its queue by itself (for up to a minute)."""
        return background_compaction.wait_idle(self._store, timeout)

    def _after_commit(self, snap: Snapshot, *, compact: bool = True, background: bool | None = None) -> None:
        """After a commit landed: compact the partitions it touched when ``compaction.auto`` is set (unless the
        committer or the table is ``write-only``; here, or in the table's worker thread with
        ``compaction.async``), then expire snapshots when the table's options ask for it
        (``snapshot.num-retained.*``, ``snapshot.time-retained``). Best effort: the commit has landed; an error
        is logged, a failed compaction is retried after the next commit, a failed expiration by the next commit
        or by ``lakefmt expire``; an interrupt propagates."""
        options = self.table_schema().table_options
        auto = compact and options.compaction_auto and not options.write_only
        if auto and snap.commit_kind is not CommitKind.COMPACT:
            in_background = options.compaction_async if background is None else background
            if in_background:
                background_compaction.submit(
                    self._store, snap, functools.partial(auto_compact_after, self), options.compaction_max_file_num
                )
            else:
                try:
                    auto_compact(self, snap)
                except Exception as exc:  # the data commit has landed; compaction is optional
                    log.warning(
                        "automatic compaction after snapshot %d failed: %s: %s", snap.id, type(exc).__name__, exc
                    )
        if not options.auto_expire:
            return
        with contextlib.suppress(Exception):  # botocore's connection errors are not OSErrors
            self.expire_snapshots(
                retain_min=options.snapshot_retained_min,
                retain_max=options.snapshot_retained_max,
                older_than=None
                if options.snapshot_time_retained_ms is None
                else datetime.timedelta(milliseconds=options.snapshot_time_retained_ms),
            )

    def append(self, data: Any, *, schema_mode: Literal["merge"] | None = None) -> Snapshot | None:
        """Append rows (Table, RecordBatch, RecordBatchReader or iterable of batches) in one snapshot.

        ``schema_mode="merge"``: first add the columns of the data (its first batch's schema) that the table
        lacks, as nullable columns (and the fields its struct columns lack), in a schema change of their own; the
        table's nullable columns the data lacks are written as nulls (Delta's mergeSchema). Without it, a column
        the table does not have, or one the data lacks, is refused (:class:`SchemaMismatchError`)."""
        return self._write_and_commit(data, None, schema_mode=schema_mode)

    def overwrite(
        self,
        data: Any,
        partition: Mapping[str, Any] | None = None,
        *,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
    ) -> Snapshot | None:
        """Replace rows with ``data`` in one snapshot: the whole table (nothing given), one partition
        (``partition={"dt": "2026-11-01"}``), the partitions matching a predicate on partition columns
        (``where="dt >= '2026-11-01' AND dt < '2026-12-01'"``, or a pyarrow expression), or exactly the
        partitions ``data`` has rows in (``dynamic=True``). Files are replaced whole, by their partition values.

        A row of ``data`` outside a ``partition`` or ``where`` scope is refused (:class:`InvalidPartitionError`)
        before it is written, and nothing is committed; a predicate on a data column is refused
        (:class:`InvalidPredicateError`: row-level deletes do not exist yet)."""
        check_partition_given(partition)
        scope = {"partition": partition or None, "where": where, "dynamic": dynamic}
        return self._write_and_commit(data, scope)

    def delete(self, filter: pc.Expression) -> Snapshot | None:
        """Delete the rows where ``filter`` (a pyarrow expression, as in :meth:`scan`) is true, in one snapshot of
        kind OVERWRITE with the property ``lakefmt.operation=delete``; returns it, or None when no row matched.

        A row where the filter is null (``pc.field("x") > 5`` for a null ``x``) stays, as in SQL. A file whose
        every row matches is removed by its metadata alone (partition values, min/max); a file where some rows
        match is rewritten without them; a file where none match is left as it is. Appends committed meanwhile
        never conflict; a concurrent commit that removed a file this delete rewrites is a
        :class:`RewriteConflictError` and nothing lands (after a compaction alone, the delete re-plans once).
        A filter that is not an expression is a ``TypeError``; one on a missing column or comparing a column with
        a value of another type, an :class:`InvalidPredicateError`. See :mod:`lakefmt.rewrite.delete`."""
        return delete_rows(self, filter)

    def overwrite_scope(
        self,
        *,
        partition: Mapping[str, Any] | None = None,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
    ) -> OverwriteScope:
        """The scope of an overwrite (see :meth:`overwrite`), checked against the current schema. Engines that
        write in tasks check each batch with ``scope.check_rows(batch)`` before writing it, so that an
        out-of-scope row fails the task before any file is written; the committer checks again."""
        check_partition_given(partition)
        return OverwriteScope.bind(self.table_schema(), partition=partition, where=where, dynamic=dynamic)

    def _write_and_commit(
        self, data: Any, overwrite: dict[str, Any] | None, *, schema_mode: str | None = None
    ) -> Snapshot | None:
        parts = as_tables(data)
        if schema_mode is not None:
            if schema_mode != "merge":
                raise InvalidOptionError(f"schema_mode must be 'merge' or None, got {schema_mode!r}")
            first = next(iter(parts), None)
            if first is not None:
                update = self.update_schema().union_by_name(first.schema)
                merged = update.preview()
                if merged is not None:  # rows the merged table refuses add no column: check before publishing
                    conform(fill_missing(first, merged.arrow_schema), merged.arrow_schema)
                target = update.commit().arrow_schema
                parts = (fill_missing(p, target) for p in itertools.chain([first], parts))
        scope = self.overwrite_scope(**overwrite) if overwrite is not None else None
        writer = self.new_writer()
        with writer:  # an error here deletes what the writer wrote
            for part in parts:
                if scope is not None:
                    scope.check_rows(part)
                writer.write(part)
            message = writer.prepare_commit()
        committer = self.new_committer()
        try:
            if overwrite is None:
                return committer.commit([message], identifier=0)
            return committer.overwrite([message], identifier=0, **overwrite)
        except BaseException:
            # An unknown outcome (CommitStateUnknownError, an interrupt during or after the publish) may have
            # landed: then nothing may be deleted. Only a commit known not to have landed is cleaned up.
            if not committer.may_have_landed:
                _discard(self.io, message, writer)
            raise

    def rewrite_target(self) -> RewriteTarget:
        """What a rewrite (compaction, row-level delete: :mod:`lakefmt.rewrite`) needs of this table: its storage,
        metadata store, writer and committer factories, after-commit work and the discarding of written files."""
        return RewriteTarget(
            self.io, self._store, self.new_writer, self.new_committer, self._after_commit, self.discard, self._clock
        )

    def discard(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the data files and per-task manifests of commit messages that will never be committed
        (a replayed streaming batch that dedup skipped, a job given up on). Only for messages known not to
        have landed: their files are referenced by no snapshot. Best effort; orphan-clean is the backstop."""
        for message in messages:
            for meta in message.manifests:
                with contextlib.suppress(LakefmtError, OSError):
                    entries = self._store.manifest(meta.file_name)
                    ents.check_data_paths(entries, f"manifest {meta.file_name}")
                    self._store.forget_manifest(meta.file_name)  # a later commit of it must find it gone
                    for path in ents.paths(entries):
                        self.io.delete(path)
                    self.io.delete(layout.manifest_path(meta.file_name))

    # -- reading ---------------------------------------------------------------------------------------
    def scan(
        self,
        filter: pc.Expression | None = None,
        columns: Sequence[str] | None = None,
        snapshot_id: int | None = None,
        as_of: Instant | None = None,
        *,
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
        tag: str | None = None,
    ) -> Scan:
        """Plan a read: the latest snapshot, one by id or timestamp (``as_of``), one by tag (``tag``: it reads
        after its snapshot expired), or what snapshots ``from_snapshot+1 .. to_snapshot`` added. Then
        ``.to_arrow()``, ``.to_batches()``, ``.to_dataset()`` or ``.files()``.

        ``as_of`` (here, in :meth:`restore` and everywhere else): a ``datetime`` (naive = UTC), an ISO-8601 string
        (``"2026-11-30T23:59:59Z"``; no offset = UTC) or whole epoch milliseconds (an ``int``); a ``float`` is
        refused (:class:`InvalidTimestampError`) rather than guessed to be seconds or milliseconds."""
        return Scan(
            self.io,
            self._store,
            filter=filter,
            columns=columns,
            snapshot_id=snapshot_id,
            as_of=as_of,
            from_snapshot=from_snapshot,
            to_snapshot=to_snapshot,
            tag=tag,
        )

    def read_files(
        self,
        files: Sequence[FileTask],
        *,
        schema: TableSchema | int | None = None,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of planned files (a scan's ``files()``, or a ``ReadTask``'s ``files``: what one engine task
        reads), in order, as ``schema``'s columns (a schema or its id; default: the current schema; pass the scan's
        ``scan.schema`` for time travel), keeping the rows where ``filter`` is true. Each file is matched to
        ``schema`` by field id (it may have been written before a rename, an added column, a widened type)."""
        target = self.table_schema() if schema is None else schema
        if isinstance(target, int):
            target = self._store.schema(target)
        if not files:
            return iter(())
        default = target.id
        entries = pa.table(
            {
                ents.PATH: pa.array([f.path for f in files], pa.string()),
                ents.SCHEMA_ID: pa.array([default if f.schema_id is None else f.schema_id for f in files], pa.int64()),
            }
        )
        ents.check_data_paths(entries, "read_files")
        return read_entries(self.io, entries, target, columns=columns, filter=filter, schemas=self._store.schema)

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        """Shorthand for ``scan(**kwargs).to_arrow()``."""
        return self.scan(**kwargs).to_arrow()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The latest snapshot's rows as an Arrow PyCapsule stream, so ``polars.DataFrame(table)``,
        ``pyarrow.table(table)`` and ``duckdb.sql("select * from table")`` read the table (a scan does the same
        for a filter, a projection or another snapshot: :meth:`scan`)."""
        return self.scan().__arrow_c_stream__(requested_schema)

    def files(self, snapshot_id: int | None = None) -> list[FileTask]:
        """The live data files of a snapshot (the latest by default)."""
        return self.scan(snapshot_id=snapshot_id).files()

    # -- history ---------------------------------------------------------------------------------------
    def snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        out = []
        for sid in self._store.snapshot_ids():
            snap = self._store.try_snapshot(sid)
            if snap is not None:
                out.append(snap)
        latest = self._store.latest_snapshot()
        if latest is not None and (not out or out[-1].id < latest.id):
            out.extend(self._store.snapshot(i) for i in range(out[-1].id + 1 if out else latest.id, latest.id + 1))
        return out

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """One snapshot; :class:`SnapshotNotFoundError` if it never existed or has expired."""
        return self._store.snapshot(snapshot_id)

    def latest_snapshot(self) -> Snapshot | None:
        """The latest snapshot, or None for a table with no commits yet."""
        return self._store.latest_snapshot()

    # -- maintenance -----------------------------------------------------------------------------------
    def expire_snapshots(
        self,
        *,
        retain_min: int = 1,
        retain_max: int | None = None,
        older_than: Duration | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> MaintenanceReport:
        """Expire old snapshots (never the latest; at least ``retain_min`` kept; at most ``retain_max``;
        those committed more than ``older_than`` ago go) and delete the files only they reference.

        ``older_than``: a ``timedelta``, a duration string with its unit (``"90m"``, ``"12h"``, ``"7d"``,
        ``"PT1H"``; ``"5"`` is refused) or a number of seconds (``older_than=5`` is five seconds)."""
        return expire_snapshots(
            self.io,
            self._store,
            retain_min=retain_min,
            retain_max=retain_max,
            older_than_ms=None if older_than is None else duration_ms(older_than),
            dry_run=dry_run,
            progress=progress,
        )

    def remove_orphan_files(
        self,
        *,
        older_than: Duration = DEFAULT_ORPHAN_OLDER_THAN,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> MaintenanceReport:
        """Delete files under the table root that no retained snapshot references and that were last
        modified more than ``older_than`` ago (default 1 day, so in-flight commits are never touched)."""
        return remove_orphan_files(
            self.io, self._store, older_than_ms=duration_ms(older_than), dry_run=dry_run, progress=progress
        )

    def compact(
        self,
        partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        target_file_size: int | None = None,
        min_files: int | None = None,
        sort_by: Sequence[str] | str | None = None,
        dry_run: bool = False,
        parallelism: int | None = None,
        progress: Progress | None = None,
    ) -> CompactionReport:
        """Rewrite small data files into files of about ``target_file_size`` bytes (default: the table option
        ``target-file-size``), in one snapshot of kind COMPACT that changes no row and no commit user's dedup
        state; incremental reads and streams skip it.

        Per partition (``partition``: values of some or all partition keys, or a list of them; None: all), the
        files under 3/4 of the target are bin-packed in commit order, once a partition holds ``min_files`` of
        them (default: ``compaction.min.file-num``, 5); larger files are left alone. ``sort_by``: columns to sort
        each partition's rewritten rows by, so that min/max pruning gets sharp. ``dry_run``: plan and report,
        write nothing. ``parallelism``: rewrite this many groups at once (threads). ``progress(done, total,
        what)`` is called per group rewritten.

        Writers racing a compaction never fail. A compaction that loses input files to a concurrent commit
        re-plans those partitions once, or gives them up (:attr:`CompactionReport.given_up`); it never raises
        a conflict. An unknown partition (:class:`InvalidPartitionError`), ``target_file_size`` or ``min_files``
        below 1 (:class:`InvalidOptionError`) or an unknown sort column (:class:`SchemaMismatchError`) is refused
        before anything is written. The distributable steps: :mod:`lakefmt.rewrite.compact`."""
        return compact(
            self,
            partition,
            target_file_size=target_file_size,
            min_files=min_files,
            sort_by=sort_by,
            dry_run=dry_run,
            parallelism=parallelism,
            progress=progress,
        )

    # -- consumers -------------------------------------------------------------------------------------
    def set_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        """Record that consumer ``consumer_id`` has finished reading every snapshot before ``next_snapshot``
        (create its record, or move it, forward or back). Expiration then keeps every snapshot from
        ``next_snapshot`` on, until the record is older than the table option ``consumer.expiration-time``
        (recording the same position again renews it). One atomic write of ``consumer/consumer-<id>``.

        ``consumer_id``: 1 to 200 characters of ``A-Z a-z 0-9 . _ -``, starting with a letter, a digit or
        ``_`` (:class:`InvalidConsumerIdError` otherwise). ``next_snapshot``: a snapshot id (>= 1); one past the
        latest snapshot means "read everything so far"."""
        check_consumer_id(consumer_id)
        if isinstance(next_snapshot, bool) or not isinstance(next_snapshot, int):
            raise TypeError(f"next_snapshot must be a whole number, got {next_snapshot!r}")
        if not 1 <= next_snapshot <= MAX_SNAPSHOT_ID:
            raise InvalidSnapshotIdError(
                f"next_snapshot {next_snapshot} is invalid: a consumer's next snapshot is a snapshot id (1 or more)"
            )
        now_ms = int((self._clock or time.time)() * 1000)
        sync = self.table_schema().table_options.fsync
        cons.write_consumer(self.io, Consumer(consumer_id, next_snapshot, now_ms), sync=sync)

    def consumer(self, consumer_id: str) -> Consumer | None:
        """One consumer's record (one read), or None if the table has none for ``consumer_id``;
        :class:`CorruptMetadataError` if its file cannot be read. Other consumers' files are not read."""
        return cons.read_consumer(self.io, consumer_id)

    def consumers(self) -> list[Consumer]:
        """Every recorded consumer, by id (expired ones too: see ``consumer.expiration-time``).
        :class:`CorruptMetadataError` names any consumer file that cannot be read."""
        return sorted(cons.list_consumers(self.io).check(), key=lambda c: c.consumer_id)

    def delete_consumer(self, consumer_id: str) -> None:
        """Delete a consumer's record (also an unreadable one), so it no longer holds snapshots back.
        :class:`ConsumerNotFoundError` if the table has no consumer ``consumer_id``."""
        path = layout.consumer_path(check_consumer_id(consumer_id))
        try:
            self.io.read(path)
        except FileNotFoundError:
            known = ", ".join(c.consumer_id for c in cons.list_consumers(self.io).consumers) or "none"
            raise ConsumerNotFoundError(
                f"{self.uri} has no consumer {consumer_id!r} (its consumers: {known})"
            ) from None
        cons.delete_consumer(self.io, consumer_id)

    # -- tags and restore ------------------------------------------------------------------------------
    def create_tag(self, name: str, snapshot_id: int | None = None, *, retain: Duration | None = None) -> Tag:
        """Name snapshot ``snapshot_id`` (the latest by default) ``name``: ``scan(tag=name)`` reads it, and
        ``expire`` and ``orphan-clean`` keep every file it reads (also after its snapshot expired) until the tag
        is deleted or ``retain`` (a ``timedelta``, ``"30d"`` or seconds) has passed since its creation. A tag never
        holds other snapshots back from expiration. One exclusive create of ``tag/tag-<name>``.

        ``name``: the rules of consumer ids (:class:`InvalidTagNameError`); ``retain``: a positive duration
        (:class:`InvalidOptionError`). :class:`TagAlreadyExistsError` if the name is taken (of two racing creates,
        one wins); :class:`SnapshotNotFoundError` if the snapshot does not exist, has expired, or expired while
        the tag was created."""
        check_tag_name(name)
        if snapshot_id is None:
            snap = self._store.latest_snapshot()
            if snap is None:
                raise SnapshotNotFoundError(f"{self.uri} has no snapshot to tag yet")
        else:
            snap = self._store.snapshot(check_snapshot_id(snapshot_id))
        retain_ms = None if retain is None else tags_store.check_retain(retain)
        sync = self.table_schema().table_options.fsync
        return tags_store.tag_snapshot(self._store, name, snap, retain_ms=retain_ms, now_ms=self._now_ms(), sync=sync)

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name`` (also an unreadable or expired one). The files only it kept are left for
        ``orphan-clean`` (expiration has already passed them). :class:`TagNotFoundError` if there is none."""
        check_tag_name(name)
        try:
            self.io.read(layout.tag_path(name))
        except FileNotFoundError:
            known = ", ".join(repr(t.name) for t in tags_store.list_tags(self.io).tags) or "none"
            raise TagNotFoundError(f"{self.uri} has no tag {name!r} (its tags: {known})") from None
        tags_store.delete_tag(self.io, name)

    def tags(self) -> list[Tag]:
        """Every tag, by name (expired ones too: ``Tag.expired(now_ms)``). :class:`CorruptMetadataError` names
        any tag file that cannot be read."""
        return list(tags_store.list_tags(self.io).check().tags)

    def plan_restore(
        self,
        snapshot_id: int | None = None,
        *,
        tag: str | None = None,
        as_of: Instant | None = None,
    ) -> RestorePlan:
        """What :meth:`restore` would do now (reads metadata, writes nothing): the files (and rows) it would
        remove and add again."""
        target = self._restore_target(snapshot_id, tag, as_of)
        return plan_restore(self._store, target, tag=tag)

    def restore(
        self,
        snapshot_id: int | None = None,
        *,
        tag: str | None = None,
        as_of: Instant | None = None,
    ) -> Snapshot | None:
        """Commit a new snapshot whose rows equal those of snapshot ``snapshot_id``, of tag ``tag`` or of the
        snapshot current at ``as_of`` (give one). Newer snapshots stay, so a restore can be undone by restoring
        again. No data file is copied: the target's files are added again. Kind OVERWRITE, with the properties
        ``lakefmt.operation=restore`` and ``lakefmt.restored-snapshot=<id>``. Returns None (and commits nothing)
        when the table already holds exactly the target's files.

        Exactly-once is not rolled back: the commit-user map is carried forward from the latest snapshot, so a
        replayed batch committed after the restored version is still recognised (and skipped). Raises
        :class:`CommitConflictError` if another commit changes the table while the restore commits (nothing
        lands; compactions alone are followed), :class:`SnapshotNotFoundError` or :class:`TagNotFoundError` for a
        target that does not exist or stopped being kept meanwhile, :class:`InvalidCommitError` on a
        format-version-1 table (upgrade it first: :meth:`upgrade`)."""
        target = self._restore_target(snapshot_id, tag, as_of)
        return restore_replans(
            lambda: plan_restore(self._store, target, tag=tag),
            lambda plan: commit_restore(
                self.io, self._store, plan, clock=self._clock or time.time, after_commit=self._after_commit
            ),
        )

    def apply_restore_plan(self, plan: RestorePlan) -> Snapshot | None:
        """Commit exactly ``plan``, from :meth:`plan_restore` (after showing it, say): if another commit changed
        the table since it was planned, :class:`CommitConflictError` and nothing lands (compactions alone are
        followed), so the files removed and added again are those the plan lists. Returns None (and commits
        nothing) for a plan with nothing to do. Otherwise as :meth:`restore`."""
        return commit_shown_plan(
            self.io, self._store, plan, clock=self._clock or time.time, after_commit=self._after_commit
        )

    def _restore_target(
        self, snapshot_id: int | None, tag: str | None, as_of: Instant | None
    ) -> Snapshot:
        given = [n for n, v in (("snapshot_id", snapshot_id), ("tag", tag), ("as_of", as_of)) if v is not None]
        if len(given) != 1:
            raise InvalidOptionError(
                f"name the version to restore: one of snapshot_id, tag or as_of, got {given or 'none'}"
            )
        if tag is not None:
            return tags_store.tagged_snapshot(self.io, check_tag_name(tag), self._now_ms()).snapshot
        return self.scan(snapshot_id=snapshot_id, as_of=as_of).snapshot  # type: ignore[return-value]

    def _now_ms(self) -> int:
        return int((self._clock or time.time)() * 1000)

    def commit_user_identifier(self, commit_user: str) -> int | None:
        """The last identifier ``commit_user`` committed, as remembered by the latest snapshot."""
        latest = self._store.latest_snapshot()
        if latest is None:
            return None
        last = latest.commit_users.get(commit_user)
        return last[0] if last else None


def _enclosing_table(uri: str, storage_options: dict[str, Any]) -> str | None:
    """The URI of a table whose root holds ``uri`` (a folder above it with a ``schema/schema-<n>``), if any.
    ``uri`` is normalized (:func:`~lakefmt.io.paths.normalize_uri`): a local table is an absolute path."""
    if "://" not in uri:
        path = uri
        ancestors = []
        while (parent := os.path.dirname(path)) != path:
            ancestors.append(parent)
            path = parent
    else:
        scheme, rest = uri.split("://", 1)
        parts = rest.rstrip("/").split("/")
        ancestors = [f"{scheme}://{'/'.join(parts[:i])}" for i in range(len(parts) - 1, 0, -1)]
    for ancestor in ancestors:
        if MetaStore(file_io_for(ancestor, storage_options)).schema_ids():
            return ancestor
    return None


def _discard(io: FileIO, message: CommitMessage, writer: TableWriter) -> None:
    """Delete the files of a commit that is known not to have landed (best effort: orphan-clean is the
    backstop)."""
    paths = [f.path for f in writer.written_files] + [layout.manifest_path(m.file_name) for m in message.manifests]
    for path in paths:
        with contextlib.suppress(Exception):
            io.delete(path)
