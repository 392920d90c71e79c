"""The commit protocol, in one place. See docs/format.md, "Commit protocol".

    a. dedup      the latest snapshot remembers each recent commit user's last identifier: if this
                  identifier is not greater, the commit already happened -> return None
    b. latest     LATEST hint, then probe snapshot-(L+1) until absent
    c. delta      merge the writers' per-task manifests (+ DELETE entries of an overwrite) -> delta list
    d. base       L's base + L's delta, minor/full merged -> base list
    e. publish    create snapshot-(L+1) exclusively; exactly one racing committer wins
    f. lost race  re-read latest, re-check dedup and conflicts, rebuild the base, retry with backoff
    g. after      update LATEST, drop merged-away per-task manifests, run the after-commit hook: best effort

A commit that dies anywhere leaves the table as before it or as after it: nothing is visible until (e), and
(e) is atomic. Files written by an attempt that did not publish are orphans for ``orphan-clean``.

The rule that keeps a landed commit whole: from the moment a publish request is sent, nothing of this commit
may be deleted unless the publish is known to have failed. :attr:`Committer.may_have_landed` says which; an
unknown outcome is resolved by :meth:`FileIO.publish` (read-back) or raised as
:class:`CommitStateUnknownError`, and whatever happens after a publish succeeded (g) can neither fail the
commit nor trigger cleanup. An interrupt there skips the rest of (g) and is re-raised.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.merge import ManifestMerger, MergePolicy
from lakefmt.commit.users import next_commit_users
from lakefmt.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    InvalidCommitError,
    InvalidPartitionError,
    MissingMetadataError,
)
from lakefmt.io import FileIO
from lakefmt.io.fileio import DEFINITE_REFUSALS
from lakefmt.metastore import MetaStore
from lakefmt.options import TableOptions
from lakefmt.read.plan import live_entries
from lakefmt.retry import backoff
from lakefmt.spec import CommitKind, CommitMessage, FileKind, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest import manifest_schema
from lakefmt.spec.manifest_list import encode_manifest_list

__all__ = ["Committer"]

log = logging.getLogger("lakefmt.commit")

INT64 = range(-(1 << 63), 1 << 63)


@dataclass(frozen=True)
class _Overwrite:
    """What an OVERWRITE replaces: the whole table (``partition`` empty) or the files matching ``partition``."""

    partition: Mapping[str, Any]


class Committer:
    """Publishes writers' commit messages as snapshots, exactly once per (commit user, identifier).

    ``commit_user`` identifies one logical writer across restarts (e.g. a streaming query); identifiers must
    increase per user. With ``commit_user=None`` a fresh user is made and not remembered for dedup (one-off
    writes that are never replayed). ``clock`` (seconds since the epoch) is for tests.
    """

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        commit_user: str | None = None,
        *,
        after_commit: Callable[[Snapshot], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if commit_user is not None and (not isinstance(commit_user, str) or not commit_user.strip()):
            raise InvalidCommitError(
                f"commit_user must be a non-empty string, got {commit_user!r}; pass None (not an empty string) "
                "for a one-off write that is never replayed"
            )
        self._io = io
        self._store = store
        self._after_commit = after_commit
        self._clock = clock if clock is not None else _wall_clock
        self._ephemeral = commit_user is None
        self.commit_user = commit_user if commit_user is not None else f"oneoff-{uuid.uuid4().hex}"
        self._in_doubt = False

    @property
    def may_have_landed(self) -> bool:
        """Whether the last ``commit``/``overwrite`` call may have published its snapshot: True from the moment
        a publish request was sent until one is known to have failed. While True, none of its files may be
        deleted, whatever the call raised (an interrupt included)."""
        return self._in_doubt

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
        self._in_doubt = False
        _check_int64(identifier, "identifier")
        if watermark is not None:
            _check_int64(watermark, "watermark")
        added = _message_manifests(messages)
        latest = self._store.latest_snapshot()  # (b)
        if self.already_committed(identifier, latest):  # (a)
            return None
        schema = self._store.schema_for(latest)
        options = TableOptions.from_map(schema.options)
        merger = ManifestMerger(self._store, self._io, schema, MergePolicy.from_options(options), uuid.uuid4().hex)
        partition: dict[str, Any] = {}
        if overwrite is not None:
            partition = _normalize_partition(overwrite.partition, schema)
            _check_inside(added, partition)
        if not added and overwrite is None:
            return None
        delta = self._merge_delta(merger, added)  # (c)
        deleted: pa.Table | None = None
        delta_list: tuple[str, int] | None = None
        retries = backoff(options.commit_max_retries + 1, first=0.01)
        while True:
            try:
                self._check_not_live(added, latest)
                if overwrite is not None and deleted is None:
                    deleted = self._files_to_replace(latest, schema, partition)
                    if deleted.num_rows:
                        delete_entries = deleted.set_column(
                            0, "kind", pa.array([int(FileKind.DELETE)] * deleted.num_rows, pa.int8())
                        )
                        delta = delta + merger.write_entries(delete_entries, 100.0)
                if not delta:
                    return None
                if delta_list is None:
                    delta_list = self._write_list(merger, delta, schema, options)
                base_metas = merger.merge_base(self._store.snapshot_manifests(latest)) if latest else []  # (d)
            except MissingMetadataError:
                # latest's lists or manifests are gone: a concurrent expiration, if latest is no longer the
                # latest (retry on the new one); damage if it still is
                newer = self._store.latest_snapshot()
                if newer is None or latest is None or newer.id == latest.id:
                    raise
                published = False
            else:
                base_list = self._write_list(merger, base_metas, schema, options)
                snap = self._snapshot(latest, schema, kind, identifier, base_list, delta_list, delta, watermark,
                                      properties, options)  # fmt: skip
                published = self._publish(snap, options.fsync)  # (e)
                if published:
                    self._after_publish(snap, added, delta)  # (g)
                    return snap
            delay = next(retries)
            if delay is None:
                raise CommitRetriesExhaustedError(
                    f"lost the race for the next snapshot {options.commit_max_retries + 1} times "
                    f"(commit user {self.commit_user!r}, identifier {identifier}); the commit did not land"
                )
            # back off first, then re-read: a latest read before the sleep is stale by the time it is used
            time.sleep(delay)
            latest = self._store.latest_snapshot()  # (f)
            if self.already_committed(identifier, latest):
                return None
            if overwrite is not None and deleted is not None:
                self._check_unchanged(latest, schema, partition, deleted)

    def _merge_delta(self, merger: ManifestMerger, added: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """(c), checking that every per-task manifest exists: one that was merged away by an earlier commit of
        the same message is gone, and committing its name would reference a missing file."""
        try:
            delta = merger.merge_delta(added)
            for m in delta:
                if m.file_name not in merger.written:
                    self._store.manifest(m.file_name)  # cached when this process wrote it
        except MissingMetadataError as exc:
            raise InvalidCommitError(
                f"a commit message's manifest is missing ({exc}): the message was already committed or "
                "discarded; nothing was committed"
            ) from exc
        return delta

    def _check_not_live(self, added: Sequence[ManifestFileMeta], latest: Snapshot | None) -> None:
        if latest is None:
            return
        live = {m.file_name for m in self._store.snapshot_manifests(latest)}
        again = sorted(m.file_name for m in added if m.file_name in live)
        if again:
            raise InvalidCommitError(
                f"commit message manifest {again[0]} is already in the table (snapshot {latest.id} or earlier): "
                "the same message cannot be committed twice; nothing was committed"
            )

    def _publish(self, snap: Snapshot, sync: bool) -> bool:
        """(e) Exclusive create of snapshot-N. True: ours landed. False: another committer took N. Read-back
        after a lost answer is FileIO's job; any error but a definite refusal leaves the outcome unknown."""
        self._in_doubt = True
        try:
            won = self._io.publish(layout.snapshot_path(snap.id), snap.to_json(), sync=sync)
        except CommitStateUnknownError:
            raise
        except DEFINITE_REFUSALS:
            self._in_doubt = False  # the store refused the request: nothing was created
            raise
        except Exception as exc:
            raise CommitStateUnknownError(
                f"publishing snapshot {snap.id} failed ({type(exc).__name__}: {exc}) and whether it landed is "
                "unknown; do not delete this commit's files: retry with the same commit user and identifier"
            ) from exc
        self._in_doubt = won
        return won

    def _after_publish(
        self, snap: Snapshot, added: Sequence[ManifestFileMeta], delta: Sequence[ManifestFileMeta]
    ) -> None:
        """(g) Best effort: the commit has landed. No error here reaches the caller (it would read as a failed
        commit and invite cleanup or a duplicate re-run); an interrupt skips the rest and is re-raised."""
        self._store.remember_published(snap)
        self._store.write_hint(layout.LATEST, snap.id)
        kept = {m.file_name for m in delta}
        for name in [m.file_name for m in added if m.file_name not in kept]:
            # merged into the delta's manifests, so referenced by no snapshot: once it is gone, committing the
            # same message again is refused (its manifest is missing) instead of adding its rows twice
            self._store.forget_manifest(name)
            _quietly(functools.partial(self._io.delete, layout.manifest_path(name)), "drop a merged manifest")
        hook = self._after_commit
        if hook is not None:
            _quietly(lambda: hook(snap), "after-commit hook")

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
        clock_ms = int(self._clock() * 1000)
        now = max(clock_ms, latest.time_millis) if latest is not None else clock_ms  # snapshot times never go back
        added_rows = sum(m.num_added_rows for m in delta)
        deleted_rows = sum(m.num_deleted_rows for m in delta)
        added_files = sum(m.num_added_files for m in delta)
        deleted_files = sum(m.num_deleted_files for m in delta)
        users = next_commit_users(
            latest.commit_users if latest else {},
            None if self._ephemeral else self.commit_user,
            identifier,
            clock_ms,
            retention_ms=options.commit_user_retention_ms,
            max_users=options.commit_user_max,
        )
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
            commit_users=users,
            nonce=uuid.uuid4().hex,
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


