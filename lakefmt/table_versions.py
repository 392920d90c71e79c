"""The part of :class:`lakefmt.Table` that names and returns to versions: consumers (what a streaming reader has
read), tags (named snapshots) and restore (a new snapshot with an older one's rows)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from lakefmt.commit.restore import RestorePlan, commit_shown_plan, plan_restore
from lakefmt.commit.restore import restore as restore_to
from lakefmt.io import FileIO
from lakefmt.meta import consumers as cons
from lakefmt.meta import tags as tags_store
from lakefmt.meta.store import MetaStore
from lakefmt.meta.versions import version
from lakefmt.spec import Consumer, Snapshot, TableSchema
from lakefmt.spec.instants import Instant
from lakefmt.spec.tag import Tag
from lakefmt.units import Duration

__all__ = ["TableVersions"]


class TableVersions:
    """Consumers, tags and restore, mixed into :class:`lakefmt.Table` (which provides what is declared here)."""

    io: FileIO
    _store: MetaStore
    _clock: Callable[[], float] | None

    if TYPE_CHECKING:

        @property
        def uri(self) -> str: ...

        def table_schema(self, snapshot_id: int | None = None) -> TableSchema: ...

        def _after_commit(self, snap: Snapshot, *, compact: bool = True, background: bool | None = None) -> None: ...

    # -- consumers -------------------------------------------------------------------------------------
    def set_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        """Record that consumer ``consumer_id`` has finished reading every snapshot before ``next_snapshot``
        (create its record, or move it, forward or back). Expiration then keeps every snapshot from
        ``next_snapshot`` on, until the record is older than the table option ``consumer.expiration-time``
        (recording the same position again renews it). One atomic write of ``consumer/consumer-<id>``.

        ``consumer_id``: 1 to 200 characters of ``A-Z a-z 0-9 . _ -``, starting with a letter, a digit or
        ``_`` (:class:`InvalidConsumerIdError` otherwise). ``next_snapshot``: a snapshot id (>= 1); one past the
        latest snapshot means "read everything so far"."""
        sync = self.table_schema().table_options.fsync
        cons.record_consumer(self.io, consumer_id, next_snapshot, now_ms=self._now_ms(), sync=sync)

    def consumer(self, consumer_id: str) -> Consumer | None:
        """One consumer's record (one read), or None if the table has none for ``consumer_id``;
        :class:`CorruptMetadataError` if its file cannot be read. Other consumers' files are not read."""
        return cons.read_consumer(self.io, consumer_id)

    def consumers(self) -> list[Consumer]:
        """Every recorded consumer, by id (expired ones too: see ``consumer.expiration-time``).
        :class:`CorruptMetadataError` names any consumer file that cannot be read."""
        return sorted(cons.list_consumers(self.io).check(), key=lambda c: c.consumer_id)

    def delete_consumer(self, consumer_id: str) -> None:
        """Delete a consumer's record (also an unreadable one), so it no longer holds snapshots back.
        :class:`ConsumerNotFoundError` if the table has no consumer ``consumer_id``."""
        cons.delete_consumer_named(self.io, consumer_id, self.uri)

    # -- tags and restore ------------------------------------------------------------------------------
    def create_tag(self, name: str, snapshot_id: int | None = None, *, retain: Duration | None = None) -> Tag:
        """Name snapshot ``snapshot_id`` (the latest by default) ``name``: ``scan(tag=name)`` reads it, and
        ``expire`` and ``orphan-clean`` keep every file it reads (also after its snapshot expired) until the tag
        is deleted or ``retain`` (a ``timedelta``, ``"30d"`` or seconds) has passed since its creation. A tag never
        holds other snapshots back from expiration. One exclusive create of ``tag/tag-<name>``.

        ``name``: the rules of consumer ids (:class:`InvalidTagNameError`); ``retain``: a positive duration
        (:class:`InvalidOptionError`). :class:`TagAlreadyExistsError` if the name is taken (of two racing creates,
        one wins); :class:`SnapshotNotFoundError` if the snapshot does not exist, has expired, or expired while
        the tag was created."""
        sync = self.table_schema().table_options.fsync
        return tags_store.tag_version(self._store, name, snapshot_id, retain=retain, now_ms=self._now_ms(), sync=sync)

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name`` (also an unreadable or expired one). The files only it kept are left for
        ``orphan-clean`` (expiration has already passed them). :class:`TagNotFoundError` if there is none."""
        tags_store.delete_tag_named(self.io, name, self.uri)

    def tags(self) -> list[Tag]:
        """Every tag, by name (expired ones too: ``Tag.expired(now_ms)``). :class:`CorruptMetadataError` names
        any tag file that cannot be read."""
        return list(tags_store.list_tags(self.io).check().tags)

    def plan_restore(
        self, snapshot_id: int | None = None, *, tag: str | None = None, as_of: Instant | None = None
    ) -> RestorePlan:
        """What :meth:`restore` would do now (reads metadata, writes nothing): the files (and rows) it would
        remove and add again."""
        target = version(self.io, self._store, snapshot_id, tag, as_of, self._now_ms())
        return plan_restore(self._store, target, tag=tag)

    def restore(
        self, snapshot_id: int | None = None, *, tag: str | None = None, as_of: Instant | None = None
    ) -> Snapshot | None:
        """Commit a new snapshot whose rows equal those of snapshot ``snapshot_id``, of tag ``tag`` or of the
        snapshot current at ``as_of`` (give one). Newer snapshots stay, so a restore can be undone by restoring
        again. No data file is copied: the target's files are added again. Kind OVERWRITE, with the properties
        ``lakefmt.operation=restore`` and ``lakefmt.restored-snapshot=<id>``. Returns None (and commits nothing)
        when the table already holds exactly the target's files.

        Exactly-once is not rolled back: the commit-user map is carried forward from the latest snapshot, so a
        replayed batch committed after the restored version is still recognised (and skipped). Raises
        :class:`CommitConflictError` if another commit changes the table while the restore commits (nothing
        lands; compactions alone are followed), :class:`SnapshotNotFoundError` or :class:`TagNotFoundError` for a
        target that does not exist or stopped being kept meanwhile, :class:`InvalidCommitError` on a
        format-version-1 table (upgrade it first: :meth:`upgrade`)."""
        target = version(self.io, self._store, snapshot_id, tag, as_of, self._now_ms())
        clock = self._clock or time.time
        return restore_to(self.io, self._store, target, tag=tag, clock=clock, after_commit=self._after_commit)

    def apply_restore_plan(self, plan: RestorePlan) -> Snapshot | None:
        """Commit exactly ``plan``, from :meth:`plan_restore` (after showing it, say): if another commit changed
        the table since it was planned, :class:`CommitConflictError` and nothing lands (compactions alone are
        followed), so the files removed and added again are those the plan lists. Returns None (and commits
        nothing) for a plan with nothing to do. Otherwise as :meth:`restore`."""
        return commit_shown_plan(
            self.io, self._store, plan, clock=self._clock or time.time, after_commit=self._after_commit
        )

    def _now_ms(self) -> int:
        return int((self._clock or time.time)() * 1000)
