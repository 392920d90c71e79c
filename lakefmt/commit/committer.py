"""The commit protocol, in one place. See docs/format.md, "Commit protocol".

    a. dedup      the latest snapshot remembers each recent commit user's last identifier: if this
                  identifier is not greater, the commit already happened -> return None
    b. latest     LATEST hint, then probe snapshot-(L+1) until absent
    c. delta      merge the writers' per-task manifests (+ DELETE entries of an overwrite) -> delta list
    d. base       L's base + L's delta, minor/full merged -> base list
    e. publish    create snapshot-(L+1) exclusively; exactly one racing committer wins
    f. lost race  re-read latest, re-check dedup and conflicts, rebuild the base, retry with backoff
    g. hint       update LATEST (best effort)

A commit that dies anywhere leaves the table as before it or as after it: nothing is visible until (e), and
(e) is atomic. Files written by an attempt that did not publish are orphans for ``orphan-clean``.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.merge import ManifestMerger, MergePolicy
from lakefmt.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    InvalidPartitionError,
)
from lakefmt.io import FileIO
from lakefmt.metastore import MetaStore
from lakefmt.options import TableOptions
from lakefmt.read.plan import live_entries
from lakefmt.spec import CommitKind, CommitMessage, FileKind, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest import manifest_schema
from lakefmt.spec.manifest_list import encode_manifest_list

__all__ = ["Committer"]


@dataclass(frozen=True)
class _Overwrite:
    """What an OVERWRITE replaces: the whole table (``partition`` empty) or the files matching ``partition``."""

    partition: Mapping[str, Any]


class Committer:
    """Publishes writers' commit messages as snapshots, exactly once per (commit user, identifier).

    ``commit_user`` identifies one logical writer across restarts (e.g. a streaming query); identifiers must
    increase per user. With ``commit_user=None`` a fresh user is made and not remembered for dedup (one-off
    writes that are never replayed).
    """

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        commit_user: str | None = None,
        *,
        after_commit: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self._io = io
        self._store = store
        self._after_commit = after_commit
        self._ephemeral = commit_user is None
        self.commit_user = commit_user or f"oneoff-{uuid.uuid4().hex}"
        if not isinstance(self.commit_user, str) or not self.commit_user:
            raise ValueError("commit_user must be a non-empty string")

    # -- public -----------------------------------------------------------------------------------------
    def commit(
        self,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        *,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Append the files in ``messages`` (the tasks' messages, or one alone). Returns the new snapshot, or
        None when this user already committed ``identifier`` (or a later one), or when there is nothing to commit."""
        return self._commit(CommitKind.APPEND, messages, identifier, None, watermark, properties)

    def overwrite(
        self,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        *,
        partition: Mapping[str, Any] | None = None,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Replace the whole table (``partition=None``) or the files of one partition with ``messages``.

        Raises :class:`CommitConflictError` if a concurrent commit changed the replaced files first."""
        return self._commit(
            CommitKind.OVERWRITE, messages, identifier, _Overwrite(partition or {}), watermark, properties
        )

    def already_committed(self, identifier: int, latest: Snapshot | None = None) -> bool:
        """Whether this user has committed ``identifier`` (or a later one) according to the latest snapshot."""
        latest = latest if latest is not None else self._store.latest_snapshot()
        if latest is None or self._ephemeral:
            return False
        last = latest.commit_users.get(self.commit_user)
        if last is not None and identifier <= last[0]:
            return True
        return latest.commit_user == self.commit_user and identifier <= latest.commit_identifier

    # -- the protocol -----------------------------------------------------------------------------------
    def _commit(
        self,
        kind: CommitKind,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        overwrite: _Overwrite | None,
        watermark: int | None,
        properties: Mapping[str, str] | None,
    ) -> Snapshot | None:
        if not isinstance(identifier, int) or isinstance(identifier, bool):
            raise TypeError(f"identifier must be an int, got {identifier!r}")
        if isinstance(messages, CommitMessage):
            messages = [messages]  # one task's message: as good as a list of one
        bad = [type(m).__name__ for m in messages if not isinstance(m, CommitMessage)]
        if bad:
            raise TypeError(f"messages must be CommitMessage objects (from TableWriter.prepare_commit), got {bad}")
        latest = self._store.latest_snapshot()  # (b)
        if self.already_committed(identifier, latest):  # (a)
            return None
        schema = self._store.schema_for(latest)
        options = TableOptions.from_map(schema.options)
        merger = ManifestMerger(self._store, self._io, schema, MergePolicy.from_options(options), uuid.uuid4().hex)
        added = [m for msg in messages for m in msg.manifests]
        if overwrite is not None:
            partition = _normalize_partition(overwrite.partition, schema)
            _check_inside(added, partition)
        if not added and overwrite is None:
            return None
        delta = merger.merge_delta(added)  # (c)
        deleted: pa.Table | None = None
        if overwrite is not None:
            deleted = self._files_to_replace(latest, schema, partition)
            if deleted.num_rows:
                delete_entries = deleted.set_column(
                    0, "kind", pa.array([int(FileKind.DELETE)] * deleted.num_rows, pa.int8())
                )
                delta = delta + merger.write_entries(delete_entries, 100.0)
        if not delta:
            return None
        delta_list = self._write_list(merger, delta, schema, options)
        delay = 0.01
        for _attempt in range(options.commit_max_retries + 1):
            base_metas = merger.merge_base(self._store.snapshot_manifests(latest)) if latest else []  # (d)
            base_list = self._write_list(merger, base_metas, schema, options)
            snap = self._snapshot(
                latest, schema, kind, identifier, base_list, delta_list, delta, watermark, properties, options
            )
            if self._publish(snap, options.fsync):  # (e)
                self._store.remember_published(snap)
                self._store.write_hint(layout.LATEST, snap.id)  # (g)
                if self._after_commit is not None:
                    # e.g. snapshot expiration. The commit has landed: nothing after this point may report a
                    # failure, or a caller that cleans up after a failed commit deletes the files of a live one
                    with contextlib.suppress(Exception):
                        self._after_commit(snap)
                return snap
            # back off first, then re-read: a latest read before the sleep is stale by the time it is used
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
            latest = self._store.latest_snapshot()  # (f)
            if self.already_committed(identifier, latest):
                return None
            if overwrite is not None and deleted is not None:
                self._check_unchanged(latest, schema, partition, deleted)
        raise CommitRetriesExhaustedError(
            f"lost the race for the next snapshot {options.commit_max_retries + 1} times "
            f"(commit user {self.commit_user!r}, identifier {identifier}); the commit did not land"
        )

    def _write_list(
        self, merger: ManifestMerger, metas: Sequence[ManifestFileMeta], schema: TableSchema, options: TableOptions
    ) -> tuple[str, int]:
        data = encode_manifest_list(metas, schema.partition_schema)
        name = merger.next_name(list_file=True)
        self._io.write(layout.manifest_list_path(name), data, sync=options.fsync)
        self._store.remember_list(name, list(metas))
        return name, len(data)

    def _snapshot(
        self,
        latest: Snapshot | None,
        schema: TableSchema,
        kind: CommitKind,
        identifier: int,
        base_list: tuple[str, int],
        delta_list: tuple[str, int],
        delta: Sequence[ManifestFileMeta],
        watermark: int | None,
        properties: Mapping[str, str] | None,
        options: TableOptions,
    ) -> Snapshot:
        now = int(time.time() * 1000)
        if latest is not None:
            now = max(now, latest.time_millis)
        added_rows = sum(m.num_added_rows for m in delta)
        deleted_rows = sum(m.num_deleted_rows for m in delta)
        added_files = sum(m.num_added_files for m in delta)
        deleted_files = sum(m.num_deleted_files for m in delta)
        users = dict(latest.commit_users) if latest else {}
        if not self._ephemeral:
            users[self.commit_user] = (identifier, now)
        horizon = now - options.commit_user_retention_ms
        kept = sorted(((u, v) for u, v in users.items() if v[1] >= horizon), key=lambda uv: uv[1][1], reverse=True)
        if latest is not None and latest.watermark is not None:
            watermark = latest.watermark if watermark is None else max(watermark, latest.watermark)
        return Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=schema.id,
            base_manifest_list=base_list[0],
            base_manifest_list_size=base_list[1],
            delta_manifest_list=delta_list[0],
            delta_manifest_list_size=delta_list[1],
            commit_user=self.commit_user,
            commit_identifier=identifier,
            commit_kind=kind,
            time_millis=now,
            total_record_count=(latest.total_record_count if latest else 0) + added_rows - deleted_rows,
            delta_record_count=added_rows - deleted_rows,
            total_file_count=(latest.total_file_count if latest else 0) + added_files - deleted_files,
            watermark=watermark,
            properties=dict(properties or {}),
            commit_users=dict(kept[: options.commit_user_max]),
            nonce=uuid.uuid4().hex,
        )

    def _publish(self, snap: Snapshot, sync: bool) -> bool:
        """Exclusive create of snapshot-N. True: ours landed. False: another committer took N."""
        path = layout.snapshot_path(snap.id)
        data = snap.to_json()
        for _ in range(3):
            try:
                return self._io.publish(path, data, sync=sync)
            except OSError as exc:
                try:  # did it land anyway? read it back: one GET
                    existing = self._io.read(path)
                except FileNotFoundError:
                    continue  # nothing there: publishing again is safe
                except OSError:
                    raise CommitStateUnknownError(
                        f"publishing snapshot {snap.id} failed ({exc}) and its state cannot be read back; "
                        "do not delete this commit's files: retry with the same commit user and identifier"
                    ) from exc
                return existing == data
        raise CommitStateUnknownError(
            f"publishing snapshot {snap.id} kept failing; retry with the same commit user and identifier"
        )

    # -- overwrite support ------------------------------------------------------------------------------
    def _files_to_replace(self, latest: Snapshot | None, schema: TableSchema, partition: Mapping[str, Any]) -> pa.Table:
        if latest is None:
            return manifest_schema(schema.arrow_schema, schema.partition_keys).empty_table()
        entries = live_entries(self._store, latest, schema, _partition_expr(partition, schema))
        if partition:
            entries = entries.filter(_partition_mask(entries, partition, schema))
        return entries

    def _check_unchanged(
        self, latest: Snapshot | None, schema: TableSchema, partition: Mapping[str, Any], deleted: pa.Table
    ) -> None:
        now = self._files_to_replace(latest, schema, partition)
        before = set(deleted.column("path").to_pylist())
        after = set(now.column("path").to_pylist())
        if before != after:
            gone = len(before - after)
            new = len(after - before)
            where = f"partition {dict(partition)}" if partition else "the table"
            raise CommitConflictError(
                f"a concurrent commit changed {where} while this overwrite was committing "
                f"({gone} file(s) it replaces were removed, {new} file(s) were added); the overwrite did not land"
            )


def _normalize_partition(partition: Mapping[str, Any], schema: TableSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in partition.items():
        if key not in schema.partition_keys:
            raise InvalidPartitionError(
                f"{key!r} is not a partition key of this table "
                f"(partition keys: {list(schema.partition_keys) or 'none'})"
            )
        t = schema.arrow_schema.field(key).type
        if value is None:
            out[key] = None
            continue
        try:
            out[key] = pa.array([value]).cast(t)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidPartitionError(f"partition value {value!r} for {key!r} cannot be read as {t}: {exc}") from exc
    return out


def _check_inside(added: Sequence[ManifestFileMeta], partition: Mapping[str, Any]) -> None:
    for m in added:
        for key, value in partition.items():
            s = m.partition_stats.get(key)
            if s is None:
                continue
            ok = (
                (s.null_count == m.num_entries)
                if value is None
                else (s.min == value and s.max == value and not s.null_count)
            )
            if not ok:
                raise InvalidPartitionError(
                    f"the data to overwrite partition {dict(partition)} has rows with {key} outside it "
                    f"(from {s.min!r} to {s.max!r}); nothing was committed"
                )


def _partition_expr(partition: Mapping[str, Any], schema: TableSchema) -> pc.Expression | None:
    expr = None
    for key, value in partition.items():
        e = (
            pc.field(key).is_null()
            if value is None
            else pc.field(key) == pa.scalar(value, schema.arrow_schema.field(key).type)
        )
        expr = e if expr is None else expr & e
    return expr


def _partition_mask(entries: pa.Table, partition: Mapping[str, Any], schema: TableSchema) -> pa.Array:
    part = entries.column("partition").combine_chunks()
    mask = pa.array([True] * entries.num_rows, pa.bool_())  # typed: an empty list would be null-typed
    for key, value in partition.items():
        col = part.field(key)
        m = pc.is_null(col) if value is None else pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False)
        mask = pc.and_(mask, m)
    return mask
