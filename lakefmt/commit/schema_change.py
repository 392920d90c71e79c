"""Changing a table's schema: ``with table.update_schema() as u: u.add_column("country", pa.string())``.

A schema change is two publishes:

1. ``schema/schema-<n+1>``, created exclusively (of racing changes exactly one takes id ``n+1``). This is the
   moment the change lands. The loser re-reads the new latest schema and applies its changes again, in order, on
   top of it; a change that no longer applies (the column it renames was renamed meanwhile) ends the change with
   :class:`SchemaConflictError`, and nothing is written.
2. a snapshot that records the new schema id and adds and removes no file (:class:`SchemaChangeProducer`, kind
   APPEND: older and streaming readers see an empty append). Every committer reads the latest snapshot anyway:
   this is how a long-running writer learns of the change without listing the schema folder, and how time
   travel tells the schema of each version. It is best effort: if it cannot be published the change has still
   landed, and the next commit by a process that knows the new schema records it.

Every change is checked as it is made (:class:`~lakefmt.spec.evolution.editor.SchemaEditor`): a refused one raises
:class:`SchemaEvolutionError` at once, and a ``with`` block that raises commits nothing. The first change of a
format-version-1 table upgrades it to version 2 (field ids are assigned in column order); an update made with
``upgrade=True`` (``Table.upgrade()``) does only that.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from lakefmt.commit.producer import SnapshotProducer
from lakefmt.commit.types import CommitRequest
from lakefmt.errors import (
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    NonAtomicStorageError,
    SchemaConflictError,
    SchemaEvolutionError,
)
from lakefmt.io import FileIO
from lakefmt.meta.store import MetaStore
from lakefmt.retry import backoff
from lakefmt.spec import CommitKind, Snapshot, TableSchema, layout, operations
from lakefmt.spec.evolution.editor import SchemaEditor

__all__ = [
    "OPERATION_PROPERTY",
    "SCHEMA_CHANGE_OPERATION",
    "UPGRADE_OPERATION",
    "SchemaChangeProducer",
    "UpdateSchema",
    "storable_type",
]

log = logging.getLogger("lakefmt.schema")

# the snapshot property that names what a snapshot did, and its values here (lakefmt.spec.operations owns them)
OPERATION_PROPERTY = operations.OPERATION_PROPERTY
UPGRADE_OPERATION = operations.UPGRADE
SCHEMA_CHANGE_OPERATION = operations.SCHEMA_CHANGE


class SchemaChangeProducer(SnapshotProducer):
    """Records schema ``schema_id`` in a snapshot of its own (kind APPEND, no files: readers of older format
    versions and streaming readers see an empty append)."""

    kind = CommitKind.APPEND
    empty_ok = True

    def __init__(self, *args: Any, schema_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema_id = schema_id

    def has_work(self) -> bool:
        return True

    def superseded(self, latest: Snapshot | None) -> bool:
        return latest is not None and latest.schema_id >= self.schema_id

    def carries_users_unchanged(self) -> bool:
        return True


def storable_type(t: pa.DataType) -> pa.DataType:
    """The type a new column takes for data of type ``t``: view and dictionary types become their plain type."""
    if pa.types.is_dictionary(t):
        return storable_type(t.value_type)
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(storable_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field.with_type(storable_type(t.value_type))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(t.value_field.with_type(storable_type(t.value_type)))
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(key.with_type(storable_type(key.type)), item.with_type(storable_type(item.type)))
    return t


class UpdateSchema:
    """A set of schema changes, applied in order and committed together as the next schema (``schema-<n+1>``).

    Use it as a context manager (it commits when the block ends without an error) or call :meth:`commit`. Each
    change is checked when it is made: :class:`SchemaEvolutionError` says why one is refused (the table is left
    unchanged). The method names and keywords are pyiceberg's. Paths: a sequence of names for a field inside a
    struct (``("address", "city")``), or a string: the column of that name, else the field of that dotted name
    (``"address.city"``); a tuple is never ambiguous."""

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        *,
        clock: Callable[[], float] | None = None,
        upgrade: bool = False,
        after_commit: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self._io, self._store = io, store
        self._clock = clock or time.time
        self._upgrade = upgrade
        self._after_commit = after_commit
        self._base = _checked(store, store.latest_schema(refresh=True))
        self._editor = SchemaEditor(self._base)
        self._ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._done: TableSchema | None = None

    # -- changes (each returns the builder, so they chain; names and keywords as in pyiceberg) ---------------
    def add_column(
        self,
        path: str | Sequence[str],
        field_type: pa.DataType,
        doc: str | None = None,
        required: bool = False,
    ) -> UpdateSchema:
        """Add a nullable column at the end of the table (or of the struct ``path`` names a field of). Files
        written before it read it as null. ``doc``: its documentation (Arrow field metadata ``doc``).
        ``required=True`` is refused: the files written before it have no value for it."""
        return self._apply("add_column", path, field_type, doc=doc, required=required)

    def drop_column(self, path: str | Sequence[str]) -> UpdateSchema:
        """Drop a column: no file changes; readers stop reading it. Its field id is never reused, so a column
        added later under the same name is a new column. Also named :meth:`delete_column` (pyiceberg)."""
        return self._apply("drop_column", path)

    def delete_column(self, path: str | Sequence[str]) -> UpdateSchema:
        """Drop a column (pyiceberg's name for :meth:`drop_column`)."""
        return self.drop_column(path)

    def rename_column(self, path_from: str | Sequence[str], new_name: str) -> UpdateSchema:
        """Rename a column (or a field of a struct: ``new_name`` is its new last name). No file changes."""
        return self._apply("rename_column", path_from, new_name)

    def update_column(
        self,
        path: str | Sequence[str],
        field_type: pa.DataType | None = None,
        required: bool | None = None,
        doc: str | None = None,
    ) -> UpdateSchema:
        """Widen a column's type to ``field_type``: int8 -> int16 -> int32 -> int64 (unsigned likewise),
        float32 -> float64, or a decimal's precision up with the same scale. Narrowing and other changes are
        refused. ``required=False`` makes the column nullable (``True`` is refused for a nullable column: older
        files may hold nulls); ``doc`` sets its documentation."""
        return self._apply("update_column", path, field_type, required=required, doc=doc)

    def make_nullable(self, path: str | Sequence[str]) -> UpdateSchema:
        """Let a column (or a list's element, a map's value) hold nulls. Also named :meth:`make_column_optional`
        (pyiceberg)."""
        return self._apply("make_nullable", path)

    def make_column_optional(self, path: str | Sequence[str]) -> UpdateSchema:
        """Let a column hold nulls (pyiceberg's name for :meth:`make_nullable`)."""
        return self.make_nullable(path)

    def move_first(self, path: str | Sequence[str]) -> UpdateSchema:
        """Move a column to the front of the table (or of its struct)."""
        return self._apply("move", path, first=True)

    def move_after(self, path: str | Sequence[str], after_name: str | Sequence[str]) -> UpdateSchema:
        """Move a column right after ``after_name`` (a column beside it: same table or struct)."""
        return self._apply("move", path, after=after_name)

    def move_before(self, path: str | Sequence[str], before_path: str | Sequence[str]) -> UpdateSchema:
        """Move a column right before ``before_path`` (a column beside it: same table or struct)."""
        return self._apply("move", path, before=before_path)

    def union_by_name(self, schema: pa.Schema) -> UpdateSchema:
        """Add every column of ``schema`` the table lacks, and every field its struct columns lack, as nullable
        (view and dictionary types become their plain type). Existing columns are left as they are: what
        ``append(data, schema_mode="merge")`` does."""
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"union_by_name takes a pyarrow.Schema, got {type(schema).__name__}")
        plain = pa.schema([f.with_type(storable_type(f.type)) for f in schema])
        return self._apply("union_by_name", plain)

    def _apply(self, name: str, *args: Any, **kwargs: Any) -> UpdateSchema:
        if self._done is not None:
            raise SchemaEvolutionError("this schema update was already committed; start a new one")
        getattr(self._editor, name)(*args, **kwargs)  # SchemaEvolutionError: refused, nothing recorded
        self._ops.append((name, args, kwargs))
        return self

    # -- what it does ------------------------------------------------------------------------------------
    @property
    def base(self) -> TableSchema:
        """The schema the changes are applied to (the latest when the update started)."""
        return self._base

    @property
    def changes(self) -> list[str]:
        """The changes made so far, in words."""
        return list(self._editor.changes)

    def preview(self) -> TableSchema | None:
        """The schema :meth:`commit` would publish now (None: nothing would change)."""
        return self._editor.result(upgrade=self._upgrade, time_millis=int(self._clock() * 1000))

    # -- commit ------------------------------------------------------------------------------------------
    def __enter__(self) -> UpdateSchema:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None and self._done is None:
            self.commit()

    def commit(self) -> TableSchema:
        """Publish the changes as the next schema and return it (the current one when nothing changed; if no
        snapshot records that one yet, its snapshot is published now: running a change again finishes it).

        :class:`SchemaConflictError` when a concurrent schema change made one of them impossible (nothing was
        written); :class:`CommitRetriesExhaustedError` after losing the race too often."""
        if self._done is not None:
            return self._done
        options = self._base.table_options
        if not self._io.atomic_publish and not options.allow_non_atomic_publish:
            raise NonAtomicStorageError(
                f"{self._io.uri}: this storage ({self._io.protocol}) has no atomic put-if-absent, so racing schema "
                "changes could both win; set the table option commit.allow-non-atomic-publish=true to accept that risk"
            )
        base, editor = self._base, self._editor
        retries = backoff(options.commit_max_retries + 1, first=0.01)
        while True:
            new = editor.result(upgrade=self._upgrade, time_millis=int(self._clock() * 1000))
            if new is None:
                self._done = base
                self._finish(base)
                return base
            if self._publish(new, options.fsync):
                break
            delay = next(retries)
            if delay is None:
                raise CommitRetriesExhaustedError(
                    f"lost the race for schema {new.id} {options.commit_max_retries + 1} times; the schema did "
                    "not change"
                )
            time.sleep(delay)
            base = _checked(self._store, self._store.latest_schema(refresh=True))
            editor = self._replay(base)
        self._store.remember_schema(new)
        self._done = new
        self._record(new, base)
        return new

    def _publish(self, new: TableSchema, sync: bool) -> bool:
        """Create ``schema-<id>`` exclusively: True if ours landed, False if another change took the id. A failure
        that is not a definite refusal leaves the outcome unknown (the change may have landed):
        :class:`CommitStateUnknownError`, never an error that reads as "nothing changed"."""
        try:
            return self._io.publish(layout.schema_path(new.id), new.to_json(), sync=sync)
        except CommitStateUnknownError:
            raise
        except self._io.definite_refusals:  # the store refused the request: nothing was created
            raise
        except Exception as exc:
            raise CommitStateUnknownError(
                f"publishing schema {new.id} failed ({type(exc).__name__}: {exc}) and whether it landed is unknown; "
                "run the change again: it finds it done (and records it in a snapshot), or makes it"
            ) from exc

    def _finish(self, current: TableSchema) -> None:
        """Nothing to change: if ``current`` landed but no snapshot records it yet (the process that published it
        died before its snapshot), record it now, so that running a change again finishes it."""
        latest = self._store.latest_snapshot()
        if current.id > (latest.schema_id if latest is not None else 0):
            self._record(current, current)

    def _replay(self, base: TableSchema) -> SchemaEditor:
        """The same changes applied again on ``base`` (a schema committed concurrently)."""
        editor = SchemaEditor(base)
        try:
            for name, args, kwargs in self._ops:
                getattr(editor, name)(*args, **kwargs)
        except SchemaEvolutionError as exc:
            raise SchemaConflictError(
                f"schema {base.id} was committed concurrently and these changes no longer apply to it ({exc}); "
                "the schema did not change"
            ) from exc
        return editor

    def _record(self, new: TableSchema, base: TableSchema) -> None:
        """Publish the snapshot that records ``new`` (best effort: the change has landed already)."""
        upgrade_only = not self._ops and base.format_version < new.format_version
        operation = UPGRADE_OPERATION if upgrade_only else SCHEMA_CHANGE_OPERATION
        request = CommitRequest(None, f"oneoff-{uuid.uuid4().hex}", 0, (), None, operations.properties(operation))
        producer = SchemaChangeProducer(
            self._io,
            self._store,
            request,
            clock=self._clock,
            after_commit=self._after_commit,
            schema_id=new.id,
        )
        try:
            producer.commit()
        except Exception as exc:  # the schema file is published: the change stands
            log.warning(
                "schema %d is published, but the snapshot that records it was not (%s: %s); the next commit of a "
                "writer that knows schema %d records it",
                new.id,
                type(exc).__name__,
                exc,
                new.id,
            )


def _checked(store: MetaStore, base: TableSchema) -> TableSchema:
    """``base``, once it is known to be at least the schema the latest snapshot records and its ``highestFieldId``
    at least its predecessor's (two more reads: constant in the table's history). Otherwise a new column would
    take the id of a column of the missing or damaged schema, and that column's values in older files would read
    as the new column's: :class:`MissingMetadataError` / :class:`CorruptMetadataError`, nothing written."""
    latest = store.latest_snapshot()
    if latest is not None and latest.schema_id > base.id:
        base = store.schema_for(latest)  # MissingMetadataError: the schema file it records is gone
    if base.id > 0 and base.format_version >= 2:
        before = store.schema(base.id - 1)
        if base.highest_field_id < before.highest_field_id:
            raise CorruptMetadataError(
                f"schema {base.id}: highestFieldId {base.highest_field_id} is below schema {before.id}'s "
                f"({before.highest_field_id}); a new column would reuse a field id (the schema did not change)"
            )
    return base
