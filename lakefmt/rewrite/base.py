"""The skeleton every row-level change shares: plan on a snapshot, read the files it replaces, write their
replacements, commit DELETE + ADD with every replaced file checked live, and re-plan or give up on a conflict.

Compaction (:mod:`lakefmt.rewrite.compact.run`) and row-level delete (:mod:`lakefmt.rewrite.delete`) are variations of
it, as commit kinds are of :mod:`lakefmt.commit.producer`; the parts here are what they have in common:

* :class:`RewriteTarget`: what a rewrite needs from a table (its storage, its metadata store, a writer factory, a
  committer factory, the after-commit hook, the discarding of written files), built by :mod:`lakefmt.table`
  (``Table.rewrite_target()``) so that no module below the table takes a ``Table``;
* :func:`read_checked`: the rows of the files being replaced, each batch tagged with its file, every file's rows
  counted against its manifest entry (a file replaced behind the table's back is refused with
  :class:`CorruptMetadataError`, since a rewrite of it would change what the metadata says the table holds), and
  masked by the files' deletion vectors when given (:func:`load_group_vectors`: format version 3);
* :func:`publish`: one rewrite snapshot of a producer's kind, the written files deleted when the commit is known
  not to have landed and never otherwise;
* :func:`compacted_away`: whether only compactions removed the files a rewrite lost (a compaction never fails a
  writer: the rewrite is planned once more instead).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.committer import Committer
from lakefmt.commit.kinds import KeyedProducer, RewriteProducer, VectorPlanner
from lakefmt.commit.types import CommitOutcome, CommitRequest
from lakefmt.errors import CommitError, CorruptMetadataError, LakefmtError, RewriteConflictError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.files import read_inputs
from lakefmt.read.masks import Vector, deleted_positions, latest_data, load_vectors
from lakefmt.spec import CommitKind, CommitMessage, ManifestFileMeta, Snapshot, TableSchema, operations
from lakefmt.write.writer import TableWriter

__all__ = [
    "OPERATION",
    "RewriteTarget",
    "Targetable",
    "as_target",
    "chunks",
    "compacted_away",
    "keyed_producer",
    "load_group_vectors",
    "newest_creation",
    "publish",
    "read_checked",
    "removed_since",
]

#: the snapshot property naming a rewrite's operation (``compact``, ``delete``; :mod:`lakefmt.spec.operations`)
OPERATION = operations.OPERATION_PROPERTY


@dataclass(frozen=True)
class RewriteTarget:
    """What a rewrite needs from a table. ``new_writer(**options)`` and ``new_committer()`` are the table's
    factories; ``after_commit(snapshot, compact=...)`` its after-commit work (automatic compaction and expiration);
    ``discard(messages)`` deletes the files of messages known never to land; ``clock`` is for tests."""

    io: FileIO
    store: MetaStore
    new_writer: Callable[..., TableWriter]
    new_committer: Callable[[], Committer]
    after_commit: Callable[..., None]
    discard: Callable[[Sequence[CommitMessage]], None]
    clock: Callable[[], float] | None = None

    def schema(self) -> TableSchema:
        """The table's current schema."""
        return self.store.latest_schema()

    def latest_snapshot(self) -> Snapshot | None:
        """The table's latest snapshot (None before the first commit)."""
        return self.store.latest_snapshot()

    @property
    def partition_keys(self) -> tuple[str, ...]:
        """The table's partition keys."""
        return tuple(self.schema().partition_keys)


class _HasTarget(Protocol):
    def rewrite_target(self) -> RewriteTarget: ...


#: a rewrite's functions take a :class:`RewriteTarget` or anything that builds one (a ``lakefmt.Table``)
Targetable = RewriteTarget | _HasTarget


def as_target(table: Targetable) -> RewriteTarget:
    """``table`` as a :class:`RewriteTarget` (a table builds its own); ``TypeError`` for anything else (a table
    passed as None or as a path would otherwise fail with an ``AttributeError`` from deep inside)."""
    if isinstance(table, RewriteTarget):
        return table
    if not callable(getattr(table, "rewrite_target", None)):
        raise TypeError(f"expected a lakefmt Table (lakefmt.open_table(uri)), got {type(table).__name__}")
    return table.rewrite_target()


