"""Compaction of format-version-3 tables: the deletion vectors of the buckets it rewrites files of.

A compaction reads its input files with their vectors applied (deleted rows are dropped, never rewritten) and,
in the same COMPACT snapshot, replaces the deletion-vector file of each partition and bucket it rewrote files of:
the old file is DELETEd, and a new one holding only the vectors of that bucket's files it did **not** rewrite is
ADDed (none, if it rewrote every file with a vector). So a deleted row stays deleted, and no vector names a
removed file.

The old deletion-vector file is among the files the commit checks live (:class:`VectorCompactProducer`), and a
bucket that had none must still have none: a concurrent upsert or delete that marked rows in the bucket (it
replaced, or added, the bucket's deletion-vector file) makes the compaction lose that bucket (it re-plans on the
new snapshot, or gives it up). The writer never fails, no deleted row comes back, and no upsert is lost.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakefmt.commit.kinds import CompactProducer
from lakefmt.errors import RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.read.masks import deleted_positions
from lakefmt.rewrite.base import RewriteTarget, load_group_vectors
from lakefmt.rewrite.compact.types import CompactionGroup, partition_key
from lakefmt.rewrite.keys.buckets import write_vector_file
from lakefmt.spec import CommitMessage, DataFile, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest import encode_manifest, manifest_meta

__all__ = ["BucketKey", "VectorCompactProducer", "bucket_of_entries", "replace_vectors"]

#: a partition (as :func:`~lakefmt.rewrite.compact.types.partition_key` spells it) and a bucket
BucketKey = tuple[tuple[tuple[str, Any], ...], int]


def bucket_of_entries(entries: pa.Table) -> list[BucketKey]:
    """The partition and bucket of each of ``entries``."""
    n = entries.num_rows
    buckets = entries.column(ents.BUCKET).to_pylist() if ents.BUCKET in entries.column_names else [0] * n
    if ents.PARTITION in entries.column_names:
        parts = [partition_key(p) for p in entries.column(ents.PARTITION).to_pylist()]
    else:
        parts = [()] * n
    return [(p, b or 0) for p, b in zip(parts, buckets, strict=True)]


def replace_vectors(
    table: RewriteTarget, groups: Sequence[CompactionGroup]
) -> tuple[pa.Table, CommitMessage | None, dict[BucketKey, frozenset[str]]]:
    """For the partitions and buckets of ``groups`` (all committed together): the entries of their old
    deletion-vector files (to DELETE), a commit message adding their new ones (each holding the vectors of the
    bucket's data files that no group rewrites; None when there is none to write), and the deletion-vector paths
    each bucket must still hold live when the commit lands (those the groups were planned with)."""
    schema = table.schema()
    old: dict[BucketKey, dict[str, pa.Table]] = {}
    rewritten: dict[BucketKey, set[str]] = {}
    partitions: dict[BucketKey, Mapping[str, Any]] = {}
    for g in groups:
        key = (partition_key(g.partition), g.bucket)
        partitions.setdefault(key, g.partition)
        rewritten.setdefault(key, set()).update(g.paths)
        here = old.setdefault(key, {})
        if g.vectors is not None:
            for i, path in enumerate(ents.paths(g.vectors)):
                here.setdefault(path, g.vectors.slice(i, 1))
    keep: dict[BucketKey, list[tuple[str, pa.Array]]] = {}
    live = _live_data(table, {key for key, files in old.items() if files}, schema)
    homes = bucket_of_entries(live)
    for key, files in old.items():
        if not files:
            continue
        data = live.filter(pa.array([h == key for h in homes], pa.bool_()))
        vectors = load_group_vectors(table, ents.concat_entries(list(files.values())), data, "compaction", whole=True)
        kept = sorted((p, v) for p, v in vectors.items() if p not in rewritten[key])
        if kept:
            keep[key] = [(p, pa.array(deleted_positions(table.io, v), pa.int64())) for p, v in kept]
    expected = {key: frozenset(files) for key, files in old.items()}
    removed = [t for files in old.values() for t in files.values()]
    old_entries = ents.concat_entries(removed) if removed else ents.empty_entries_for(schema)
    message = _write(table, schema, keep, partitions) if keep else None
    return old_entries, message, expected


def _live_data(table: RewriteTarget, keys: set[BucketKey], schema: TableSchema) -> pa.Table:
    """The entries of the live data files of the partitions and buckets ``keys`` in the latest snapshot: the
    files whose vectors a compaction may keep, each vector's positions checked against its file's rows there. A
    vector of a file no longer live is left out (the commit checks that the bucket's deletion-vector file is the
    one planned, so a file removed meanwhile was removed with its rows)."""
    latest = table.latest_snapshot()
    if latest is None or not keys:
        return ents.empty_entries_for(schema)
    wanted = {key[0] for key in keys}
    metas = [m for m in table.store.snapshot_manifests(latest) if any(m.may_hold(dict(p)) for p in wanted)]
    if not metas:
        return ents.empty_entries_for(schema)
    live = ents.data_files(ents.live_entries(table.store, latest, metas))
    return live.filter(pa.array([h in keys for h in bucket_of_entries(live)], pa.bool_()))


def _write(
    table: RewriteTarget,
    schema: TableSchema,
    keep: Mapping[BucketKey, list[tuple[str, pa.Array]]],
    partitions: Mapping[BucketKey, Mapping[str, Any]],
) -> CommitMessage:
    """Write one deletion-vector file per bucket of ``keep`` and a manifest of their ADD entries."""
    writer_id = uuid.uuid4().hex
    sync = schema.table_options.fsync
    written: list[str] = []
    try:
        files: list[DataFile] = []
        for k, (key, blobs) in enumerate(sorted(keep.items(), key=lambda kv: repr(kv[0]))):
            vector_file = write_vector_file(table.io, schema, dict(partitions[key]), key[1], blobs, writer_id, k)
            written.append(vector_file.path)
            files.append(vector_file)
        added = ents.added_entries_for(files, schema)
        manifest = layout.manifest_name(writer_id, 0)
        encoded = encode_manifest(added)
        table.io.write(layout.manifest_path(manifest), encoded, sync=sync)
        written.append(layout.manifest_path(manifest))
        table.store.remember_manifest(manifest, encoded)
        meta: ManifestFileMeta = manifest_meta(manifest, len(encoded), added, schema.id)
    except BaseException:
        for path in written:  # nothing references them
            with contextlib.suppress(Exception):
                table.io.delete(path)
        raise
    return CommitMessage(writer_id, (meta,))


class VectorCompactProducer(CompactProducer):
    """A compaction of a format-version-3 table: besides the rewritten files (its data files and the old
    deletion-vector files of their buckets, each checked live), every bucket it touches must hold exactly the
    deletion-vector files it was planned with (``buckets``): one that a concurrent commit added to a bucket that
    had none is a conflict too (:class:`RewriteConflictError` naming the bucket's rewritten files)."""

    def __init__(self, *args: Any, buckets: Mapping[BucketKey, frozenset[str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buckets = dict(buckets)

    def replaced(self, latest: Snapshot | None, schema: TableSchema) -> pa.Table:
        out = super().replaced(latest, schema)
        if latest is not None and latest.id != self.planned_on:
            self._check_vectors(latest)
        return out

    def check_conflict(self, latest: Snapshot | None, schema: TableSchema, replaced: pa.Table) -> pa.Table | None:
        super().check_conflict(latest, schema, replaced)
        self._check_vectors(latest)
        return None

    def _check_vectors(self, latest: Snapshot | None) -> None:
        if latest is None or not self.buckets:
            return
        wanted = {key[0] for key in self.buckets}
        metas = [m for m in self.store.snapshot_manifests(latest) if any(m.may_hold(dict(p)) for p in wanted)]
        live = ents.vector_files(ents.live_entries(self.store, latest, metas)) if metas else None
        now: dict[BucketKey, set[str]] = {}
        if live is not None and live.num_rows:
            for key, path in zip(bucket_of_entries(live), ents.paths(live), strict=True):
                if key in self.buckets:
                    now.setdefault(key, set()).add(path)
        changed = [key for key, paths in self.buckets.items() if now.get(key, set()) != paths]
        if not changed:
            return
        data = ents.data_files(self.rewritten)
        lost = set(changed)
        gone = sorted(
            {p for key, p in zip(bucket_of_entries(data), ents.paths(data), strict=True) if key in lost}
            | {p for key in changed for p in self.buckets[key]}
        )
        raise RewriteConflictError(
            f"a concurrent commit changed the deleted rows of {len(changed)} bucket(s) this compaction rewrites "
            f"files of (their deletion-vector file was replaced or added); nothing was committed",
            gone=gone,
        )
