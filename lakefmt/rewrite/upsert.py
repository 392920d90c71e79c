"""The table's row-level changes by deletion vectors, as one call each: ``Table.upsert``, ``Table.delete_keys``, and
``Table.delete`` on a table whose deletes mark vectors (a key table, or ``write.delete.mode=merge-on-read``).

Each writes what it must (an upsert's new rows, deduplicated by key) and commits one snapshot through
:class:`~lakefmt.commit.kinds.KeyedProducer`, which plans the vectors on the snapshot it lands on
(:mod:`lakefmt.rewrite.keys`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import KeyedProducer, VectorPlanner
from lakefmt.commit.types import CommitOutcome, CommitRequest
from lakefmt.errors import KeyTableError, SchemaMismatchError
from lakefmt.rewrite.base import Targetable, as_target
from lakefmt.rewrite.keys import DeleteKeysPlanner, DeleteWherePlanner, dedup_keys
from lakefmt.spec import CommitKind, Snapshot, TableSchema, operations
from lakefmt.spec.filters import check_filter, show
from lakefmt.write.conform import conform
from lakefmt.write.discard import discard_written
from lakefmt.write.writer import as_tables

__all__ = ["delete_keys", "delete_marking", "upsert"]


def _key_schema(table: Targetable, what: str) -> TableSchema:
    schema = as_target(table).schema()
    if not schema.has_primary_key:
        raise KeyTableError(
            f"{what} needs a key table (created with primary_key=[...]); this table has no primary key: use "
            "append, overwrite or delete"
        )
    return schema


def upsert(table: Targetable, data: Any) -> Snapshot | None:
    """Insert or replace rows by primary key, in one snapshot (kind APPEND, ``lakefmt.operation=upsert``). Of the
    rows for one key in ``data``, the last wins (or the largest ``sequence.field``); a key's live row is replaced
    (marked in its file's deletion vector) unless, with ``sequence.field``, its value is larger. Returns the
    snapshot, or None for no rows."""
    target = as_target(table)
    schema = _key_schema(target, "upsert")
    parts = [conform(t, schema.arrow_schema) for t in as_tables(data)]
    rows = pa.concat_tables(parts) if parts else schema.arrow_schema.empty_table()
    if rows.num_rows == 0:
        return None
    rows = dedup_keys(rows, schema.primary_keys, schema.table_options.sequence_field)
    writer = target.new_writer()
    with writer:
        writer.write(rows)
        message = writer.prepare_commit()
    committer = target.new_committer()
    try:
        return committer.commit([message], identifier=0)
    except BaseException:
        if not committer.may_have_landed:
            discard_written(target.io, message, writer)
        raise


def delete_keys(table: Targetable, keys: Any) -> Snapshot | None:
    """Delete the live rows of ``keys`` (rows holding at least the primary-key columns; other columns are ignored)
    by deletion vectors, in one snapshot (kind OVERWRITE, ``lakefmt.operation=delete``). Keys without a live row
    are skipped; returns None when none had one."""
    target = as_target(table)
    schema = _key_schema(target, "delete_keys")
    parts = list(as_tables(keys))
    if not parts:
        return None
    given = pa.concat_tables(parts, promote_options="permissive")
    missing = [k for k in schema.primary_keys if k not in given.column_names]
    if missing:  # checked on no rows too, as an upsert checks its columns
        raise SchemaMismatchError(f"delete_keys needs the key column(s) {', '.join(missing)}")
    if given.num_rows == 0:
        return None
    key_schema = pa.schema([schema.arrow_schema.field(k) for k in schema.primary_keys])
    try:
        rows = conform(given.select(list(schema.primary_keys)), key_schema)
    except SchemaMismatchError as exc:
        raise SchemaMismatchError(f"delete_keys: {exc}") from None
    planner = DeleteKeysPlanner(target.io, target.store, schema, rows)
    return _commit_marks(target, planner)


def delete_marking(table: Targetable, filter: str | pc.Expression) -> Snapshot | None:
    """``Table.delete`` on a table whose deletes mark deletion vectors: every live row where ``filter`` is true is
    marked, in one snapshot (kind OVERWRITE, ``lakefmt.operation=delete``); None when no row matched."""
    target = as_target(table)
    schema = target.schema()
    predicate = filter if isinstance(filter, str) else show(filter) if isinstance(filter, pc.Expression) else ""
    filter = check_filter(filter, schema.arrow_schema, "delete filter")
    planner = DeleteWherePlanner(target.io, target.store, schema, filter)
    return _commit_marks(target, planner, {"predicate": predicate})


def _commit_marks(target: Any, planner: VectorPlanner, parameters: dict[str, str] | None = None) -> Snapshot | None:
    props = operations.properties(operations.DELETE, **(parameters or {}))
    request = CommitRequest(None, f"delete-{uuid.uuid4().hex}", 0, [], properties=props)
    run = KeyedProducer(
        target.io,
        target.store,
        request,
        clock=target.clock or time.time,
        after_commit=lambda snap: target.after_commit(snap),
        planner=planner,
        kind=CommitKind.OVERWRITE,
    )
    result = run.commit()
    if result.outcome is not CommitOutcome.COMMITTED:
        return None
    return result.snapshot
