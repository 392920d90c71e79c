"""Rewrites driven from PySpark: row-level delete and compaction of tables too big for one machine, planned on the
driver, the files rewritten in Spark tasks on the executors, committed once on the driver.

>>> import pyspark_lakefmt
>>> pyspark_lakefmt.delete(spark, "s3://bucket/events", "dt < '2026-01-01' AND user_id = 42")
>>> pyspark_lakefmt.compact(spark, "s3://bucket/events", partition={"dt": "2026-11-01"}, sort_by=["user_id"])

Both run lakefmt's own three steps (:mod:`lakefmt.rewrite.delete`, :mod:`lakefmt.rewrite.compact.run`); Spark only
carries the middle one to the executors, as a job of one task per group of files
(``sparkContext.parallelize(groups, len(groups))``). Each
task opens the table from its picklable :class:`lakefmt.Table` (storage options travel with it), writes with the
table's writer and returns lakefmt's small result; nothing is visible until the driver commits. A task that
fails is retried by Spark; files of a job that fails are left to orphan-clean.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt
from lakefmt.errors import RewriteConflictError
from lakefmt.rewrite.compact.plan import plan_compaction
from lakefmt.rewrite.compact.run import commit_compaction, rewrite_group
from lakefmt.rewrite.compact.run import compact as compact_here
from lakefmt.rewrite.compact.types import CompactionGroup, CompactionReport
from lakefmt.rewrite.delete import DeletePlan, DeleteResult, delete_in_files, delete_rows
from lakefmt.spec import CommitMessage, TableSchema
from lakefmt.spec.filters import check_filter

__all__ = ["compact", "delete", "delete_filter"]

#: a delete task reads about this many bytes of files at most, and at least MIN_TASK_BYTES unless the delete is
#: smaller: between the two, enough tasks for two per core (each task writes its own files: fewer tasks, fewer
#: small files)
TASK_BYTES = 256 << 20
MIN_TASK_BYTES = 64 << 20


def delete_filter(table: lakefmt.Table, predicate: str | pc.Expression) -> pc.Expression:
    """A delete's filter: a SQL predicate in lakefmt's SQL subset (comparisons of a column with a literal,
    ``[NOT] IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``; docs/format.md §14.2), bound to the
    table's columns, partition and data columns alike, or a pyarrow expression, checked as
    :meth:`lakefmt.Table.delete` checks it (:func:`lakefmt.spec.filters.check_filter`).
    :class:`lakefmt.InvalidPredicateError` names what is wrong."""
    return check_filter(predicate, table.schema(), "delete filter")


def delete(
    spark: Any,
    uri: str,
    predicate: str | pc.Expression,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> lakefmt.Snapshot | None:
    """Delete the rows of the table at ``uri`` where ``predicate`` is true (``"dt < '2026-01-01'"``; a row where
    it is null stays, as in SQL), as :meth:`lakefmt.Table.delete` does, with the files to rewrite read and
    written in Spark tasks. Returns the new snapshot (kind OVERWRITE, ``lakefmt.operation=delete``), or None when
    no row matched. The predicate is checked on the driver before any task runs."""
    table = lakefmt.open_table(uri, storage_options=dict(storage_options or {}))
    filter = delete_filter(table, predicate)
    parallelism = max(1, int(spark.sparkContext.defaultParallelism))

    def on_executors(plan: DeletePlan) -> Sequence[DeleteResult]:
        groups = _groups(plan, parallelism)
        job = spark.sparkContext.parallelize(groups, len(groups))
        spark.sparkContext.setJobDescription(f"lakefmt delete: {len(plan.candidates)} file(s) of {table.uri}")
        try:
            schema = plan.schema  # the tasks resolve the filter's names under the plan's schema, not their own
            done: list[DeleteResult | _Gone] = job.map(lambda g: _delete_task(table, g, filter, schema)).collect()
        finally:
            spark.sparkContext.setJobDescription(None)
        results = [r for r in done if isinstance(r, DeleteResult)]
        lost = [r for r in done if not isinstance(r, DeleteResult)]
        if lost:  # input files removed and deleted meanwhile: nothing lands (delete_rows plans again or raises)
            table.discard([r.message for r in results])
            raise RewriteConflictError(lost[0][0], gone=[p for _, gone in lost for p in gone])
        return results

    return delete_rows(table, predicate, rewriter=on_executors)  # the text as given: history shows it


#: what a task returns instead of raising :class:`lakefmt.RewriteConflictError` for input files that are gone (a
#: task's exception would reach the driver as Spark's own error, after Spark retried the task): its message, the files
_Gone = tuple[str, tuple[str, ...]]


def _delete_task(
    table: lakefmt.Table, group: pa.Table, filter: pc.Expression, schema: TableSchema | None
) -> DeleteResult | _Gone:
    try:
        return delete_in_files(table, group, filter, schema=schema)
    except RewriteConflictError as exc:
        return str(exc), exc.gone


def _compact_task(
    table: lakefmt.Table, group: CompactionGroup, sort: Sequence[str], target: int
) -> CommitMessage | _Gone:
    try:
        return rewrite_group(table, group, sort, target_file_size=target)
    except RewriteConflictError as exc:
        return str(exc), exc.gone


def _groups(plan: DeletePlan, parallelism: int) -> list[Any]:
    """The plan's candidate files in groups of :data:`MIN_TASK_BYTES` to :data:`TASK_BYTES`, two per core when the
    files are many enough, a partition's files together."""
    per_task = min(TASK_BYTES, max(MIN_TASK_BYTES, -(-plan.candidate_bytes // (2 * parallelism))))
    return plan.groups(per_task)


def compact(
    spark: Any,
    uri: str,
    *,
    partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    target_file_size: int | None = None,
    min_files: int | None = None,
    sort_by: Sequence[str] | str | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> CompactionReport:
    """Compact the table at ``uri`` as :meth:`lakefmt.Table.compact` does (same arguments, same report, one COMPACT
    snapshot that changes no row), with each group of small files rewritten by a Spark task: planned on the
    driver (metadata only), rewritten on the executors, committed once on the driver. Groups that lose input files
    to a concurrent commit are re-planned once and rewritten by Spark again, or given up in the report; a writer
    racing it never fails. ``dry_run``: plan and report, write nothing (no Spark job)."""
    table = lakefmt.open_table(uri, storage_options=dict(storage_options or {}))
    if dry_run:
        return compact_here(
            table, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by, dry_run=True
        )
    started = time.monotonic()
    plan = plan_compaction(table, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by)
    if not plan.groups:
        return compact_here(
            table, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by, dry_run=False
        )
    sort, target = list(plan.sort_by), plan.target_file_size
    unread: set[str] = set()  # input files found removed and deleted: their groups are re-planned or given up

    def on_executors(groups: Sequence[CompactionGroup]) -> Sequence[CommitMessage]:
        job = spark.sparkContext.parallelize(list(groups), len(groups))
        spark.sparkContext.setJobDescription(f"lakefmt compact: {len(groups)} group(s) of {table.uri}")
        try:
            done: list[CommitMessage | _Gone] = job.map(lambda g: _compact_task(table, g, sort, target)).collect()
        finally:
            spark.sparkContext.setJobDescription(None)
        unread.update(p for r in done if not isinstance(r, CommitMessage) for p in r[1])
        return [r for r in done if isinstance(r, CommitMessage)]

    messages = on_executors(plan.groups)
    report = commit_compaction(table, plan, messages, rewrite=on_executors, gone=unread)
    report.seconds = time.monotonic() - started
    return report
