"""Compaction: rewrite a partition's small data files into files of about ``target-file-size``, as one COMPACT
snapshot that changes no row (DELETE + ADD, every replaced file checked live; the commit-user map carried
forward exactly, so dedup is unchanged; readers of history and incremental reads skip it).

Three steps, so that an engine can run the middle one in its tasks:

1. :func:`~lakefmt.rewrite.compact.plan.plan_compaction` (driver, metadata only): groups of small files.
2. :func:`rewrite_group` (any process): reads a group's rows (:func:`lakefmt.rewrite.base.read_checked`, sorted by
   ``sort_by`` if given) and writes them with the table's writer; returns its :class:`CommitMessage` (writer id =
   the group's id).
3. :func:`commit_compaction` (driver): one COMPACT snapshot for every group rewritten. If a concurrent commit
   removed some input files (an overwrite, a delete, another compaction), the groups that lost them are
   dropped (their new files deleted), their partitions re-planned once against the new latest snapshot and
   rewritten, or given up with the reason in the report. A conflict never reaches the caller, and a writer
   racing a compaction never fails (appends are not among the replaced files; an overwrite re-plans).

With ``sort_by``, a partition's small files form one group (its rows sorted together, so min/max pruning gets
sharp across the new files; the group is held in memory while it is sorted), rolled into target-size files.

On a format-version-3 table, a group's files are read with their deletion vectors applied (deleted rows are
dropped), and the snapshot also replaces the deletion-vector file of each bucket it rewrote files of
(:mod:`lakefmt.rewrite.compact.vectors`): a concurrent upsert or delete that changed one makes the bucket's
groups lose, as a removed input file does.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import CompactProducer
from lakefmt.errors import InvalidOptionError, RewriteConflictError, SchemaConflictError
from lakefmt.meta import entries as ents
from lakefmt.progress import Progress
from lakefmt.rewrite.base import (
    RewriteTarget,
    Targetable,
    as_target,
    chunks,
    load_group_vectors,
    newest_creation,
    publish,
    read_checked,
)
from lakefmt.rewrite.compact.plan import check_sort_by, plan_compaction, whole
from lakefmt.rewrite.compact.types import (
    CompactionGroup,
    CompactionPlan,
    CompactionReport,
    GivenUp,
    Partition,
    describe,
    partition_key,
)
from lakefmt.rewrite.compact.vectors import VectorCompactProducer, replace_vectors
from lakefmt.spec import CommitMessage, Snapshot, TableSchema

__all__ = ["Rewriter", "commit_compaction", "compact", "rewrite_group", "run_plan"]


# -- rewriting -------------------------------------------------------------------------------------------------
def rewrite_group(
    table: Targetable,
    group: CompactionGroup,
    sort_by: Sequence[str] | None = None,
    *,
    target_file_size: int | None = None,
) -> CommitMessage:
    """Read a group's rows and write them as new files (nothing is committed): the task-side step, runnable in
    any process that can open the table. Returns the writer's message, whose ``writer_id`` is the group's id.
    On an error, the files written so far are deleted. :class:`RewriteConflictError` (``gone``: the files) if
    input files were removed by a concurrent commit and deleted by an expiration before they were read: the
    driver drops the group, as when it loses at commit (:func:`commit_compaction`'s ``gone``)."""
    table = as_target(table)
    schema = table.schema()
    columns = check_sort_by(schema, sort_by)
    if not columns and schema.has_primary_key:  # a key table's bucket becomes one sorted run: disjoint key ranges
        columns = tuple(schema.primary_keys)
    batches = _rows(table, group, schema)
    newest = newest_creation(group.entries)
    if not columns:  # one output: the group is at most the target in input bytes
        with table.new_writer(
            writer_id=group.group_id, target_file_size=target_file_size, creation_time_ms=newest
        ) as writer:
            for chunk in chunks(batches, schema.table_options.row_group_rows):
                writer.write(chunk)
            return writer.prepare_commit()
    # sorted: the whole group in order, cut into about input bytes / target slices of consecutive rows, one file
    # each (a writer rolls files only between row groups, which would make one file of a sorted table)
    rows = pa.Table.from_batches(list(batches), schema=schema.arrow_schema)
    rows = rows.sort_by([(c, "ascending") for c in columns])
    target = schema.table_options.target_file_size if target_file_size is None else target_file_size
    outputs = max(1, -(-group.num_bytes // target))
    step = max(1, -(-rows.num_rows // outputs))
    manifests: list[Any] = []
    written: list[CommitMessage] = []
    try:
        for start in range(0, max(rows.num_rows, 1), step):
            with table.new_writer(
                writer_id=group.group_id, target_file_size=target_file_size, creation_time_ms=newest
            ) as writer:
                writer.write(rows.slice(start, step))
                written.append(writer.prepare_commit())
            manifests.extend(written[-1].manifests)
    except BaseException:
        table.discard(written)  # nothing was committed
        raise
    return CommitMessage(group.group_id, tuple(manifests))


def _rows(table: RewriteTarget, group: CompactionGroup, schema: TableSchema) -> Iterator[pa.RecordBatch]:
    """The live rows of a group's files (their deletion vectors applied), each file's counted against its entry: a
    COMPACT snapshot must not change what the metadata says the table holds (the writer taking them deletes what
    it wrote on that error)."""
    vectors = load_group_vectors(table, group.vectors, group.entries, "compaction")
    return (batch for _, batch in read_checked(table, group.entries, schema, what="compaction", vectors=vectors))


# -- committing ------------------------------------------------------------------------------------------------
Rewriter = Callable[[Sequence[CompactionGroup]], Sequence[CommitMessage]]


def commit_compaction(
    table: Targetable,
    plan: CompactionPlan,
    messages: Sequence[CommitMessage],
    *,
    replan: bool = True,
    rewrite: Rewriter | None = None,
    after_commit: bool = True,
    gone: Collection[str] = (),
) -> CompactionReport:
    """Commit the rewritten groups of ``plan`` (``messages``: one per group, matched by writer id; a group
    without a message is left out) as one COMPACT snapshot.

    ``gone``: input files that rewriting found removed by a concurrent commit and deleted (the
    :class:`RewriteConflictError` of :func:`rewrite_group`); the groups holding them have no message and are
    re-planned (or given up) as groups that lose at commit are.

    If a concurrent commit removed input files of some groups, those groups are dropped and their written files
    deleted; with ``replan`` (default) their partitions are planned again on the latest snapshot, rewritten by
    ``rewrite`` (default: here, one group after another; an engine passes its own) and committed; a partition
    that loses again is given up (:attr:`CompactionReport.given_up`). A column dropped while the groups were
    rewritten (their files hold it) re-plans every group once under the new schema in the same way. A conflict
    never raises. Other failures do
    (:class:`CommitStateUnknownError`: nothing is deleted then). ``after_commit``: once the snapshot landed, run
    the table's after-commit work (snapshot expiration, when the table's options ask for it)."""
    owner = {g.group_id: g.group_id for g in plan.groups}
    return _commit(as_target(table), plan, messages, owner, replan, rewrite, after_commit, set(gone))


def _commit(
    table: RewriteTarget,
    plan: CompactionPlan,
    messages: Sequence[CommitMessage],
    owner: dict[str, str],
    replan: bool,
    rewrite: Rewriter | None,
    after_commit: bool,
    unread: set[str] | None = None,
) -> CompactionReport:
    """:func:`commit_compaction`, where the files of a group are in the message of writer ``owner[group id]`` (one
    writer may have written several groups: then they land or are dropped together). ``unread``: input files
    found gone when rewriting (more are added as re-plans find them)."""
    started = time.monotonic()
    report = CompactionReport(dry_run=False, files_before=plan.files_before, bytes_before=plan.bytes_before)
    by_id = {m.writer_id: m for m in messages}
    unread = set() if unread is None else unread
    ready = [g for g in plan.groups if owner.get(g.group_id) in by_id]
    for g in plan.groups:
        if owner.get(g.group_id) not in by_id and not unread.intersection(g.inputs):
            report.given_up.append(GivenUp(g.partition, "its files were not rewritten (no commit message)"))
    replanned: set[tuple[tuple[str, Any], ...]] = set()
    schema_replanned = False
    rewriter = rewrite if rewrite is not None else _local_rewriter(table, plan, unread)

    def plan_again(parts: list[Partition]) -> None:
        """Re-plan and rewrite ``parts``; the groups that got no message are given up."""
        fresh, dropped = _replan(table, plan, parts, rewriter, by_id, ready)
        owner.update((g.group_id, g.group_id) for g in fresh)
        ready.extend(fresh)
        for g in dropped:
            lost_files = sorted(unread.intersection(g.inputs))
            why = (
                f"a concurrent commit removed {len(lost_files)} of its input files ({lost_files[0]})"
                if lost_files
                else "its files were not rewritten (no commit message)"
            )
            report.given_up.append(GivenUp(g.partition, why))

    def lose(lost: list[CompactionGroup], gone: set[str]) -> None:
        """Groups that lost input files to a concurrent commit: their partitions re-planned once, or given up."""
        parts = {partition_key(g.partition): g.partition for g in lost}
        again = {k: p for k, p in parts.items() if replan and k not in replanned}
        for k, p in parts.items():
            if k not in again:
                report.given_up.append(
                    GivenUp(p, f"a concurrent commit removed {len(gone)} of its input files ({sorted(gone)[0]})")
                )
        if again:
            replanned.update(again)
            report.replanned.extend(again.values())
            plan_again(list(again.values()))

    not_read = [g for g in plan.groups if owner.get(g.group_id) not in by_id and unread.intersection(g.inputs)]
    if not_read:
        lose(not_read, unread.intersection(p for g in not_read for p in g.inputs))
    while ready:
        writers = list(dict.fromkeys(owner[g.group_id] for g in ready))
        written = {w: _written(table, by_id[w]) for w in writers}  # (the commit drops the per-task manifests)
        planned_on = plan.snapshot_id if not replanned else None  # a re-plan read another snapshot
        try:
            snap = _commit_groups(table, ready, [by_id[w] for w in writers], after_commit, planned_on)
        except SchemaConflictError as exc:
            # a column of the rewritten files was dropped meanwhile: the written files are gone (the commit
            # discarded them); write every group again under the new schema, once
            parts = {partition_key(g.partition): g.partition for g in ready}
            ready = []
            for w in writers:
                by_id.pop(w, None)
            if not replan or schema_replanned:
                why = f"the table's schema changed meanwhile ({exc})"
                report.given_up.extend(GivenUp(p, why) for p in parts.values())
                continue
            schema_replanned = True
            report.replanned.extend(p for k, p in parts.items() if k not in replanned)
            replanned.update(parts)
            table.store.latest_schema(refresh=True)
            plan_again(list(parts.values()))
            continue
        except RewriteConflictError as exc:
            gone = set(exc.gone)
            lost_writers = {owner[g.group_id] for g in ready if gone.intersection(g.inputs)}
            if not lost_writers:  # cannot happen (gone names files of ready groups); never loop on it
                raise
            lost = [g for g in ready if owner[g.group_id] in lost_writers]
            ready = [g for g in ready if owner[g.group_id] not in lost_writers]
            table.discard([by_id.pop(w) for w in lost_writers])  # known not to have landed
            lose(lost, gone)
            continue
        _fill(report, ready, written, snap)
        break
    report.seconds = time.monotonic() - started
    return report


def _local_rewriter(table: RewriteTarget, plan: CompactionPlan, unread: set[str]) -> Rewriter:
    """Rewrites here, one group after another; a group whose input files are gone gets no message (its files go
    into ``unread``)."""

    def run(groups: Sequence[CompactionGroup]) -> list[CommitMessage]:
        out = []
        for g in groups:
            try:
                out.append(rewrite_group(table, g, plan.sort_by, target_file_size=plan.target_file_size))
            except RewriteConflictError as exc:
                unread.update(exc.gone)
        return out

    return run


def _replan(
    table: RewriteTarget,
    plan: CompactionPlan,
    partitions: list[Partition],
    rewriter: Rewriter,
    by_id: dict[str, CommitMessage],
    ready: list[CompactionGroup],
) -> tuple[list[CompactionGroup], list[CompactionGroup]]:
    """Plan ``partitions`` again on the latest snapshot, leaving out files that groups still ``ready`` hold, and
    rewrite the groups: those rewritten (their messages in ``by_id``), and those the rewriter left out."""
    fresh = plan_compaction(
        table,
        partitions,
        target_file_size=plan.target_file_size,
        min_files=plan.min_files,
        sort_by=plan.sort_by or None,
        tiered=plan.tiered,
        strict=False,
    )
    held = {p for g in ready for p in g.inputs}
    groups = [g for g in fresh.groups if not held.intersection(g.inputs)]
    if not groups:
        return [], []
    for m in rewriter(groups):
        by_id[m.writer_id] = m
    return [g for g in groups if g.group_id in by_id], [g for g in groups if g.group_id not in by_id]


def _written(table: RewriteTarget, message: CommitMessage) -> tuple[int, int]:
    """Files and bytes a message adds (read from its manifests, which the commit then reads from the cache)."""
    files = size = 0
    for meta in message.manifests:
        files += meta.num_added_files
        with contextlib.suppress(Exception):  # for the report only
            size += int(pc.sum(table.store.manifest(meta.file_name).column(ents.FILE_SIZE)).as_py() or 0)
    return files, size


def _commit_groups(
    table: RewriteTarget,
    groups: Sequence[CompactionGroup],
    messages: Sequence[CommitMessage],
    after_commit: bool,
    planned_on: int | None,
) -> Snapshot:
    """One COMPACT snapshot for ``groups`` (:func:`~lakefmt.rewrite.base.publish`); on a conflict the caller drops
    the groups that lost and deletes only their files. On a format-version-3 table it also replaces the
    deletion-vector files of the groups' buckets (:mod:`lakefmt.rewrite.compact.vectors`), written anew for each
    attempt (a conflict deletes them: the next attempt commits fewer groups)."""
    rewritten = ents.concat_entries([g.entries for g in groups])
    producer: type[CompactProducer] = CompactProducer
    extra: dict[str, Any] = {}
    vectors: CommitMessage | None = None
    if table.schema().deletion_vectors:
        old, vectors, extra["buckets"] = replace_vectors(table, groups)
        producer = VectorCompactProducer
        if old.num_rows:
            rewritten = ents.concat_entries([rewritten, old])
    try:
        return publish(
            table,
            producer,
            [*messages, *([vectors] if vectors is not None else [])],
            rewritten,
            operation="compact",
            after_commit=functools.partial(table.after_commit, compact=False) if after_commit else None,
            planned_on=planned_on,
            discard_on_conflict=False,
            extra=extra,
        )
    except RewriteConflictError:
        if vectors is not None:
            table.discard([vectors])  # a conflict is decided before the publish: never landed
        raise


def _fill(
    report: CompactionReport,
    groups: Sequence[CompactionGroup],
    written: Mapping[str, tuple[int, int]],
    snap: Snapshot,
) -> None:
    report.snapshot = snap
    report.rewritten_files = sum(g.num_files for g in groups)
    report.rewritten_bytes = sum(g.num_bytes for g in groups)
    report.rows = sum(g.num_rows for g in groups)
    report.purged_rows = sum(g.deleted_rows for g in groups)
    seen: dict[tuple[tuple[str, Any], ...], Partition] = {}
    for g in groups:
        seen.setdefault(partition_key(g.partition), g.partition)
    report.partitions = list(seen.values())
    for files, size in written.values():  # per writer
        report.written_files += files
        report.written_bytes += size


# -- all three -------------------------------------------------------------------------------------------------
def compact(
    table: Targetable,
    partition: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    *,
    target_file_size: int | None = None,
    min_files: int | None = None,
    sort_by: Sequence[str] | str | None = None,
    dry_run: bool = False,
    parallelism: int | None = None,
    progress: Progress | None = None,
    tiered: bool = False,
) -> CompactionReport:
    """Plan, rewrite (``parallelism`` groups at a time in threads; pyarrow releases the GIL) and commit a
    compaction; see :meth:`lakefmt.Table.compact`."""
    table = as_target(table)
    started = time.monotonic()
    if parallelism is not None:  # refused whether or not there is work (checked before planning)
        threads = whole(parallelism)
        if threads is None or threads < 1:
            raise InvalidOptionError(f"parallelism must be a positive whole number, got {parallelism!r}")
        parallelism = threads
    plan = plan_compaction(
        table, partition, target_file_size=target_file_size, min_files=min_files, sort_by=sort_by, tiered=tiered
    )
    if dry_run or not plan.groups:
        report = CompactionReport(
            dry_run=dry_run,
            files_before=plan.files_before,
            bytes_before=plan.bytes_before,
            rewritten_files=plan.num_files,
            rewritten_bytes=plan.num_bytes,
            rows=sum(g.num_rows for g in plan.groups),
            purged_rows=sum(g.deleted_rows for g in plan.groups),
            partitions=plan.partitions,
        )
        report.seconds = time.monotonic() - started
        return report
    report = run_plan(table, plan, parallelism, progress)
    report.seconds = time.monotonic() - started
    return report


def run_plan(
    table: RewriteTarget,
    plan: CompactionPlan,
    parallelism: int | None,
    progress: Progress | None,
    after_commit: bool = True,
) -> CompactionReport:
    """Rewrite every group of ``plan`` here (in threads with ``parallelism``), then commit."""
    total = len(plan.groups)
    done = 0
    if progress:
        progress(0, total, "rewriting")

    unread: set[str] = set()  # input files removed and deleted before they were read: their groups lost a race

    def one(group: CompactionGroup) -> CommitMessage | None:
        if unread.intersection(group.inputs):
            return None
        try:
            return rewrite_group(table, group, plan.sort_by, target_file_size=plan.target_file_size)
        except RewriteConflictError as exc:
            unread.update(exc.gone)
            return None

    messages: list[CommitMessage] = []
    owner = {g.group_id: g.group_id for g in plan.groups}
    try:
        if (parallelism is None or parallelism <= 1) and not plan.sort_by and total > 1:
            # one writer for every group: one per-task manifest to write and merge instead of one per group
            unit = uuid.uuid4().hex
            try:
                messages.append(_rewrite_together(table, plan.groups, unit, plan.target_file_size, progress))
                owner = dict.fromkeys(owner, unit)
            except RewriteConflictError as exc:  # (its writer deleted what it wrote) each other group on its own
                unread.update(exc.gone)
                messages.extend(m for m in map(one, plan.groups) if m is not None)
        elif parallelism is None or parallelism <= 1 or total == 1:
            for g in plan.groups:
                if (m := one(g)) is not None:
                    messages.append(m)
                done += 1
                if progress:
                    progress(done, total, describe(g.partition))
        else:
            with ThreadPoolExecutor(max_workers=min(parallelism, total), thread_name_prefix="lakefmt-compact") as pool:
                for g, m in zip(plan.groups, pool.map(one, plan.groups), strict=True):
                    if m is not None:
                        messages.append(m)
                    done += 1
                    if progress:
                        progress(done, total, describe(g.partition))
    except BaseException:
        table.discard(messages)  # nothing was committed: the groups already written are garbage
        raise
    return _commit(table, plan, messages, owner, True, None, after_commit, unread)


def _rewrite_together(
    table: RewriteTarget, groups: Sequence[CompactionGroup], writer_id: str, target: int, progress: Progress | None
) -> CommitMessage:
    """Several groups through one writer: it keeps a file per partition open and rolls it at ``target``, so each
    group's rows still land in files of their own partition, about the target in size."""
    schema = table.schema()
    newest = max((t for t in (newest_creation(g.entries) for g in groups) if t is not None), default=None)
    with table.new_writer(writer_id=writer_id, target_file_size=target, creation_time_ms=newest) as writer:
        for done, group in enumerate(groups, 1):
            rows = _rows(table, group, schema)
            for chunk in chunks(rows, schema.table_options.row_group_rows):
                writer.write(chunk)
            if progress:
                progress(done, len(groups), describe(group.partition))
        return writer.prepare_commit()