# -- reading -----------------------------------------------------------------------------------------------------
def read_checked(
    target: RewriteTarget,
    entries: pa.Table,
    schema: TableSchema,
    *,
    what: str,
    columns: Sequence[str] | None = None,
    vectors: Mapping[str, Vector] | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The rows of the files of ``entries`` (ADD entries), read under ``schema`` (files written under another one
    are matched by field id), each batch with the index of its file in ``entries``. A batch never spans two files,
    so each batch is the next file's while that file's row count (from its entry) is not reached; a file holding
    more or fewer rows than its entry says is refused (:class:`CorruptMetadataError` naming it: ``what`` names the
    operation, "delete"), since rows counted for the wrong file could be dropped or duplicated. Input files removed
    by a concurrent commit and deleted before they were read: :class:`RewriteConflictError`
    (:func:`lakefmt.read.files.read_inputs`).

    ``vectors`` (data-file path -> deletion vector, :func:`lakefmt.read.masks.load_vectors`): the rows a file's
    vector deletes are dropped from its batches, by their position in the file (so a file with a vector yields
    its row count less the vector's cardinality). Every file's rows are still counted whole against its entry
    before masking, and a vector deleting a position past the file's rows is refused as corrupt. A vector whose
    file was removed by a concurrent commit and deleted meanwhile: :class:`RewriteConflictError` naming it."""
    n = entries.num_rows
    rows = entries.column(ents.ROW_COUNT).to_pylist()
    names = ents.paths(entries)
    masks = [vectors.get(p) for p in names] if vectors else [None] * n
    positions: dict[int, np.ndarray] = {}
    seen = [0] * n
    i = 0
    for batch in read_inputs(target.io, entries, schema, target.store, what=what, columns=columns):
        if batch.num_rows == 0:
            continue
        while i < n and seen[i] >= rows[i]:
            i += 1
        if i == n or batch.num_rows > rows[i] - seen[i]:
            raise row_count_error(entries, min(i, n - 1), what)
        start = seen[i]
        seen[i] += batch.num_rows
        vector = masks[i]
        if vector is not None:
            if i not in positions:
                positions[i] = _positions(target, vector, names[i], rows[i], what)
            batch = _mask(batch, positions[i], start)
            if batch.num_rows == 0:
                continue
        yield i, batch
    if seen != rows:
        raise row_count_error(entries, next(k for k in range(n) if seen[k] != rows[k]), what)


def _positions(target: RewriteTarget, vector: Vector, path: str, rows: int, what: str) -> np.ndarray:
    """The positions ``vector`` deletes in data file ``path`` (of ``rows`` rows by its entry), checked
    (:func:`lakefmt.read.masks.deleted_positions`)."""
    if vector.data_file and vector.data_file != path:
        raise CorruptMetadataError(
            f"the deletion vector of {vector.data_file} (in {vector.file}) was handed to the {what} as the vector of "
            f"{path}; nothing was {_past(what)}"
        )
    try:
        return deleted_positions(target.io, vector, rows)
    except OSError as exc:  # the vector's file is missing (or unreadable)
        raise _vector_missing(target, vector.file, what) from exc
    except CorruptMetadataError as exc:
        raise CorruptMetadataError(f"{exc}; nothing was {_past(what)}") from exc


def _mask(batch: pa.RecordBatch, positions: np.ndarray, start: int) -> pa.RecordBatch:
    """``batch`` (the rows ``start ..`` of a file) without the rows at the file positions ``positions`` (sorted)."""
    lo, hi = np.searchsorted(positions, [start, start + batch.num_rows])
    if lo == hi:
        return batch
    keep = np.ones(batch.num_rows, dtype=bool)
    keep[positions[lo:hi] - start] = False
    return batch.filter(pa.array(keep))


def load_group_vectors(
    target: RewriteTarget, vector_entries: pa.Table | None, data: pa.Table, what: str, *, whole: bool = False
) -> dict[str, Vector]:
    """The vectors of the data files of ``data`` (their entries: each vector's positions are checked against its
    file's rows when decoded) held by the deletion-vector files of ``vector_entries`` (planned on an earlier
    snapshot): a file missing from storage is :class:`RewriteConflictError` when the latest snapshot no longer
    holds it (replaced by a concurrent commit, then deleted by an expiration), else
    :class:`CorruptMetadataError`. ``whole``: ``data`` is every live data file of its partitions and buckets, so a
    vector of another file there is checked not to be of a file live elsewhere (:func:`load_vectors`' ``live``)."""
    if vector_entries is None or vector_entries.num_rows == 0:
        return {}
    try:
        live = latest_data(target.store) if whole else None
        return load_vectors(target.io, vector_entries, data=data, live=live)
    except OSError as exc:
        missing = [p for p in ents.paths(vector_entries) if not _exists(target.io, p)]
        if not missing:
            raise
        raise _vector_missing(target, missing[0], what) from exc


def _exists(io: FileIO, path: str) -> bool:
    try:
        return io.exists(path)
    except OSError:
        return True  # unknown: not counted as missing


def _vector_missing(target: RewriteTarget, path: str, what: str) -> LakefmtError:
    """The error for a deletion-vector file found missing while a rewrite read it."""
    latest = target.latest_snapshot()
    live = set(ents.paths(ents.live_entries(target.store, latest))) if latest is not None else set()
    if path in live and latest is not None:
        return CorruptMetadataError(
            f"deletion-vector file {path} is missing from storage although the latest snapshot ({latest.id}) holds "
            f"it (deleted behind the table's back); nothing was {_past(what)}"
        )
    return RewriteConflictError(
        f"deletion-vector file {path} was replaced by a concurrent commit and deleted by an expiration before this "
        f"{what} read it; nothing was committed by this {what}",
        gone=[path],
    )


def row_count_error(entries: pa.Table, i: int, what: str) -> CorruptMetadataError:
    """The error for file ``i`` of ``entries``, whose rows are not as many as its manifest entry says."""
    path = ents.paths(entries.slice(i, 1))[0]
    want = entries.column(ents.ROW_COUNT)[i].as_py()
    return CorruptMetadataError(
        f"data file {path} does not hold the {want} rows its manifest entry says; nothing was {_past(what)}"
    )


def _past(what: str) -> str:
    return {"delete": "deleted", "compaction": "compacted"}.get(what, f"changed by the {what}")


def chunks(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Batches gathered into tables of about ``rows`` rows (a writer's per-call work is per table)."""
    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        buf.append(b)
        n += b.num_rows
        if n >= rows:
            yield pa.Table.from_batches(buf)
            buf, n = [], 0
    if buf:
        yield pa.Table.from_batches(buf)


def newest_creation(entries: pa.Table) -> int | None:
    """The newest creation time of the files of ``entries``: what a rewrite of their rows records as its files'
    (the age of the rows), so that compaction's tiers keep commit order when appends land while it runs."""
    newest = pc.max(entries.column("creation_time_ms")).as_py() if entries.num_rows else None
    return int(newest) if newest is not None else None


# -- committing --------------------------------------------------------------------------------------------------
def publish(
    target: RewriteTarget,
    producer: type[RewriteProducer],
    messages: Sequence[CommitMessage],
    rewritten: pa.Table,
    *,
    operation: str,
    after_commit: Callable[[Snapshot], None] | None,
    planned_on: int | None = None,
    discard_on_conflict: bool = True,
    extra: Mapping[str, Any] | None = None,
    parameters: Mapping[str, str] | None = None,
    metrics: Mapping[str, int] | None = None,
) -> Snapshot:
    """Commit one rewrite snapshot of ``producer``'s kind: the files of ``messages`` added, the files of
    ``rewritten`` (ADD entries) removed, each of which must still be live (:class:`RewriteConflictError`
    otherwise, nothing landed: the written files are deleted unless not ``discard_on_conflict``, for a caller that
    drops only some of them). Any other failure deletes the written files only when the commit is known not to
    have landed (an unknown outcome, an interrupt during the publish: nothing is deleted). The snapshot carries
    ``lakefmt.operation=<operation>`` and a one-off commit user (a rewrite is never replayed). ``extra``: more
    keyword arguments for ``producer``; ``parameters``: the operation's (``predicate``), recorded with it, as are
    ``metrics``, what it counted (:func:`lakefmt.spec.operations.metrics`)."""
    added = [meta for m in messages for meta in m.manifests]
    props = operations.properties(operation, **dict(parameters or {})) | operations.metrics(metrics or {})
    request = CommitRequest(None, f"{operation}-{uuid.uuid4().hex}", 0, added, properties=props)
    extra = dict(extra or {})
    if planned_on is not None:
        extra["planned_on"] = planned_on
    run = producer(
        target.io,
        target.store,
        request,
        clock=target.clock or time.time,
        after_commit=after_commit,
        rewritten=rewritten,
        **extra,
    )
    try:
        result = run.commit()
    except RewriteConflictError:
        if discard_on_conflict:
            target.discard(messages)  # a conflict is decided before the publish: nothing landed
        raise
    except BaseException:
        if not run.in_doubt:  # known not to have landed: the written files are garbage
            target.discard(messages)
        raise
    if result.outcome is not CommitOutcome.COMMITTED or result.snapshot is None:  # pragma: no cover - has work
        raise CommitError(f"a {operation} committed nothing ({result.outcome})")
    return result.snapshot


def keyed_producer(
    target: RewriteTarget,
    manifests: Sequence[ManifestFileMeta],
    planner: VectorPlanner,
    *,
    kind: CommitKind,
    properties: Mapping[str, str],
) -> KeyedProducer:
    """The commit of row-level changes planned on the snapshot it lands on (an upsert, a delete by vectors, a MERGE
    on a version-3 table): the files of ``manifests`` added and ``planner``'s vectors, under a one-off commit user
    named after the operation in ``properties``, with the target's clock and after-commit hook."""
    operation = properties.get(OPERATION, "commit")
    request = CommitRequest(None, f"{operation}-{uuid.uuid4().hex}", 0, list(manifests), properties=dict(properties))
    return KeyedProducer(
        target.io,
        target.store,
        request,
        clock=target.clock or time.time,
        after_commit=lambda snap: target.after_commit(snap),
        planner=planner,
        kind=kind,
    )


def removed_since(
    store: MetaStore, since: Snapshot | None, latest: Snapshot | None, paths: Iterable[str]
) -> dict[str, CommitKind] | None:
    """Which of ``paths`` the snapshots after ``since``, up to ``latest``, removed, each with the kind of the commit
    that did; None when unsure (a snapshot in between has expired, or metadata cannot be read)."""
    wanted = set(paths)
    out: dict[str, CommitKind] = {}
    if since is None or latest is None or not wanted:
        return out
    try:
        for sid in range(since.id + 1, latest.id + 1):
            snap = latest if sid == latest.id else store.snapshot(sid)
            for m in store.manifest_list(snap.delta_manifest_list):
                if m.num_deleted_files:
                    for path in set(ents.paths(ents.deletes(store.manifest(m.file_name)))) & wanted:
                        out[path] = snap.commit_kind
    except (LakefmtError, OSError):
        return None
    return out


def compacted_away(target: RewriteTarget, since: Snapshot | None, gone: Sequence[str]) -> bool:
    """Whether every file in ``gone`` was removed by a COMPACT snapshot after ``since`` and none by another kind.
    False when unsure (a snapshot in between has expired, or metadata cannot be read)."""
    if since is None or not gone:
        return False
    removed = removed_since(target.store, since, target.latest_snapshot(), gone)
    return (
        removed is not None
        and set(removed) == set(gone)
        and all(kind is CommitKind.COMPACT for kind in removed.values())
    )
