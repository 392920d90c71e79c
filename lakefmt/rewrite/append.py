"""Writes through the table's own writer and committer in one call (``Table.append``, ``Table.overwrite``): the
rows written in this process, checked against an overwrite's scope batch by batch, then one commit; with
``schema_mode="merge"`` the data's new columns are added first, in a schema change of their own."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.errors import InvalidOptionError
from lakefmt.rewrite.base import RewriteTarget
from lakefmt.spec import Snapshot
from lakefmt.spec.scope import OverwriteScope
from lakefmt.write.conform import conform, fill_missing
from lakefmt.write.discard import discard_written
from lakefmt.write.writer import as_tables

__all__ = ["merge_schema_first", "write_and_commit"]


def merge_schema_first(parts: Iterable[pa.Table], update_schema: Callable[[], UpdateSchema]) -> Iterable[pa.Table]:
    """``parts`` after the columns of the first one that the table lacks were added (nullable), each filled with
    nulls for the table's nullable columns it lacks; rows the merged table would refuse add no column (checked
    before the schema change is published)."""
    parts = iter(parts)
    first = next(parts, None)
    if first is None:
        return []
    update = update_schema().union_by_name(first.schema)
    merged = update.preview()
    if merged is not None:
        conform(fill_missing(first, merged.arrow_schema), merged.arrow_schema)
    schema = update.commit().arrow_schema
    return (fill_missing(p, schema) for p in itertools.chain([first], parts))


def write_and_commit(
    target: RewriteTarget,
    data: Any,
    overwrite: dict[str, Any] | None,
    scope: OverwriteScope | None,
    *,
    schema_mode: str | None,
    update_schema: Callable[[], UpdateSchema],
) -> Snapshot | None:
    """Write ``data`` with one writer of the table and commit it: an append, or with ``overwrite`` (the committer's
    overwrite arguments) an overwrite, each batch checked against ``scope`` before it is written. A commit known
    not to have landed deletes what was written; an unknown outcome (or an interrupt during or after the publish)
    deletes nothing."""
    parts: Iterable[pa.Table] = as_tables(data)
    if schema_mode is not None:
        if schema_mode != "merge":
            raise InvalidOptionError(f"schema_mode must be 'merge' or None, got {schema_mode!r}")
        parts = merge_schema_first(parts, update_schema)
    writer = target.new_writer()
    with writer:  # an error here deletes what the writer wrote
        for part in parts:
            if scope is not None:
                scope.check_rows(part)
            writer.write(part)
        message = writer.prepare_commit()
    committer = target.new_committer()
    try:
        if overwrite is None:
            return committer.commit([message], identifier=0)
        return committer.overwrite([message], identifier=0, **overwrite)
    except BaseException:
        if not committer.may_have_landed:
            discard_written(target.io, message, writer)
        raise
