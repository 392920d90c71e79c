"""The public face: create_table, open_table, Table."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt import aliases
from lakefmt.aliases import either
from lakefmt.commit.committer import Committer
from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.errors import TableAlreadyExistsError
from lakefmt.io import FileIO
from lakefmt.io.storage import explains_storage_errors
from lakefmt.maintenance import MaintenanceReport, Progress, remove_orphan_files
from lakefmt.maintenance import background as background_compaction
from lakefmt.maintenance.after_commit import after_commit
from lakefmt.maintenance.retention import expire_with_retention
from lakefmt.meta.history import history as table_history
from lakefmt.meta.location import create_store, first_schema, open_store
from lakefmt.meta.store import MetaStore
from lakefmt.read.changes import table_changes
from lakefmt.read.files import read_planned
from lakefmt.read.inspect import InspectTable
from lakefmt.read.scan import FileTask, Scan, check_snapshot_id
from lakefmt.rewrite.keys.engine_planner import MergePlanner
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import check_filter
from lakefmt.spec.instants import Instant
from lakefmt.table_versions import TableVersions
from lakefmt.table_writes import TableWrites
from lakefmt.units import DEFAULT_ORPHAN_OLDER_THAN, Duration, duration_ms  # also importable here
from lakefmt.write.source import check_same_table, schema_of
from lakefmt.write.writer import TableWriter, writer_schema

__all__ = ["Table", "create_table", "open_table"]

def create_table(
    uri: str,
    schema: Any,
    partition_by: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    *,
    primary_key: Sequence[str] | None = None,
    exist_ok: bool = False,
    primary_keys: Sequence[str] | None = None,
) -> Table:
    """Create an empty table at ``uri`` (a path, ``file://``, ``s3://``, ``memory://`` or any fsspec URL).
    ``schema``: a ``pyarrow.Schema``, or data that has one (a pyarrow Table, RecordBatch or RecordBatchReader, a
    pandas or Polars DataFrame, anything with ``__arrow_c_stream__`` or ``__arrow_c_schema__``): only its schema is
    taken, its rows are not written (:func:`lakefmt.write_table` writes them too). ``primary_key`` makes a key
    table (format version 3: :meth:`Table.upsert`, :meth:`Table.delete_keys`; options ``bucket``,
    ``sequence.field``): its columns become non-null and must include the partition keys (``primary_keys``,
    pypaimon's spelling, is the same keyword).

    ``exist_ok=True`` (pyiceberg's ``create_table_if_not_exists``): if a table already exists at ``uri``, return
    it, provided it is the table asked for: the same columns (names, order, types, nullability, as this call would
    create them), partition keys, primary key and the ``options`` given; otherwise
    :class:`TableAlreadyExistsError` says what differs (a table whose schema evolved since differs too).

    Refuses a location that already holds a table (:class:`TableAlreadyExistsError`) or any other files
    (:class:`LocationNotEmptyError`: maintenance deletes unreferenced files under a table root, so a table
    must own its folder). The schema, its types and ``options`` are checked before anything is written
    (:func:`lakefmt.meta.location.first_schema`).
    """
    primary_key = either("primary_key", primary_key, "primary_keys", primary_keys)
    asked = first_schema(schema_of(schema), partition_by, options, primary_key)
    try:
        store = create_store(uri, asked, storage_options)
    except TableAlreadyExistsError:
        if not exist_ok:
            raise
        table = open_table(uri, storage_options)
        check_same_table(uri, table.table_schema(), asked, options)
        return table
    return Table(store.io, store)


def open_table(uri: str, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Open an existing table; :class:`NotATableError` if ``uri`` holds none (:class:`BucketNotFoundError`, a
    kind of it, when its bucket does not exist).

    ``storage_options`` go to the filesystem (s3fs for ``s3://``); deltalake's keys (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_REGION``, ...) are translated to s3fs's. Missing credentials, an endpoint that
    refuses connections and an unknown option raise lakefmt errors that say what to do (:class:`StorageError`,
    :class:`InvalidStorageOptionError`)."""
    store = open_store(uri, storage_options)
    return Table(store.io, store)


@explains_storage_errors
class Table(TableVersions, TableWrites):
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
        return self._store.all_schemas()

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

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary-key columns (empty for a table without one)."""
        return self.table_schema().primary_keys

    # -- writing ---------------------------------------------------------------------------------------
    def new_writer(
        self, *, writer_id: str | None = None, target_file_size: int | None = None, schema_id: int | None = None,
        creation_time_ms: int | None = None,
    ) -> TableWriter:
        """A task-side writer: ``write`` batches, then ``prepare_commit()`` for a small, picklable message.
        ``target_file_size`` (bytes) overrides the table option ``target-file-size`` for this writer.
        ``schema_id``: write under that schema, not the current one (an engine that checked the data against a
        schema on its driver, and whose tasks start later: a schema change in between must not change what its
        tasks accept; the commit then checks that the files are readable under the schema it records).
        ``creation_time_ms``: the creation time every file records (a rewrite gives its inputs' newest)."""
        schema = writer_schema(self._store, schema_id, target_file_size)
        on_manifest, created = self._store.remember_manifest, creation_time_ms
        return TableWriter(self.io, schema, writer_id=writer_id, on_manifest=on_manifest, creation_time_ms=created)

    def new_committer(
        self, commit_user: str | None = None, *, clock: Callable[[], float] | None = None, write_only: bool = False,
        compact_in_background: bool | None = None,
    ) -> Committer:
        """A committer; ``commit(messages, identifier=n)`` publishes exactly once per (commit user, n).

        ``commit_user`` must be stable across restarts of one logical writer (a non-empty string); None makes
        a one-off user that is never remembered for dedup. ``write_only=True``: its commits never compact nor
        expire automatically, whatever the table's options say (one dedicated job serves many writers; Paimon's
        ``write-only``). ``compact_in_background``: whether the automatic compaction after a commit runs in
        the table object's worker thread (True) or before ``commit`` returns (False); None follows the table
        option ``compaction.async``. A process that ends right after committing (a Spark driver-side worker)
        wants False. ``clock`` (seconds since the epoch) is for tests."""
        clock = clock if clock is not None else self._clock
        after = functools.partial(self._after_commit, compact=not write_only, background=compact_in_background)
        planner = functools.partial(MergePlanner, self.io, self._store, self._store.latest_schema())
        return Committer(self.io, self._store, commit_user, after_commit=after, clock=clock, planner=planner)

    def wait_for_compaction(self, timeout: float | None = None) -> bool:
        """Wait until the automatic compactions that commits through this table object handed to its worker
        thread (``compaction.async``) are done; False if ``timeout`` seconds passed first. Returns at once when
        there are none. At interpreter exit the worker finishes its queue by itself (for up to a minute)."""
        return background_compaction.wait_idle(self._store, timeout)

    def _after_commit(self, snap: Snapshot, *, compact: bool = True, background: bool | None = None) -> None:
        """After a commit landed: automatic compaction and expiration, as the table's options ask
        (:func:`lakefmt.maintenance.after_commit.after_commit`)."""
        after_commit(self, snap, compact=compact, background=background, expire=self.expire_snapshots)

    # -- reading ---------------------------------------------------------------------------------------
    def scan(
        self,
        filter: str | pc.Expression | None = None,
        columns: Sequence[str] | None = None,
        snapshot_id: int | None = None,
        as_of: Instant | None = None,
        *,
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
        tag: str | None = None,
        row_filter: str | pc.Expression | None = None,
        filters: Any = None,
        selected_fields: Sequence[str] | None = None,
    ) -> Scan:
        """Plan a read: the latest snapshot, one by id or timestamp (``as_of``), one by tag (``tag``: it reads
        after its snapshot expired), or what snapshots ``from_snapshot+1 .. to_snapshot`` added. Then
        ``.to_arrow()``, ``.to_batches()``, ``.to_dataset()`` or ``.files()``. ``filter``: SQL predicate text
        (``"id > 3 AND dt IN ('2026-11-01', '2026-11-02')"``; :mod:`lakefmt.spec.sql.predicate`) or a pyarrow
        expression.

        ``as_of`` (here, in :meth:`restore` and everywhere else): a ``datetime`` (naive = UTC), an ISO-8601 string
        (``"2026-11-30T23:59:59Z"``; no offset = UTC) or whole epoch milliseconds (an ``int``); a ``float`` is
        refused (:class:`InvalidTimestampError`) rather than guessed to be seconds or milliseconds.
        Peers' spellings: pyiceberg's ``row_filter`` (SQL text), ``selected_fields``; deltalake's DNF ``filters``."""
        filter = aliases.scan_filter(filter, row_filter=row_filter, filters=filters)
        columns = either("columns", columns, "selected_fields", selected_fields)
        return Scan(
            self.io, self._store, filter=filter, columns=columns, snapshot_id=snapshot_id, as_of=as_of,
            from_snapshot=from_snapshot, to_snapshot=to_snapshot, tag=tag,
        )

    def read_files(
        self, files: Sequence[FileTask], *, schema: TableSchema | int | None = None,
        columns: Sequence[str] | None = None, filter: str | pc.Expression | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of planned files (a scan's ``files()``, or a ``ReadTask``'s ``files``: what one engine task
        reads), in order, as ``schema``'s columns (a schema or its id; default: the current schema; pass the scan's
        ``scan.schema`` for time travel), keeping the rows where ``filter`` is true. Each file is matched to
        ``schema`` by field id (it may have been written before a rename, an added column, a widened type).
        ``filter``: SQL predicate text or a pyarrow expression."""
        target = self.table_schema() if schema is None else schema
        if isinstance(target, int):
            target = self._store.schema(target)
        if filter is not None:
            filter = check_filter(filter, target.arrow_schema, "filter")
        return read_planned(self.io, self._store, files, target, columns=columns, filter=filter)

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        """Shorthand for ``scan(**kwargs).to_arrow()`` (``filter``, ``columns``, ``snapshot_id``, ``as_of``, ``tag``,
        ...)."""
        return self.scan(**kwargs).to_arrow()

    def to_pandas(self, **kwargs: Any) -> Any:
        """Shorthand for ``scan(**kwargs).to_pandas()``; keywords :meth:`scan` does not take go to
        ``pyarrow.Table.to_pandas``. Needs ``lakefmt[pandas]``."""
        scan_kwargs, rest = aliases.split_scan_kwargs(kwargs)
        return self.scan(**scan_kwargs).to_pandas(**rest)

    def to_polars(self, **kwargs: Any) -> Any:
        """Shorthand for ``scan(**kwargs).to_polars()``: a Polars ``LazyFrame``. Needs ``lakefmt[polars]``."""
        return self.scan(**kwargs).to_polars()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The latest snapshot's rows as an Arrow PyCapsule stream, so ``polars.DataFrame(table)``,
        ``pyarrow.table(table)`` and ``duckdb.sql("select * from table")`` read the table (a scan does the same
        for a filter, a projection or another snapshot: :meth:`scan`)."""
        return self.scan().__arrow_c_stream__(requested_schema)

    def changes(
        self,
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        row_kinds: bool = False,
        from_timestamp: Instant | None = None,
        to_timestamp: Instant | None = None,
        from_tag: str | None = None,
        to_tag: str | None = None,
        starting_version: int | None = None,
        ending_version: int | None = None,
        starting_timestamp: Instant | None = None,
        ending_timestamp: Instant | None = None,
    ) -> pa.Table:
        """The rows a range of snapshots inserted, updated and deleted, with ``_change_type``, ``_commit_snapshot``
        and ``_commit_timestamp`` (docs/changes.md). lakefmt's spellings start *after* a snapshot:
        ``changes(a, b)`` reads snapshots ``a+1 .. b`` (``from_snapshot=0``, the default: from the first commit),
        ``from_timestamp`` the changes committed after it, ``from_tag`` those after the tag's snapshot. Delta's
        spellings (delta-rs' ``load_cdf``) start *at* one: ``starting_version=a`` reads ``a .. b`` (0: from the
        table's creation), ``starting_timestamp`` the changes committed at or after it. The end is inclusive in
        every spelling: ``to_snapshot``/``ending_version``, ``to_timestamp``/``ending_timestamp``, ``to_tag``
        (default: the latest snapshot). ``columns`` projects the table's columns, ``filter`` (SQL text or a
        pyarrow expression) keeps rows, ``row_kinds`` shows Paimon's ``_row_kind`` (:func:`lakefmt.read.changes
        .table_changes`)."""
        return table_changes(
            self.io, self._store, from_snapshot, to_snapshot, columns=columns, filter=filter, row_kinds=row_kinds,
            from_timestamp=from_timestamp, to_timestamp=to_timestamp, from_tag=from_tag, to_tag=to_tag,
            starting_version=starting_version, ending_version=ending_version, starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp, now_ms=self._now_ms(),
        )  # fmt: skip

    def files(self, snapshot_id: int | None = None) -> list[FileTask]:
        """The live data files of a snapshot (the latest by default)."""
        return self.scan(snapshot_id=snapshot_id).files()

    @property
    def inspect(self) -> InspectTable:
        """The table's metadata as Arrow tables, as pyiceberg's ``table.inspect``: ``t.inspect.snapshots()``,
        ``.history()``, ``.files()``, ``.delete_files()``, ``.deletion_vectors()``, ``.partitions()``,
        ``.manifests()``, ``.tags()``, ``.audit_log()`` (:mod:`lakefmt.read.inspect`, docs/maintenance.md)."""
        return InspectTable(self.io, self._store, now_ms=self._now_ms)

    # -- history ---------------------------------------------------------------------------------------
    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The table's history, newest first: a dict per retained snapshot (at most ``limit``), as deltalake's
        ``history()``: ``version`` (the snapshot id), ``timestamp`` (epoch ms), ``operation`` (``WRITE``,
        ``OVERWRITE``, ``DELETE``, ``COMPACT``, ``RESTORE``, ``SCHEMA CHANGE``, ``UPSERT``, ``MERGE``, ``UPGRADE``),
        ``operation_parameters`` (``predicate``, ``partition``, ``mode``), ``rows_added``/``rows_removed``,
        ``files_added``/``files_removed``, ``commit_user``, ``commit_identifier``, and more
        (:func:`lakefmt.meta.history.history_record`)."""
        return table_history(self._store, limit)

    def version(self) -> int | None:
        """The latest snapshot's id, or None for a table without commits."""
        latest = self._store.latest_snapshot()
        return None if latest is None else latest.id

    def snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        return self._store.retained_snapshots()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """One snapshot; :class:`SnapshotNotFoundError` if it never existed or has expired."""
        return self._store.snapshot(snapshot_id)

    def latest_snapshot(self) -> Snapshot | None:
        """The latest snapshot, or None for a table with no commits yet."""
        return self._store.latest_snapshot()

    # -- maintenance -----------------------------------------------------------------------------------
    def expire_snapshots(
        self, *, retain_min: int | None = None, retain_max: int | None = None, older_than: Duration | None = None,
        dry_run: bool = False, progress: Progress | None = None,
    ) -> MaintenanceReport:
        """Expire old snapshots (never the latest; at least ``retain_min`` kept; at most ``retain_max``;
        those committed more than ``older_than`` ago go) and delete the files only they reference.

        A rule not given comes from the table's options, or their defaults: ``snapshot.num-retained.min`` (10),
        ``snapshot.num-retained.max`` (no limit), ``snapshot.time-retained`` (1 hour); ``report.kept_reason``
        says why the kept snapshots were kept (:mod:`lakefmt.maintenance.retention`).
        ``older_than``: a ``timedelta``, a duration string with its unit (``"90m"``, ``"12h"``, ``"7d"``,
        ``"PT1H"``; ``"5"`` is refused) or a number of seconds (``older_than=5`` is five seconds)."""
        older_than_ms = None if older_than is None else duration_ms(older_than)
        return expire_with_retention(
            self.io, self._store, retain_min=retain_min, retain_max=retain_max, older_than_ms=older_than_ms,
            now_ms=self._now_ms(), dry_run=dry_run, progress=progress,
        )

    def remove_orphan_files(
        self, *, older_than: Duration = DEFAULT_ORPHAN_OLDER_THAN, dry_run: bool = False,
        progress: Progress | None = None,
    ) -> MaintenanceReport:
        """Delete files under the table root that no retained snapshot references and that were last
        modified more than ``older_than`` ago (default 1 day, so in-flight commits are never touched)."""
        return remove_orphan_files(
            self.io, self._store, older_than_ms=duration_ms(older_than), dry_run=dry_run, progress=progress
        )

    def commit_user_identifier(self, commit_user: str) -> int | None:
        """The last identifier ``commit_user`` committed, as remembered by the latest snapshot."""
        return self._store.last_identifier(commit_user)

