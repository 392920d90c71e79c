"""The commit protocol, top to bottom, for every kind of commit. See docs/format.md, "Commit protocol".

    a. dedup      the latest snapshot remembers each recent commit user's last identifier: if this
                  identifier is not greater, the commit already happened -> ALREADY_COMMITTED
    b. latest     LATEST hint, then probe snapshot-(L+1) until absent; the schema to record: the newest known
                  (a schema change publishes a snapshot too), the writers' files readable under it
                  (:mod:`lakefmt.commit.schemas`)
    c. delta      merge the writers' per-task manifests (+ DELETE entries of what the commit replaces)
    d. base       L's base + L's delta, minor/full merged -> base list
    e. publish    create snapshot-(L+1) exclusively; exactly one racing committer wins
    f. lost race  back off, re-read latest, re-check dedup and conflicts, rebuild the base, retry
    g. after      update LATEST, drop merged-away per-task manifests, run the after-commit hook: best effort

A commit that dies anywhere leaves the table as before it or as after it: nothing is visible until (e), and
(e) is atomic. Files written by an attempt that did not publish are orphans for ``orphan-clean``.

From the moment a publish request is sent, nothing of the commit may be deleted unless the publish is known
to have failed: :attr:`SnapshotProducer.in_doubt` says which. FileIO resolves an unknown outcome by retrying
and reading back, or raises :class:`CommitStateUnknownError`; whatever follows a successful publish (g) can
neither fail the commit nor trigger cleanup, and an interrupt there skips the rest of (g) and is re-raised.

Each kind of commit (append, overwrite; compact and delete next) is a short subclass that overrides the
hooks: :meth:`check` (refuse bad input before writing), :meth:`replaced` (the live entries it deletes) and
:meth:`check_conflict` (after a lost race: did a concurrent commit change what it replaces?).

Requests, worst case (defaults: ``commit.max-retries`` 20, ``FileIO.PUBLISH_ATTEMPTS`` 8): each lost race
costs a base-list write, one conditional PUT, one read-back and a re-read of the latest snapshot (a hint GET
and a probe); a publish whose answers keep getting lost costs at most 8 PUTs and 8 read-backs and then ends
the commit (CommitStateUnknownError). So at most 2 + 21 list writes, 20 x 4 + 16 publish-side requests.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt import hooks
from lakefmt.commit.history import verify_in_history
from lakefmt.commit.merge import ManifestMerger, MergePolicy
from lakefmt.commit.schemas import commit_schema
from lakefmt.commit.types import CommitOutcome, CommitRequest, CommitResult, ListRef
from lakefmt.commit.users import already_committed, next_commit_users
from lakefmt.errors import (
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    InvalidCommitError,
    MissingMetadataError,
    NonAtomicStorageError,
)
from lakefmt.io import FileIO
from lakefmt.meta import entries
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.retry import backoff
from lakefmt.spec import CommitKind, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest_list import encode_manifest_list

__all__ = ["SnapshotProducer"]

log = logging.getLogger("lakefmt.commit")


class SnapshotProducer:
    """Runs the protocol for one :class:`CommitRequest`. Subclasses set :attr:`kind` and override hooks."""

    kind: ClassVar[CommitKind]
    #: whether a snapshot that adds and removes no file is published all the same (a schema change's)
    empty_ok: ClassVar[bool] = False

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        request: CommitRequest,
        *,
        clock: Callable[[], float],
        after_commit: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self.io, self.store, self.request = io, store, request
        self._clock, self._after_commit = clock, after_commit
        self.in_doubt = False  #: a publish request may have landed: delete nothing of this commit

    # -- hooks ------------------------------------------------------------------------------------------
    def check(self, latest: Snapshot | None, schema: TableSchema) -> None:
        """Refuse what cannot be committed, before anything is written."""

    def has_work(self) -> bool:
        """Whether the commit can change the table before looking at it (an append without files cannot)."""
        return bool(self.request.added)

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table | None:
        """Live entries of ``latest`` that this commit deletes (None: it deletes nothing, it only adds)."""
        return None

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        """After a lost race: raise :class:`CommitConflictError` if ``latest`` changed what is replaced in a way
        this kind cannot accept. Return None to keep ``replaced``, or the entries to replace instead (a kind that
        re-plans when only compactions moved its files: the rows it replaces are the same, in other files)."""
        return None

    def change_manifests(self, merger: ManifestMerger, replaced: pa.Table | None) -> list[ManifestFileMeta]:
        """The manifests of the entries this attempt changes besides the writers' files: DELETE entries of
        ``replaced`` (a kind that also adds entries it makes while committing, a key table's deletion vectors,
        adds them here)."""
        if replaced is None or not replaced.num_rows:
            return []
        return merger.write_entries(entries.as_deletes(replaced), 100.0)

    def base_manifests(self, merger: ManifestMerger, latest: Snapshot) -> list[ManifestFileMeta]:
        """(d) The manifests of the base list: ``latest``'s base and delta, minor or full merged. A kind that must
        rewrite entries of the base overrides it (a restore drops the entries of the paths it adds again)."""
        return merger.merge_base(self.store.snapshot_manifests(latest))

    def removes_rows(self, replaced: pa.Table | None) -> bool:
        """Whether the commit deletes or replaces rows that were live before it (the snapshot's ``removesRows``):
        by default, whether it removes data files holding rows (``replaced``). A compaction never does (it moves
        rows unchanged); a kind that marks rows in deletion vectors says whether it marks live ones."""
        if self.kind is CommitKind.COMPACT or replaced is None or replaced.num_rows == 0:
            return False
        rows = entries.data_files(replaced).column(entries.ROW_COUNT)
        return bool(pc.sum(rows).as_py() or 0)

    def carries_users_unchanged(self) -> bool:
        """Whether the snapshot carries the commit-user map forward exactly as it is (a compaction: it is no
        writer's commit and must not age anyone's dedup mark out)."""
        return False

    def changelog_list(self, merger: ManifestMerger, schema: TableSchema, options: TableOptions) -> ListRef | None:
        """The manifest list of the changelog files the commit stored (``changelog-producer=lookup``), written
        when first asked for each plan; None: it stored none."""
        return None

    def superseded(self, latest: Snapshot | None) -> bool:
        """Whether ``latest`` already does what this commit would (a schema change's snapshot, once the latest
        records that schema): the commit then ends as ALREADY_COMMITTED."""
        return False

    # -- the protocol -----------------------------------------------------------------------------------
    def commit(self) -> CommitResult:
        req = self.request
        latest = self.store.latest_snapshot()  # (b)
        if already_committed(latest, req.user, req.identifier) or self.superseded(latest):  # (a)
            return CommitResult(CommitOutcome.ALREADY_COMMITTED)
        schema = commit_schema(self.store, latest, req.added)
        options = schema.table_options
        if not self.io.atomic_publish and not options.allow_non_atomic_publish:
            raise NonAtomicStorageError(
                f"{self.io.uri}: this storage ({self.io.protocol}) has no atomic put-if-absent, so racing "
                "committers could both win; set the table option commit.allow-non-atomic-publish=true to accept "
                "that risk (one committer per table at a time)"
            )
        self.check(latest, schema)
        if not self.has_work():
            return CommitResult(CommitOutcome.NOTHING_TO_COMMIT)
        policy = MergePolicy.from_options(options)
        merger = ManifestMerger(self.store, self.io, schema, policy, uuid.uuid4().hex)
        adds = self._merge_delta(merger)  # (c)
        replaced: pa.Table | None = None
        removals: list[ManifestFileMeta] = []
        delta: list[ManifestFileMeta] = list(adds)
        delta_list: ListRef | None = None
        retries = backoff(options.commit_max_retries + 1, first=0.01)
        while True:
            try:
                self._check_not_live(latest)
                if replaced is None:
                    replaced = self.replaced(latest, schema)
                    removals = self.change_manifests(merger, replaced)
                    if removals:
                        delta, delta_list = adds + removals, None
                if not delta and not self.empty_ok:
                    return CommitResult(CommitOutcome.NOTHING_TO_COMMIT)
                delta_list = delta_list or self._write_list(merger, delta, schema, options)
                base = self.base_manifests(merger, latest) if latest else []  # (d)
            except MissingMetadataError:  # latest's metadata is gone: expired, if latest is no longer latest
                newer = self.store.latest_snapshot()
                if latest is None or newer is None or newer.id == latest.id:
                    raise  # damage, not a race
            else:
                base_list = self._write_list(merger, base, schema, options)
                changelog = self.changelog_list(merger, schema, options)
                removes = self.removes_rows(replaced)
                snap = self._snapshot(latest, schema, options, base_list, delta_list, delta, changelog, removes)
                if self._publish(snap, options.fsync):  # (e)
                    if options.auto_expire:
                        verify_in_history(self.store, snap, self.request)
                    self._after_publish(snap, delta)  # (g)
                    return CommitResult(CommitOutcome.COMMITTED, snap)
            delay = next(retries)
            if delay is None:
                raise CommitRetriesExhaustedError(
                    f"lost the race for the next snapshot {options.commit_max_retries + 1} times (commit user "
                    f"{req.name!r}, identifier {req.identifier}); the commit did not land"
                )
            time.sleep(delay)  # back off first, then re-read: a latest read before the sleep would be stale
            latest = self.store.latest_snapshot()  # (f)
            if already_committed(latest, req.user, req.identifier) or self.superseded(latest):
                return CommitResult(CommitOutcome.ALREADY_COMMITTED)
            schema = commit_schema(self.store, latest, req.added)  # a schema change may have landed meanwhile
            if replaced is not None and (again := self.check_conflict(latest, schema, replaced)) is not None:
                # re-planned (only compactions moved the replaced files): the old removal manifests and lists
                # become orphans, never deleted here (nothing of an attempt is deleted once a publish was tried)
                replaced, delta_list = again, None
                removals = self.change_manifests(merger, replaced)
                delta = adds + removals

    # -- the steps --------------------------------------------------------------------------------------
    def _merge_delta(self, merger: ManifestMerger) -> list[ManifestFileMeta]:
        """(c), checking that every per-task manifest exists: one that an earlier commit of the same message
        merged away is gone, and committing its name would reference a missing file."""
        try:
            delta = merger.merge_delta(self.request.added)
            for m in delta:
                if m.file_name not in merger.written:
                    self.store.manifest(m.file_name)  # cached when this process wrote it
        except MissingMetadataError as exc:
            raise InvalidCommitError(
                f"a commit message's manifest is missing ({exc}): the message was already committed or "
                "discarded; nothing was committed"
            ) from exc
        return delta

    def _check_not_live(self, latest: Snapshot | None) -> None:
        if latest is None:
            return
        live = {m.file_name for m in self.store.snapshot_manifests(latest)}
        again = sorted(m.file_name for m in self.request.added if m.file_name in live)
        if again:
            raise InvalidCommitError(
                f"commit message manifest {again[0]} is already in the table (snapshot {latest.id} or earlier): "
                "the same message cannot be committed twice; nothing was committed"
            )

    def _write_list(
        self, merger: ManifestMerger, metas: Sequence[ManifestFileMeta], schema: TableSchema, options: TableOptions
    ) -> ListRef:
        data = encode_manifest_list(metas, schema.partition_schema, schema.format_version)
        name = merger.next_name(list_file=True)
        self.io.write(layout.manifest_list_path(name), data, sync=options.fsync)
        self.store.remember_list(name, list(metas))
        return ListRef(name, len(data))

    def _snapshot(
        self,
        latest: Snapshot | None,
        schema: TableSchema,
        options: TableOptions,
        base: ListRef,
        delta_list: ListRef,
        delta: Sequence[ManifestFileMeta],
        changelog: ListRef | None = None,
        removes_rows: bool = False,
    ) -> Snapshot:
        req = self.request
        clock_ms = int(self._clock() * 1000)
        added_rows = sum(m.num_added_rows for m in delta) - sum(m.num_deleted_rows for m in delta)
        added_files = sum(m.num_added_files for m in delta) - sum(m.num_deleted_files for m in delta)
        watermark = req.watermark
        if latest is not None and latest.watermark is not None:
            watermark = latest.watermark if watermark is None else max(watermark, latest.watermark)
        if self.carries_users_unchanged():
            users = dict(latest.commit_users) if latest else {}
        else:
            users = next_commit_users(
                latest.commit_users if latest else {},
                req.user,
                req.identifier,
                clock_ms,
                retention_ms=options.commit_user_retention_ms,
                max_users=options.commit_user_max,
            )
        return Snapshot(
            id=latest.id + 1 if latest else 1,
            schema_id=schema.id,
            base_manifest_list=base.name,
            base_manifest_list_size=base.size,
            delta_manifest_list=delta_list.name,
            delta_manifest_list_size=delta_list.size,
            commit_user=req.name,
            commit_identifier=req.identifier,
            commit_kind=self.kind,
            time_millis=max(clock_ms, latest.time_millis) if latest else clock_ms,  # never goes back
            total_record_count=(latest.total_record_count if latest else 0) + added_rows,
            delta_record_count=added_rows,
            total_file_count=(latest.total_file_count if latest else 0) + added_files,
            watermark=watermark,
            properties=dict(req.properties),
            commit_users=users,
            nonce=uuid.uuid4().hex,
            version=schema.format_version,
            changelog_manifest_list=None if changelog is None else changelog.name,
            changelog_manifest_list_size=0 if changelog is None else changelog.size,
            changelog_record_count=0 if changelog is None else changelog.rows,
            removes_rows=removes_rows,
        )

    def _publish(self, snap: Snapshot, sync: bool) -> bool:
        """(e) True: ours landed. False: another committer took the id. Read-back after a lost answer is
        FileIO's job; any other error but a definite refusal leaves the outcome unknown."""
        hooks.fire_publish("before-publish", snap)
        self.in_doubt = True
        try:
            won = self.io.publish(layout.snapshot_path(snap.id), snap.to_json(), sync=sync)
        except CommitStateUnknownError:
            raise
        except self.io.definite_refusals:
            self.in_doubt = False  # the store refused the request: nothing was created
            raise
        except Exception as exc:
            raise CommitStateUnknownError(
                f"publishing snapshot {snap.id} failed ({type(exc).__name__}: {exc}) and whether it landed is "
                "unknown; do not delete this commit's files: retry with the same commit user and identifier"
            ) from exc
        self.in_doubt = won
        if won:
            hooks.fire_publish("after-publish", snap)
        return won

    def _after_publish(self, snap: Snapshot, delta: Sequence[ManifestFileMeta]) -> None:
        """(g) Best effort: the commit has landed. No error here reaches the caller (it would read as a failed
        commit and invite cleanup or a duplicate re-run); an interrupt skips the rest and is re-raised."""
        self.store.remember_published(snap)
        self.store.write_hint(layout.LATEST, snap.id)
        kept = {m.file_name for m in delta}
        merged = [m.file_name for m in self.request.added if m.file_name not in kept]
        for name in merged:
            self.store.forget_manifest(name)
        # merged into the delta's manifests, so referenced by no snapshot: once they are gone, committing the
        # same message again is refused (its manifest is missing) instead of adding its rows twice
        paths = [layout.manifest_path(name) for name in merged]
        _quietly(functools.partial(self.io.delete_many, paths), "drop merged per-task manifests")
        if self._after_commit is not None:
            _quietly(functools.partial(self._after_commit, snap), "after-commit hook")


def _quietly(step: Callable[[], object], what: str) -> None:
    """Run a best-effort step after a landed commit: an error is logged, an interrupt propagates."""
    try:
        step()
    except Exception as exc:  # the commit has landed; this step is optional
        log.warning("after commit: %s failed: %s: %s", what, type(exc).__name__, exc)
