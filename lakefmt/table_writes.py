"""The part of :class:`lakefmt.Table` that changes rows: append, overwrite, delete, upsert, MERGE, delete by key and
compaction (thin delegations to :mod:`lakefmt.rewrite`), and the rewrite target they share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pyarrow.compute as pc

from lakefmt import aliases
from lakefmt.commit.committer import Committer
from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.io import FileIO
from lakefmt.io.storage import explains_storage_errors
from lakefmt.maintenance import Progress
from lakefmt.meta.store import MetaStore
from lakefmt.rewrite.append import write_and_commit
from lakefmt.rewrite.base import RewriteTarget
from lakefmt.rewrite.compact.run import compact
from lakefmt.rewrite.compact.types import CompactionReport
from lakefmt.rewrite.delete import delete_rows
from lakefmt.rewrite.keys.upsert import delete_keys, delete_marking, upsert
from lakefmt.rewrite.merge.run import TableMerger, merge
from lakefmt.rewrite.replace import replace_where
from lakefmt.spec import CommitMessage, Snapshot, TableSchema
from lakefmt.spec.scope import OverwriteScope, check_partition_given, names_data_columns
from lakefmt.write.discard import discard_messages
from lakefmt.write.writer import TableWriter

__all__ = ["TableWrites"]

Snap = Snapshot | None  #: what a write returns: its snapshot, or None when nothing was committed


@explains_storage_errors
class TableWrites:
    """The writes and rewrites of :class:`lakefmt.Table`, mixed into it (which provides what is declared here)."""

    io: FileIO
    _store: MetaStore
    _clock: Callable[[], float] | None

    if TYPE_CHECKING:

        def table_schema(self, snapshot_id: int | None = None) -> TableSchema: ...

        def update_schema(self) -> UpdateSchema: ...

        def new_writer(
            self, *, writer_id: str | None = None, target_file_size: int | None = None, schema_id: int | None = None,
            creation_time_ms: int | None = None,
        ) -> TableWriter: ...

        def new_committer(
            self, commit_user: str | None = None, *, clock: Callable[[], float] | None = None,
            write_only: bool = False, compact_in_background: bool | None = None,
        ) -> Committer: ...

        def _after_commit(self, snap: Snapshot, *, compact: bool = True, background: bool | None = None) -> None: ...

    def append(self, data: Any, *, schema_mode: Literal["merge"] | None = None) -> Snapshot | None:
        """Append rows (Table, RecordBatch, RecordBatchReader or iterable of batches) in one snapshot.

        ``schema_mode="merge"``: first add the columns of the data (its first batch's schema) that the table
        lacks, as nullable columns (and the fields its struct columns lack), in a schema change of their own; the
        table's nullable columns the data lacks are written as nulls (Delta's mergeSchema). Without it, a column
        the table does not have, or one the data lacks, is refused (:class:`SchemaMismatchError`)."""
        return self._write_and_commit(data, None, schema_mode)

    def overwrite(
        self,
        data: Any,
        partition: Mapping[str, Any] | None = None,
        *,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
        schema_mode: Literal["merge"] | None = None,
    ) -> Snapshot | None:
        """Replace rows with ``data`` in one snapshot: the whole table (nothing given), one partition
        (``partition={"dt": "2026-11-01"}``), the partitions matching a predicate on partition columns
        (``where="dt >= '2026-11-01' AND dt < '2026-12-01'"``, or a pyarrow expression), or exactly the
        partitions ``data`` has rows in (``dynamic=True``). Files are replaced whole, by their partition values.

        A ``where`` that names a data column (``where="x < 0.5"``; Delta's replaceWhere, deltalake's ``predicate=``)
        replaces rows instead: the rows where it is true are deleted and ``data``'s rows added, in one snapshot
        (:mod:`lakefmt.rewrite.replace`; not yet on tables with deletion vectors).

        A row of ``data`` outside a ``partition`` or ``where`` scope (for ``where``: one for which it is not true)
        is refused (:class:`InvalidPartitionError`) before it is written, and nothing is committed.
        ``schema_mode="merge"``: as in :meth:`append`."""
        check_partition_given(partition)
        if where is not None and not partition and not dynamic and names_data_columns(where, self.table_schema()):
            target, evolve = self.rewrite_target(), self.update_schema
            return replace_where(target, data, where, schema_mode=schema_mode, update_schema=evolve)
        scope = {"partition": partition or None, "where": where, "dynamic": dynamic}
        return self._write_and_commit(data, scope, schema_mode)

    def delete(self, filter: str | pc.Expression | None = None, *, predicate: str | pc.Expression | None = None
               ) -> Snapshot | None:
        """Delete the rows where ``filter`` is true, in one snapshot of kind OVERWRITE with the property
        ``lakefmt.operation=delete``; returns it, or None when no row matched. ``filter`` is SQL predicate text
        (``t.delete("id > 3 AND dt = '2026-11-01'")``) or a pyarrow expression, as in :meth:`scan`.

        A row where the filter is null (``x > 5`` for a null ``x``) stays, as in SQL. A file whose
        every row matches is removed by its metadata alone (partition values, min/max); a file where some rows
        match is rewritten without them; a file where none match is left as it is. Appends committed meanwhile
        never conflict; a concurrent commit that removed a file this delete rewrites is a
        :class:`RewriteConflictError` and nothing lands (after a compaction alone, the delete re-plans once).
        On a key table, or with ``write.delete.mode=merge-on-read``, rows are marked in deletion vectors instead.
        A filter that is neither text nor an expression is a ``TypeError``; text that does not parse, or a filter
        on a missing column or comparing a column with a value of another type, an :class:`InvalidPredicateError`.
        ``predicate`` (deltalake's name) is the same as ``filter``. See :mod:`lakefmt.rewrite.delete`."""
        filter = aliases.required("filter", filter, "predicate", predicate, what="delete",
                                  takes="SQL predicate text or a pyarrow.compute.Expression")
        if self.table_schema().deletion_vectors:
            return delete_marking(self, filter)
        return delete_rows(self, filter)

    def upsert(self, data: Any, *, join_cols: Sequence[str] | None = None) -> Snapshot | None:
        """Insert or replace rows by primary key on a key table, in one snapshot: see :func:`lakefmt.rewrite.keys.upsert
        .upsert` (the last row of a key wins, or the largest ``sequence.field``; under the option ``merge-engine``
        ``partial-update``, ``aggregation`` or ``first-row`` the rows combine instead). ``append`` on a key table
        does the same. ``join_cols`` (pyiceberg's keyword) may name the primary key's columns (in any order); other
        columns are a :class:`KeyTableError` (a key table upserts by its key; :meth:`merge` joins on any columns)."""
        aliases.check_join_cols(join_cols, self.table_schema())
        return upsert(self, data)

    def merge(self, source: Any, predicate: str, *, source_alias: str | None = None, target_alias: str | None = None
              ) -> TableMerger:
        """MERGE ``source`` on ``predicate``: ``when_*`` clauses, then ``.execute()`` (rewrite.merge.run)."""
        return merge(self, source, predicate, source_alias=source_alias, target_alias=target_alias)

    def delete_keys(self, keys: Any) -> Snapshot | None:
        """Delete the live rows of ``keys`` (rows with the primary-key columns) on a key table, by deletion vectors,
        in one snapshot; None when no key had a live row."""
        return delete_keys(self, keys)

    def overwrite_scope(
        self, *, partition: Mapping[str, Any] | None = None, where: str | pc.Expression | None = None,
        dynamic: bool = False
    ) -> OverwriteScope:
        """The scope of an overwrite (see :meth:`overwrite`), checked against the current schema. Engines that
        write in tasks check each batch with ``scope.check_rows(batch)`` before writing it, so that an
        out-of-scope row fails the task before any file is written; the committer checks again."""
        check_partition_given(partition)
        return OverwriteScope.bind(self.table_schema(), partition=partition, where=where, dynamic=dynamic)

    def _write_and_commit(self, data: Any, overwrite: dict[str, Any] | None, schema_mode: str | None = None) -> Snap:
        scope = self.overwrite_scope(**overwrite) if overwrite is not None else None
        target, evolve = self.rewrite_target(), self.update_schema
        return write_and_commit(target, data, overwrite, scope, schema_mode=schema_mode, update_schema=evolve)

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
        discard_messages(self.io, self._store, messages)

    def compact(
        self, partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None, *,
        target_file_size: int | None = None, min_files: int | None = None, sort_by: Sequence[str] | str | None = None,
        dry_run: bool = False, parallelism: int | None = None, progress: Progress | None = None,
    ) -> CompactionReport:
        """Rewrite small data files into files of about ``target_file_size`` bytes (default: the table option
        ``target-file-size``), in one snapshot of kind COMPACT that changes no row and no commit user's dedup
        state; incremental reads and streams skip it.

        Per partition (``partition``: values of some or all partition keys, or a list of them; None: all), the
        files under 3/4 of the target are bin-packed in commit order, once a partition holds ``min_files`` of
        them (default: ``compaction.min.file-num``, 5); larger files are left alone. On a key table every bucket
        that holds more than one data file or any deleted row is merged whole, into one file per bucket without
        deleted rows (a full compaction; with ``min_files``: the buckets that hold that many). ``sort_by``: columns
        to sort each partition's rewritten rows by, so that min/max pruning gets sharp. ``dry_run``: plan and report,
        write nothing. ``parallelism``: rewrite this many groups at once (threads). ``progress(done, total,
        what)`` is called per group rewritten.

        Writers racing a compaction never fail. A compaction that loses input files to a concurrent commit
        re-plans those partitions once, or gives them up (:attr:`CompactionReport.given_up`); it never raises
        a conflict. An unknown partition (:class:`InvalidPartitionError`), ``target_file_size`` or ``min_files``
        below 1 (:class:`InvalidOptionError`) or an unknown sort column (:class:`SchemaMismatchError`) is refused
        before anything is written. The distributable steps: :mod:`lakefmt.rewrite.compact.run`."""
        return compact(
            self, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by,
            dry_run=dry_run, parallelism=parallelism, progress=progress,
        )

