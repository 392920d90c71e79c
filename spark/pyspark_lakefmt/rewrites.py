"""Rewrites driven from PySpark: row-level delete and compaction of tables too big for one machine, planned on the
driver, the files rewritten in Spark tasks on the executors, committed once on the driver.

>>> import pyspark_lakefmt
>>> pyspark_lakefmt.delete(spark, "s3://bucket/events", "dt < '2026-01-01' AND user_id = 42")
>>> pyspark_lakefmt.compact(spark, "s3://bucket/events", partition={"dt": "2026-11-01"}, sort_by=["user_id"])

Both run lakefmt's own three steps (:mod:`lakefmt.rewrite.delete`, :mod:`lakefmt.rewrite.compact`); Spark only
carries the middle one to the executors, as a job of one task per group of files
(``sparkContext.parallelize(groups, len(groups))``). Each
task opens the table from its picklable :class:`lakefmt.Table` (storage options travel with it), writes with the
table's writer and returns lakefmt's small result; nothing is visible until the driver commits. A task that
fails is retried by Spark; files of a job that fails are left to orphan-clean.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt
from lakefmt.errors import RewriteConflictError
from lakefmt.rewrite.compact import commit_compaction, rewrite_group
from lakefmt.rewrite.compact import compact as compact_here
from lakefmt.rewrite.compact_plan import plan_compaction
from lakefmt.rewrite.compact_types import CompactionGroup, CompactionReport
from lakefmt.rewrite.delete import DeletePlan, DeleteResult, delete_in_files, delete_rows
from lakefmt.spec import CommitMessage, TableSchema
from lakefmt.spec.predicate import And, Compare, InList, Not, Or, Predicate, bind_predicate, parse_predicate

__all__ = ["compact", "delete", "delete_filter"]

#: a delete task reads about this many bytes of files at most, and at least MIN_TASK_BYTES unless the delete is
#: smaller: between the two, enough tasks for two per core (each task writes its own files: fewer tasks, fewer
#: small files)
TASK_BYTES = 256 << 20
MIN_TASK_BYTES = 64 << 20


def delete_filter(table: lakefmt.Table, predicate: str | pc.Expression) -> pc.Expression:
    """A delete's filter: a SQL predicate in lakefmt's SQL subset (comparisons of a column with a literal,
    ``[NOT] IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``; docs/format.md §14.2), bound to the
    table's columns, partition and data columns alike; or a pyarrow expression as it is.
    :class:`lakefmt.InvalidPredicateError` names what is wrong."""
    if isinstance(predicate, pc.Expression):
        return predicate
    if not isinstance(predicate, str):
        kind = type(predicate).__name__
        raise TypeError(f"a delete's predicate must be SQL text or a pyarrow expression, got {kind}")
    pred = parse_predicate(predicate)
    with contextlib.suppress(RecursionError):  # thousands of tests chained: bound as they are
        pred = _ranged(pred, table.schema())
    return bind_predicate(pred, table.schema(), predicate)


#: pyarrow's expression simplifier rules files out by an ``IN`` list under min/max only up to about 50 values
SIMPLIFIED_IN = 50


def _ranged(pred: Predicate, schema: pa.Schema) -> Predicate:
    """``pred`` with every ``IN`` list longer than :data:`SIMPLIFIED_IN` as ``c >= min AND c <= max AND c IN
    (...)``: the same rows under SQL's three-valued logic (a value in the list lies between its least and greatest
    value; a null is unknown either way), but min/max pruning now rules out the files outside that range. Only
    where the literals order as the column does (:func:`_orders_as_column`): the least of ``'9', '10'`` as text
    is not the least as numbers, nor that of ``'2026-01-01 05:00:00', '2026-01-01T01:00:00'`` as timestamps, and
    a range of the wrong ends would keep rows the list deletes."""
    if isinstance(pred, InList) and len(pred.values) > SIMPLIFIED_IN and _orders_as_column(pred, schema):
        try:
            low, high = min(pred.values), max(pred.values)
        except TypeError:  # values of mixed kinds: binding names the problem
            return pred
        return And(Compare(pred.column, ">=", low), And(Compare(pred.column, "<=", high), pred))
    if isinstance(pred, Not):
        return Not(_ranged(pred.operand, schema))
    if isinstance(pred, And | Or):
        return type(pred)(_ranged(pred.left, schema), _ranged(pred.right, schema))
    return pred


def _orders_as_column(pred: InList, schema: pa.Schema) -> bool:
    """Whether Python orders the literals of ``pred`` as its column's type orders their bound values: numbers
    for a numeric column, dates (``DATE '...'``) for a date column, text for a text column (code points order
    as UTF-8 bytes). Text bound to a number, a date or a timestamp is parsed, and orders otherwise."""
    fields = [f for f in schema if f.name == pred.column] or [
        f for f in schema if f.name.lower() == pred.column.lower()
    ]
    if len(fields) != 1:  # unknown or ambiguous: binding names the problem
        return False
    t = fields[0].type
    values = pred.values
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return all(isinstance(v, str) for v in values)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in values)
    if pa.types.is_date(t):
        return all(isinstance(v, datetime.date) and not isinstance(v, datetime.datetime) for v in values)
    return False


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

    return delete_rows(table, filter, rewriter=on_executors)


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
