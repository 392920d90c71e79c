"""The table's row-level changes by deletion vectors, as one call each: ``Table.upsert``, ``Table.delete_keys``,
``Table.delete`` on a table whose deletes mark vectors (a key table, or ``write.delete.mode=merge-on-read``), and
:func:`apply_key_changes`, the one primitive for "upsert these rows and delete these keys" in one snapshot.

Each writes what it must (an upsert's new rows, deduplicated by key) and commits one snapshot through
:class:`~lakefmt.commit.kinds.KeyedProducer`, which plans the vectors on the snapshot it lands on
(:mod:`lakefmt.rewrite.keys.planners`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import VectorPlanner
from lakefmt.commit.types import CommitOutcome
from lakefmt.errors import InvalidOptionError, KeyTableError, SchemaMismatchError
from lakefmt.rewrite.base import OPERATION, Targetable, as_target, keyed_producer
from lakefmt.rewrite.keys.planners import DeleteKeysPlanner, DeleteWherePlanner, UpsertPlanner, dedup_keys
from lakefmt.spec import CommitKind, Snapshot, TableSchema, operations
from lakefmt.spec.filters import check_filter, show
from lakefmt.spec.keys.hashing import key_hash
from lakefmt.spec.keys.merge_engine import DEDUPLICATE
from lakefmt.spec.keys.rowkind import check_kind_column, drop_ignored
from lakefmt.write.conform import conform, fill_missing, repeated_names
from lakefmt.write.discard import discard_written
from lakefmt.write.writer import as_tables

__all__ = ["apply_key_changes", "delete_keys", "delete_marking", "upsert"]


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
    (marked in its file's deletion vector) unless, with ``sequence.field``, its value is larger. Under another
    ``merge-engine`` (``partial-update``, ``aggregation``, ``first-row``) the rows are combined with each other and
    with the live row instead, at commit time (:mod:`lakefmt.rewrite.keys.engine_planner`); under ``partial-update`` and
    ``aggregation`` a nullable column that ``data`` leaves out is null in every row (it keeps the old values).
    Returns the snapshot, or None for no rows."""
    target = as_target(table)
    schema = _key_schema(target, "upsert")
    rows = _new_rows(schema, data)
    if rows.num_rows == 0:
        return None
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


def _new_rows(schema: TableSchema, data: Any) -> pa.Table:
    """The rows of ``data`` to upsert, conformed to the table's columns, the rows to ignore (``rowkind.field``)
    left out, then one row per key (the last, or the largest ``sequence.field``) under the ``deduplicate`` engine;
    other engines fold a key's rows at commit time."""
    engine = schema.table_options.merge_engine
    tables = list(as_tables(data))
    for t in tables:
        check_kind_column(t.column_names, schema.table_options)  # before conform fills it with nulls
    if engine in ("partial-update", "aggregation"):  # a column left out is a null: it keeps the key's old value
        parts = [conform(fill_missing(t, schema.arrow_schema), schema.arrow_schema) for t in tables]
    else:
        parts = [conform(t, schema.arrow_schema) for t in tables]
    rows = pa.concat_tables(parts) if parts else schema.arrow_schema.empty_table()
    rows = drop_ignored(rows, schema.table_options)  # before the dedup: an update's old row never wins
    if engine != DEDUPLICATE:
        return rows
    return dedup_keys(rows, schema.primary_keys, schema.table_options.sequence_field)


def _key_rows(schema: TableSchema, keys: Any, what: str) -> pa.Table | None:
    """The key columns of ``keys`` (rows holding at least them; other columns are ignored), conformed; None for
    no rows (the columns are checked all the same)."""
    parts = list(as_tables(keys))
    if not parts:
        return None
    for part in parts:
        twice = repeated_names(part.column_names)
        if twice:
            raise SchemaMismatchError(
                f"{what}: column(s) {', '.join(map(repr, twice))} appear more than once; a column must be named once"
            )
    given = pa.concat_tables(parts, promote_options="permissive")
    missing = [k for k in schema.primary_keys if k not in given.column_names]
    if missing:  # checked on no rows too, as an upsert checks its columns
        raise SchemaMismatchError(f"{what} needs the key column(s) {', '.join(missing)}")
    if given.num_rows == 0:
        return None
    key_schema = pa.schema([schema.arrow_schema.field(k) for k in schema.primary_keys])
    try:
        return conform(given.select(list(schema.primary_keys)), key_schema)
    except SchemaMismatchError as exc:
        raise SchemaMismatchError(f"{what}: {exc}") from None


def delete_keys(table: Targetable, keys: Any) -> Snapshot | None:
    """Delete the live rows of ``keys`` (rows holding at least the primary-key columns; other columns are ignored)
    by deletion vectors, in one snapshot (kind OVERWRITE, ``lakefmt.operation=delete``). Keys without a live row
    are skipped; returns None when none had one."""
    target = as_target(table)
    schema = _key_schema(target, "delete_keys")
    rows = _key_rows(schema, keys, "delete_keys")
    if rows is None:
        return None
    planner = DeleteKeysPlanner(target.io, target.store, schema, rows)
    return _commit_marks(target, planner)