def _wall_clock() -> float:
    return time.time()


def _quietly(step: Callable[[], object], what: str) -> None:
    """Run a best-effort step after a landed commit: an error is logged, an interrupt propagates."""
    try:
        step()
    except Exception as exc:  # the commit has landed; this step is optional
        log.warning("after commit: %s failed: %s: %s", what, type(exc).__name__, exc)


def _check_int64(value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if value not in INT64:
        raise InvalidCommitError(f"{what} {value} is outside the signed 64-bit range the format stores")


def _message_manifests(messages: Sequence[CommitMessage] | CommitMessage) -> list[ManifestFileMeta]:
    """The per-task manifests of ``messages``, checked: real messages, each manifest once, plain file names."""
    if isinstance(messages, CommitMessage):
        messages = [messages]  # one task's message: as good as a list of one
    bad = [type(m).__name__ for m in messages if not isinstance(m, CommitMessage)]
    if bad:
        raise TypeError(f"messages must be CommitMessage objects (from TableWriter.prepare_commit), got {bad}")
    added = [m for msg in messages for m in msg.manifests]
    seen: set[str] = set()
    for m in added:
        name = m.file_name
        if not isinstance(name, str) or not name.startswith("manifest-") or "/" in name or "\\" in name:
            raise InvalidCommitError(f"commit message names {name!r}, which is not a manifest file name")
        if name in seen:
            raise InvalidCommitError(
                f"manifest {name} appears twice in one commit (the same message given twice?); nothing was committed"
            )
        seen.add(name)
    return added


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
