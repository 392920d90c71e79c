"""Overwrite by a condition on data columns: ``Table.overwrite(data, where="x < 0.5")`` and ``write_table(uri, data,
mode="overwrite", predicate="x < 0.5")`` (deltalake's ``write_deltalake(..., mode="overwrite", predicate=...)``,
Delta's ``replaceWhere`` on any column).

The rows where the condition is **true** are deleted (the row-level delete of :mod:`lakefmt.rewrite.delete`: a row
where it is false or null stays) and the new rows are added, in **one** snapshot of kind OVERWRITE (operation
``overwrite``, parameters ``mode`` and ``predicate``): a reader sees the table before or after, never between, and
a crash leaves it as it was. Every new row must satisfy the condition (true, not false or null), as Delta's
replaceWhere requires: the rows are checked before anything is written, and one outside it is an
:class:`InvalidPartitionError`, as for a ``where`` on partition columns (whose overwrite replaces whole files by
their partition values instead, :mod:`lakefmt.spec.scope`).

Concurrency is the delete's: appends landing meanwhile never conflict (their rows stay, matching or not); a
concurrent commit that removed a file this overwrite rewrites makes it fail with :class:`RewriteConflictError` and
nothing lands, unless only compactions did: then the delete is planned again (once) on the new snapshot, with the
new rows already written.

Not on tables with deletion vectors (key tables, ``write.delete.mode=merge-on-read``) yet: refused with
:class:`InvalidPredicateError` before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import RewriteProducer
from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.errors import InvalidOptionError, InvalidPartitionError, InvalidPredicateError, RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.rewrite.append import merge_schema_first
from lakefmt.rewrite.base import RewriteTarget, compacted_away, publish
from lakefmt.rewrite.delete import DeleteResult, delete_in_files, plan_delete
from lakefmt.spec import CommitMessage, Snapshot, TableSchema, filters, operations
from lakefmt.write.writer import as_tables

__all__ = ["check_rows_satisfy", "replace_where"]


def check_rows_satisfy(rows: pa.Table | pa.RecordBatch, condition: pc.Expression, text: str) -> None:
    """Refuse ``rows`` of which one does not satisfy ``condition`` (false or null): :class:`InvalidPartitionError`
    naming how many and the first one."""
    if rows.num_rows == 0:
        return
    table = pa.Table.from_batches([rows]) if isinstance(rows, pa.RecordBatch) else rows
    with filters.evaluating(condition, "overwrite condition"):
        outside = table.filter(~pc.coalesce(condition, pc.scalar(False)))
    if outside.num_rows:
        used = filters.referenced_columns(condition, table.schema)
        first = outside.select(used).slice(0, 1).to_pylist()[0]
        raise InvalidPartitionError(
            f"the data to overwrite the rows where {text} has {outside.num_rows} row(s) for which that is not true "
            f"(the first: {first}); every new row must satisfy the condition it replaces (Delta's replaceWhere); "
            "nothing was committed"
        )


def replace_where(
    target: RewriteTarget,
    data: Any,
    where: str | pc.Expression,
    *,
    schema_mode: str | None = None,
    update_schema: Callable[[], UpdateSchema] | None = None,
) -> Snapshot | None:
    """Delete the rows where ``where`` is true and add ``data``'s rows, in one snapshot (see the module docstring);
    None when no row matched and ``data`` has none."""
    schema = target.schema()
    _refuse_vectors(schema, where)
    text = where if isinstance(where, str) else filters.show(where)
    parts: Iterable[pa.Table] = as_tables(data)
    if schema_mode is not None:
        if schema_mode != "merge" or update_schema is None:
            raise InvalidOptionError(f"schema_mode must be 'merge' or None, got {schema_mode!r}")
        parts = merge_schema_first(parts, update_schema)
        schema = target.schema()
    condition = filters.check_filter(where, schema.arrow_schema, "overwrite condition")
    new_rows = _write_new_rows(target, parts, condition, text, schema)
    try:
        return _delete_and_add(target, where, new_rows, text, schema)
    except RewriteConflictError:  # decided before the publish: nothing landed
        target.discard([new_rows])
        raise


def _refuse_vectors(schema: TableSchema, where: Any) -> None:
    if schema.deletion_vectors:
        what = "a key table" if schema.has_primary_key else "a table with deletion vectors (merge-on-read)"
        raise InvalidPredicateError(
            f"overwrite where {where!r}: replacing the rows that match a data column is not supported on {what} "
            "yet; delete(...) then append(...) (two commits), or merge(...) (one)"
        )


def _write_new_rows(target: RewriteTarget, parts: Iterable[pa.Table], condition: pc.Expression, text: str,
                    schema: TableSchema) -> CommitMessage:
    with target.new_writer(schema_id=schema.id) as writer:  # an error here deletes what the writer wrote
        for part in parts:
            check_rows_satisfy(part, condition, text)
            writer.write(part)
        return writer.prepare_commit()


def _delete_and_add(target: RewriteTarget, where: str | pc.Expression, new_rows: CommitMessage, text: str,
                    schema: TableSchema) -> Snapshot | None:
    for attempt in (1, 2):
        plan = plan_delete(target, where)
        if plan.schema is not None and plan.schema.id != schema.id:
            raise RewriteConflictError(
                f"the table's schema changed (schema {schema.id} -> {plan.schema.id}) while the overwrite ran; "
                "nothing was committed: run it again",
                gone=[],
            )
        results: list[DeleteResult] = []
        try:  # a file removed (and deleted) meanwhile is a conflict when it is read, or else at commit
            if plan.candidates.num_rows:
                results.append(delete_in_files(target, plan.candidates, plan.filter, schema=plan.schema))
            removed = ents.concat_entries([plan.dropped, *(r.rewritten for r in results)])
            if removed.num_rows == 0 and not new_rows.manifests:
                target.discard([r.message for r in results])
                return None
            return publish(
                target, RewriteProducer, [*(r.message for r in results), new_rows], removed,
                operation=operations.OVERWRITE, after_commit=target.after_commit, discard_on_conflict=False,
                parameters={"mode": "overwrite", "predicate": text},
            )
        except RewriteConflictError as exc:
            target.discard([r.message for r in results])  # nothing landed; the new rows wait for the next attempt
            if attempt == 2 or not compacted_away(target, plan.snapshot, exc.gone):
                raise
    raise AssertionError("unreachable")  # pragma: no cover