def apply_key_changes(
    table: Targetable, upserts: Any | None, deletes: Any | None, *, operation: str = "upsert"
) -> Snapshot | None:
    """Upsert the rows of ``upserts`` and delete the live rows of the keys of ``deletes`` (rows holding at least
    the primary-key columns; other columns are ignored) on a key table, in one snapshot with the property
    ``lakefmt.operation=<operation>`` (kind APPEND, as an upsert; OVERWRITE when there is nothing to upsert, as a
    delete by key). Either may be None; each is Arrow data (a table, batches, a reader), a dict of columns or a
    list of row dicts. Returns the snapshot, or None when there was nothing to change.

    ``upserts`` are settled as by :func:`upsert` (of the rows for one key, the last wins, or the largest
    ``sequence.field``; a live row with a larger ``sequence.field`` stays; on a table with ``rowkind.field`` they
    are changes, deletes among them); a key of ``deletes`` without a live row is skipped. A key in both is
    refused (:class:`KeyTableError`, nothing written): which of the two was meant is not for lakefmt to guess
    (give the key once, or as a change row with ``rowkind.field``).

    Both are planned together on the snapshot the commit lands on: after a lost race to a commit that changed a
    bucket they touch, they are planned again (:class:`~lakefmt.commit.kinds.KeyedProducer`), so a key never
    has two live rows. Files written for a commit known not to have landed are deleted; after an unknown outcome
    nothing is (:class:`CommitStateUnknownError`)."""
    target = as_target(table)
    schema = _key_schema(target, "apply_key_changes")
    if schema.table_options.merge_engine != DEDUPLICATE:
        raise KeyTableError(
            f"apply_key_changes: the table's merge-engine is {schema.table_options.merge_engine}; changes that "
            "replace and delete whole rows need the deduplicate engine (use upsert, which merges by the engine)"
        )
    if not isinstance(operation, str) or not operation.strip():
        raise InvalidOptionError(f"apply_key_changes: operation must be a non-empty string, got {operation!r}")
    rows = _new_rows(schema, _arrow(upserts)) if upserts is not None else schema.arrow_schema.empty_table()
    keys = _key_rows(schema, _arrow(deletes), "apply_key_changes deletes") if deletes is not None else None
    if rows.num_rows == 0 and keys is None:
        return None
    if keys is not None and rows.num_rows:
        _check_disjoint(rows, keys, schema.primary_keys)
    writer = target.new_writer()
    with writer:
        if rows.num_rows:
            writer.write(rows)
        message = writer.prepare_commit()
    run = keyed_producer(
        target,
        message.manifests,
        UpsertPlanner(target.io, target.store, schema, deletes=keys),
        kind=CommitKind.APPEND if rows.num_rows else CommitKind.OVERWRITE,
        properties={OPERATION: operation},
    )
    try:
        result = run.commit()
    except BaseException:
        if not run.in_doubt:  # known not to have landed: what was written is no one's
            discard_written(target.io, message, writer)
        raise
    if result.outcome is not CommitOutcome.COMMITTED:
        discard_written(target.io, message, writer)  # nothing to commit: no snapshot references them
        return None
    return result.snapshot


def _arrow(data: Any) -> Any:
    """Rows as Arrow: a dict of columns (``{"k": [1, 2]}``) or a list of row dicts becomes a table; anything else
    is left to the writer's reading of Arrow data."""
    if isinstance(data, Mapping):
        return pa.table(dict(data))
    if isinstance(data, list | tuple) and data and all(isinstance(r, Mapping) for r in data):
        return pa.Table.from_pylist(list(data))
    return data


def _check_disjoint(rows: pa.Table, keys: pa.Table, key_names: Sequence[str]) -> None:
    """No key of ``keys`` is among the keys of ``rows`` (:class:`KeyTableError` names one)."""
    names = list(key_names)
    maybe = np.isin(key_hash(keys, names), key_hash(rows, names))  # equal keys have equal hashes
    if not bool(np.any(maybe)):
        return
    candidates = keys.filter(pa.array(maybe))
    upserted = set(zip(*(rows.column(k).to_pylist() for k in names), strict=True))
    both = [k for k in zip(*(candidates.column(k).to_pylist() for k in names), strict=True) if k in upserted]
    if both:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, both[0], strict=True))
        raise KeyTableError(
            f"apply_key_changes: {len(both)} key(s) are both upserted and deleted (the first: {shown}); give each "
            "key once; nothing was written"
        )


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
    run = keyed_producer(target, [], planner, kind=CommitKind.OVERWRITE, properties=props)
    result = run.commit()
    if result.outcome is not CommitOutcome.COMMITTED:
        return None
    return result.snapshot
