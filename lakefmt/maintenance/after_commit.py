"""The work after a commit has landed: automatic compaction of the partitions it touched (table option
``compaction.auto``, on by default; in the committing thread, or in the table's worker thread with
``compaction.async``), then snapshot expiration by the table's retention options (``snapshot.num-retained.*``,
``snapshot.time-retained``; their defaults when absent). A ``write-only`` table or committer does neither."""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import time
from collections.abc import Callable

import pyarrow as pa

from lakefmt.errors import LakefmtError
from lakefmt.maintenance import background as background_compaction
from lakefmt.maintenance.compact import auto_compact, auto_compact_after
from lakefmt.maintenance.retention import expiration_due, note_automatic_run, resolve_retention
from lakefmt.meta import entries as ents
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target
from lakefmt.spec import CommitKind, Snapshot

__all__ = ["after_commit"]

log = logging.getLogger("lakefmt.table")


def after_commit(
    table: Targetable,
    snap: Snapshot,
    *,
    compact: bool = True,
    background: bool | None = None,
    expire: Callable[..., object],
) -> None:
    """After ``snap`` landed: compact the partitions it touched unless ``compaction.auto`` is false (here, or in
    the table's worker thread when ``background``, by default the option ``compaction.async``), then ``expire``
    snapshots (the table's ``expire_snapshots``, called with no argument: by the table's options) when the cheap
    check :func:`~lakefmt.maintenance.retention.expiration_due` says a snapshot is due. Neither when ``compact``
    is false (a ``write-only`` committer) or the table is ``write-only``. Best effort: the commit has landed; an
    error is logged, a failed compaction is retried after the next commit, a failed expiration by the next commit
    or by ``lakefmt expire``; an interrupt propagates."""
    target = as_target(table)
    schema = target.schema()
    options = schema.table_options
    if not compact or options.write_only:
        return
    # every table compacts as it is written unless told not to (Paimon's default): a stream's partitions keep a
    # few small files, a key table's reads one sorted run and a few newer files per bucket
    auto = options.compaction_auto
    if auto and snap.commit_kind is not CommitKind.COMPACT:
        in_background = options.compaction_async if background is None else background
        if in_background and schema.has_primary_key and _bucket_backlog(target, snap) >= options.stop_trigger:
            in_background = False  # num-sorted-run.stop-trigger: the writer waits for its buckets' compaction
        if in_background:
            background_compaction.submit(
                target.store, snap, functools.partial(auto_compact_after, table), options.compaction_max_file_num
            )
        else:
            try:
                auto_compact(table, snap)
            except Exception as exc:  # the data commit has landed; compaction is optional
                log.warning("automatic compaction after snapshot %d failed: %s: %s", snap.id, type(exc).__name__, exc)
    try:
        now_ms = int((target.clock or time.time)() * 1000)  # (a later commit than snap only adds to the count)
        retention = resolve_retention(schema.options)
        due = expiration_due(target.store, retention, snap, now_ms)
    except Exception:  # e.g. options that predate the min <= max check: no automatic expiration
        due = False
    if due:
        with contextlib.suppress(Exception):  # botocore's connection errors are not OSErrors
            note_automatic_run(target.store, expire(), retention, now_ms)


def _bucket_backlog(target: RewriteTarget, snap: Snapshot) -> int:
    """The most data files any partition and bucket that ``snap`` added files to holds in it (0 when unsure)."""
    store = target.store
    try:
        parts = [store.manifest(m.file_name) for m in store.manifest_list(snap.delta_manifest_list)]
        if not parts:
            return 0
        added = ents.data_files(ents.adds(ents.concat_entries(parts)))
        live = ents.data_files(ents.live_entries(store, snap))
    except (LakefmtError, OSError):
        return 0

    def keys(entries: pa.Table) -> list[str]:
        part = entries.column(ents.PARTITION).to_pylist() if ents.PARTITION in entries.column_names else None
        buckets = entries.column(ents.BUCKET).to_pylist() if ents.BUCKET in entries.column_names else None
        return [repr((part[i] if part else None, buckets[i] if buckets else 0)) for i in range(entries.num_rows)]

    touched = set(keys(added))
    counts = collections.Counter(k for k in keys(live) if k in touched)
    return max(counts.values(), default=0)
