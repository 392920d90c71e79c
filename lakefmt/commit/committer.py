"""The public committer: checks what a caller hands it, then runs the kind of commit asked for through the
protocol in :mod:`lakefmt.commit.producer`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import (
    AppendProducer,
    KeyedOverwriteProducer,
    KeyedProducer,
    OverwriteProducer,
    RewriteProducer,
    VectorPlanner,
)
from lakefmt.commit.producer import SnapshotProducer
from lakefmt.commit.types import CommitOutcome, CommitRequest, CommitResult
from lakefmt.commit.users import already_committed
from lakefmt.errors import InvalidCommitError, KeyTableError
from lakefmt.io import FileIO
from lakefmt.meta.store import MetaStore
from lakefmt.spec import CommitKind, CommitMessage, ManifestFileMeta, Snapshot, operations
from lakefmt.spec.filters import show
from lakefmt.spec.scope import check_partition_given

__all__ = ["CommitOutcome", "CommitResult", "Committer"]

INT64 = range(-(1 << 63), 1 << 63)


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
        planner: Callable[..., VectorPlanner] | None = None,
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
        self._user = commit_user
        self.commit_user = commit_user if commit_user is not None else f"oneoff-{uuid.uuid4().hex}"
        self._planner = planner  # a key table's upsert planner (rewrite.keys.planners), from Table.new_committer
        self._producer: SnapshotProducer | None = None
        self.last_result: CommitResult | None = None  #: how the last commit call ended (None if it raised)

    @property
    def may_have_landed(self) -> bool:
        """Whether the last ``commit``/``overwrite`` call may have published its snapshot: True from the moment
        a publish request was sent until one is known to have failed. While True, none of its files may be
        deleted, whatever the call raised (an interrupt included)."""
        return self._producer is not None and self._producer.in_doubt

    def commit(
        self,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        *,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Append the files in ``messages`` (the tasks' messages, or one alone). Returns the new snapshot, or
        None when this user already committed ``identifier`` (or a later one), or when there is nothing to
        commit; :attr:`last_result` tells which.

        On a key table the files' rows are upserts: for each key, the rows the commit brings replace its live row
        (of two rows for one key in the commit, the one of the later message wins, or the larger
        ``sequence.field``), marked in deletion vectors as part of the same snapshot."""
        if self._store.latest_schema().has_primary_key:
            if self._planner is None:
                raise KeyTableError(
                    "a key table's commits mark the old rows of their keys: use the committer of "
                    "Table.new_committer(), which knows how"
                )
            props = _with_operation(properties, operations.UPSERT, mode="append")
            return self._run(KeyedProducer, messages, identifier, watermark, props, planner=self._planner())
        props = _with_operation(properties, operations.WRITE, mode="append")
        return self._run(AppendProducer, messages, identifier, watermark, props)

    def overwrite(
        self,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        *,
        partition: Mapping[str, Any] | None = None,
        where: str | pc.Expression | None = None,
        dynamic: bool = False,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Replace the files of a scope with ``messages``: the whole table (nothing given), or exactly one of
        ``partition`` (values of partition keys, ``{"dt": "2026-11-01"}``), ``where`` (a predicate on partition
        columns, ``"dt >= '2026-11-01' AND dt < '2026-12-01'"`` or a pyarrow expression) and ``dynamic=True``
        (the partitions the written files are in). Files are replaced whole, by their partition values; a
        written file outside a partition or ``where`` scope is refused (:class:`InvalidPartitionError`).

        Raises :class:`CommitConflictError` if a concurrent commit changed the replaced files first."""
        check_partition_given(partition)
        keyed: dict[str, Any] = {}
        kind: type[OverwriteProducer] = OverwriteProducer
        if self._store.latest_schema().has_primary_key:
            if self._planner is None:
                raise KeyTableError("a key table's overwrites are committed by the committer of Table.new_committer()")
            kind, keyed = KeyedOverwriteProducer, {"planner": self._planner(against_live=False)}
        props = _with_operation(
            properties, operations.OVERWRITE, mode="dynamic" if dynamic else "overwrite",
            partition=operations.show_partition(partition) if partition else None,
            predicate=None if where is None else where if isinstance(where, str) else show(where),
        )
        return self._run(
            kind,
            messages,
            identifier,
            watermark,
            props,
            partition=partition or {},
            where=where,
            dynamic=dynamic,
            **keyed,
        )

    def rewrite(
        self,
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        *,
        rewritten: pa.Table,
        producer: type[RewriteProducer] = RewriteProducer,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Replace the live files ``rewritten`` (their ADD entries, read from a snapshot) with the files of
        ``messages``, DELETE + ADD in one snapshot of ``producer``'s kind (a :class:`RewriteProducer`: OVERWRITE
        for a row-level delete, a subclass of kind COMPACT for a compaction).

        Raises :class:`RewriteConflictError` (nothing committed) if a concurrent commit removed one of the
        rewritten files; appends never conflict with a rewrite."""
        if not (isinstance(producer, type) and issubclass(producer, RewriteProducer)):
            raise TypeError(f"producer must be a RewriteProducer subclass, got {producer!r}")
        token = operations.COMPACT if producer.kind is CommitKind.COMPACT else operations.OVERWRITE
        props = _with_operation(properties, token)
        return self._run(producer, messages, identifier, watermark, props, rewritten=rewritten)

    def already_committed(self, identifier: int, latest: Snapshot | None = None) -> bool:
        """Whether this user has committed ``identifier`` (or a later one) according to the latest snapshot."""
        latest = latest if latest is not None else self._store.latest_snapshot()
        return already_committed(latest, self._user, identifier)

    def _run(
        self,
        kind: type[SnapshotProducer],
        messages: Sequence[CommitMessage] | CommitMessage,
        identifier: int,
        watermark: int | None,
        properties: Mapping[str, str] | None,
        **extra: Any,
    ) -> Snapshot | None:
        self._producer, self.last_result = None, None
        _check_int64(identifier, "identifier")
        if watermark is not None:
            _check_int64(watermark, "watermark")
        request = CommitRequest(
            self._user, self.commit_user, identifier, _message_manifests(messages), watermark, dict(properties or {})
        )
        self._producer = kind(
            self._io, self._store, request, clock=self._clock, after_commit=self._after_commit, **extra
        )
        self.last_result = self._producer.commit()
        return self.last_result.snapshot


def _with_operation(properties: Mapping[str, str] | None, token: str, **parameters: Any) -> dict[str, str]:
    """``properties`` with the operation ``token`` and its ``parameters`` recorded, unless they name an operation
    already (a caller that knows better: a delete, a restore, a merge)."""
    props = dict(properties or {})
    if operations.OPERATION_PROPERTY in props:
        return props
    return {**operations.properties(token, **parameters), **props}


def _wall_clock() -> float:
    return time.time()


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
