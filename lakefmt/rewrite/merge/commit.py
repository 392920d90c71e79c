"""How a MERGE lands: one commit (``lakefmt.operation=merge``) that removes the target rows it changed and adds the
rows it wrote.

* Copy-on-write (a table without deletion vectors): the files holding removed rows are rewritten without them,
  in the same commit as the new rows (:class:`~lakefmt.commit.kinds.RewriteProducer`: each rewritten file must
  still be live, or :class:`RewriteConflictError` and nothing lands).
* Deletion vectors (``write.delete.mode=merge-on-read``, key tables): the removed rows are marked in their
  files' vectors by :class:`MarkRowsPlanner`, on the snapshot the commit lands on. A concurrent commit that removed
  a file whose rows the merge marks, or marked one of those rows itself (a concurrent delete or upsert of the same
  row), makes it fail with :class:`RewriteConflictError`: never a lost update or a resurrected row. On a key table
  the written rows also replace the live rows of their keys (:class:`MergeUpsertPlanner`), so a key keeps at most
  one live row.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakefmt.commit.kinds import RewriteProducer, VectorChanges
from lakefmt.commit.types import CommitOutcome
from lakefmt.errors import MergeError, RewriteConflictError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.masks import deleted_positions, load_vectors
from lakefmt.rewrite.base import RewriteTarget, keyed_producer, publish, removed_since
from lakefmt.rewrite.keys.buckets import FILE, POS, BucketKey, Marks, bucket_keys_of, live_in
from lakefmt.rewrite.keys.planners import Planner, UpsertPlanner
from lakefmt.rewrite.merge.reads import MergeReads
from lakefmt.spec import CommitKind, CommitMessage, ManifestFileMeta, Snapshot, TableSchema, operations

__all__ = ["MERGE", "MarkRowsPlanner", "MergeProducer", "MergeUpsertPlanner", "commit_copy_on_write", "commit_marks"]

#: the value of ``lakefmt.operation`` a MERGE's snapshot carries
MERGE = operations.MERGE


def _write(target: RewriteTarget, rows: Iterable[pa.Table | pa.RecordBatch]) -> CommitMessage:
    with target.new_writer() as writer:
        for r in rows:
            if r.num_rows:
                writer.write(r)
        return writer.prepare_commit()


class MergeProducer(RewriteProducer):
    """A copy-on-write merge's commit: a rewrite whose read files are also checked (:class:`MergeReads`) on the
    snapshot it lands on."""

    def __init__(self, *args: Any, reads: MergeReads, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = reads

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        self.reads.check(self.store, latest)
        return super().replaced(latest, schema)

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        self.reads.check(self.store, latest)
        return super().check_conflict(latest, schema, replaced)


def commit_copy_on_write(
    target: RewriteTarget, rewritten: pa.Table, kept: Iterable[pa.RecordBatch], written: pa.Table, reads: MergeReads,
    *, parameters: Mapping[str, str], metrics: Callable[[], Mapping[str, int]],
) -> Snapshot | None:
    """Rewrite the files of ``rewritten`` (ADD entries) as ``kept`` (their rows the merge leaves, streamed) and add
    ``written``, in one snapshot; None when there is nothing to do. The snapshot records ``parameters`` and
    ``metrics()`` (called once ``kept`` has been written)."""
    if rewritten.num_rows == 0 and written.num_rows == 0:
        return None
    message = _write(target, itertools.chain(kept, [written]))
    return publish(target, MergeProducer, [message], rewritten, operation=MERGE, after_commit=target.after_commit,
                   extra={"reads": reads}, parameters=parameters, metrics=metrics())


class _Checked:
    """The marks a merge planned on the snapshot it read (``marks``: data-file path -> positions; ``seen``: the
    positions each of those files' vectors deleted then), checked on the snapshot a commit lands on."""

    def __init__(self, io: FileIO, marks: dict[str, np.ndarray], seen: dict[str, np.ndarray], homes: pa.Table,
                 reads: MergeReads, known: frozenset[str] = frozenset()) -> None:
        self.io, self.marks, self.seen, self.homes, self.reads = io, marks, seen, homes, reads
        self.known = known  #: the data files live on the snapshot the merge read

    def check_replaced(self, replaced: dict[BucketKey, Marks]) -> None:
        """Refuse (:class:`MergeError`) live rows that the written rows would replace (by key) but that the merge
        neither updates nor deletes: rows of files it saw (live when it read) that hold a key it writes. A row of a
        file added since is a concurrent write of that key, which the merge's row replaces, as an upsert would."""
        for mark in replaced.values():
            for path, parts in mark.by_file.items():
                if path not in self.known:
                    continue
                hit = np.setdiff1d(np.concatenate(parts), self.marks.get(path, np.zeros(0, np.int64)))
                if len(hit):
                    raise MergeError(
                        f"this merge writes a key that another live row holds ({len(hit)} row(s) of {path}, which "
                        "it neither updates nor deletes): an update moving a row onto another row's key, or an "
                        "insert of a key the ON condition did not match; on a key table a key holds one row. "
                        "Nothing was committed"
                    )

    def check_kept(self, kept: dict[str, list[np.ndarray]]) -> None:
        """Refuse live rows that keep their key against a row the merge writes (``sequence.field``: the live row's
        value is larger) and that the merge does not itself update or delete: in a file it saw, the merge writes
        a key another row holds (:class:`MergeError`, as when the written row would win); in a file added since,
        a concurrent commit wrote the key with a larger value, and the merge's row would not land
        (:class:`RewriteConflictError`)."""
        for path, parts in kept.items():
            if path in self.known:
                raise MergeError(
                    f"this merge writes a key that another live row holds ({sum(len(p) for p in parts)} row(s) of "
                    f"{path}, which it neither updates nor deletes, and whose sequence.field value is larger): an "
                    "update moving a row onto another row's key, or an insert of a key the ON condition did not "
                    "match; on a key table a key holds one row. Nothing was committed"
                )
            raise RewriteConflictError(
                f"a concurrent commit wrote a key this merge writes, with a larger sequence.field value ({path}): "
                "the merge's row would not land; nothing was committed",
                gone=[],
            )

    def check(self, live: pa.Table) -> dict[str, np.ndarray]:
        """``marks`` after checking that each marked file is live in ``live`` (entries) and that no concurrent
        commit deleted a row the merge changes; :class:`RewriteConflictError` otherwise."""
        data = ents.data_files(live)
        here = set(ents.paths(data))
        gone = sorted(p for p in self.marks if p not in here)
        if gone:
            raise RewriteConflictError(
                f"{len(gone)} file(s) holding rows this merge changes were removed by a concurrent commit (the "
                f"first: {gone[0]}); nothing was committed",
                gone=gone,
            )
        vectors = load_vectors(self.io, ents.vector_files(live), data=data)
        for path, marks in self.marks.items():
            if path not in vectors:
                continue
            now = deleted_positions(self.io, vectors[path])
            before = self.seen.get(path)
            if before is not None and len(now) == len(before) and bool(np.array_equal(now, before)):
                continue  # the vector is as the merge read it
            new = now if before is None else np.setdiff1d(now, before, assume_unique=True)
            if len(new) and bool(np.isin(marks, new).any()):
                raise RewriteConflictError(
                    f"a concurrent commit deleted or replaced rows of {path} that this merge changes; nothing was "
                    "committed",
                    gone=[],
                )
        return self.marks


class MarkRowsPlanner(Planner):
    """Marks the rows a merge removes (on a table with deletion vectors and no key), checked first."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema, checked: _Checked) -> None:
        super().__init__(io, store, schema)
        self.checked = checked

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        schema = self.schema if latest is None else self.store.schema_for(latest)
        self.checked.reads.check(self.store, latest)
        self.buckets = set(bucket_keys_of(self.checked.homes, schema))
        live = live_in(self.store, latest, schema, self.buckets)
        return self._changes(live, _by_bucket(self.checked.check(live), self.checked.homes, schema), schema)


class MergeUpsertPlanner(UpsertPlanner):
    """A key table's merge: the written rows replace their keys' live rows (an upsert), and the rows the merge
    deletes (or updates under another key) are marked, checked first."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema, checked: _Checked) -> None:
        super().__init__(io, store, schema)
        self.checked = checked
        self._latest: Snapshot | None = None

    def _removed_anyway(self, rows: pa.Table, paths: list[str]) -> np.ndarray:
        """The live rows the merge itself updates or deletes: a MERGE names the rows it replaces, so with
        ``sequence.field`` they do not compete with its new rows."""
        out = np.zeros(rows.num_rows, dtype=bool)
        files, positions = rows.column(FILE).to_numpy(), rows.column(POS).to_numpy()
        for i in np.unique(files):
            own = self.checked.marks.get(paths[int(i)])
            if own is not None:
                at = files == i
                out[at] = np.isin(positions[at], own)
        return out

    def _rerun_after_compaction(self, marks: dict[BucketKey, Marks]) -> None:
        """A written key's live row in a file the merge did not read (not its own new files) is a concurrent
        write of the key, or a row it read that a compaction since moved to a new file. When compactions since
        removed files it read, tell them apart by running the merge again on the latest snapshot
        (:class:`RewriteConflictError` naming those files, which :meth:`TableMerger.execute` retries)."""
        own = set(ents.paths(self.new_files)) if self.new_files is not None else set()
        touched = {p for mark in marks.values() for p in mark.by_file} | set(self.kept_live.by_file)
        if not any(p not in self.checked.known and p not in own for p in touched):
            return
        removed = removed_since(self.store, self.checked.reads.snapshot, self._latest, self.checked.known)
        compacted = sorted(p for p, kind in (removed or {}).items() if kind is CommitKind.COMPACT)
        if compacted:
            raise RewriteConflictError(
                f"a compaction since this merge read rewrote {len(compacted)} file(s) it read (the first: "
                f"{compacted[0]}): it runs again on the latest snapshot",
                gone=compacted,
            )

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        self._latest = latest
        self.checked.reads.check(self.store, latest)
        if not added:  # deletes only
            schema = self.schema if latest is None else self.store.schema_for(latest)
            self.buckets = set()
            self.kept_live = Marks({})
            return self._changes(ents.empty_entries_for(schema), {}, schema)
        return super().plan(latest, schema, added)

    def _changes(self, live: pa.Table, marks: dict[BucketKey, Marks], schema: TableSchema) -> VectorChanges:
        own: dict[str, np.ndarray] = {}
        extra = set(bucket_keys_of(self.checked.homes, schema))
        if extra:  # the rows the merge changes, checked first: one changed meanwhile is the conflict to report
            self.buckets = set(self.buckets) | extra
            live = live_in(self.store, self._latest, schema, self.buckets)
            own = self.checked.check(live)
        self._rerun_after_compaction(marks)
        self.checked.check_replaced(marks)  # the rows the written keys replace, before the merge's own marks
        self.checked.check_kept(self.kept_live.by_file)
        for bk, mark in _by_bucket(own, self.checked.homes, schema).items():
            into = marks.setdefault(bk, Marks({}))
            for path, parts in mark.by_file.items():
                for p in parts:
                    into.add(path, p)
        return super()._changes(live, marks, schema)


def _by_bucket(marks: dict[str, np.ndarray], homes: pa.Table, schema: TableSchema) -> dict[BucketKey, Marks]:
    where = dict(zip(ents.paths(homes), bucket_keys_of(homes, schema), strict=True))
    out: dict[BucketKey, Marks] = {}
    for path, positions in marks.items():
        out.setdefault(where[path], Marks({})).add(path, positions)
    return out


def commit_marks(
    target: RewriteTarget,
    schema: TableSchema,
    homes: pa.Table,
    marks: dict[str, np.ndarray],
    seen: dict[str, np.ndarray],
    written: pa.Table,
    reads: MergeReads,
    known: frozenset[str] = frozenset(),
    *,
    parameters: Mapping[str, str] | None = None,
    metrics: Mapping[str, int] | None = None,
) -> Snapshot | None:
    """Mark ``marks`` (data-file path -> positions; ``homes``: those files' ADD entries; ``seen``: the positions
    their vectors deleted when read) and add ``written``, in one snapshot; None when there is nothing to do.
    ``known``: the data files live when the merge read (on a key table, a written key's live row in one of them
    must be a row the merge changes). The snapshot records ``parameters`` and ``metrics``."""
    if not marks and written.num_rows == 0:
        return None
    checked = _Checked(target.io, marks, seen, homes, reads, known)
    planner: Any = (
        MergeUpsertPlanner(target.io, target.store, schema, checked)
        if schema.has_primary_key
        else MarkRowsPlanner(target.io, target.store, schema, checked)
    )
    messages = [_write(target, [written])] if written.num_rows else []
    added = [meta for m in messages for meta in m.manifests]
    run = keyed_producer(
        target, added, planner, kind=CommitKind.OVERWRITE if marks else CommitKind.APPEND,
        properties=operations.properties(MERGE, **dict(parameters or {})) | operations.metrics(metrics or {}),
    )
    try:
        result = run.commit()
    except BaseException:
        if not run.in_doubt:
            target.discard(messages)
        raise
    if result.outcome is not CommitOutcome.COMMITTED:
        target.discard(messages)
        return None
    return result.snapshot
