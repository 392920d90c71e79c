"""Manifest merging: the policy (a few knobs) and the three merges the committer uses (small manifests are
grouped by the in-order bin packer of :mod:`lakefmt.binpack`).

* delta merge: a commit's many small per-task manifests become target-size manifests;
* minor merge: once ``min_count`` small manifests pile up in the base list, they are merged (ADD/DELETE
  pairs that meet in the merged group cancel out);
* full merge: once DELETE entries in the base reach ``full_threshold``, every manifest is rewritten with only
  the live files.

Together they keep the number of manifests a snapshot references at most
``ceil(entries_bytes / target_size) + min_count`` and the DELETE entries below ``full_threshold``, so commit
cost does not grow with the number of snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakefmt.binpack import pack
from lakefmt.io import FileIO
from lakefmt.meta.entries import cancel_pairs, concat_entries
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import ManifestFileMeta, TableSchema, layout
from lakefmt.spec.manifest import encode_manifest, manifest_meta

__all__ = ["ManifestMerger", "MergePolicy", "pack", "pick_tier"]

@dataclass(frozen=True)
class MergePolicy:
    """When and how manifests are merged (Paimon's knobs of the same names)."""

    target_size: int = 8 << 20  #: ``manifest.target-file-size``
    min_count: int = 30  #: ``manifest.merge-min-count``
    full_threshold: int = 1000  #: ``manifest.full-compaction-threshold`` (DELETE entries)
    fsync: bool = True  #: ``write.fsync``: merged manifests are made durable before the commit can use them

    @classmethod
    def from_options(cls, options: TableOptions) -> MergePolicy:
        return cls(
            options.manifest_target_size,
            options.manifest_merge_min_count,
            options.manifest_full_merge_threshold,
            options.fsync,
        )


def pick_tier(small: Sequence[ManifestFileMeta], min_count: int) -> list[ManifestFileMeta]:
    """The small manifests a count-triggered minor merge rewrites: the smallest ones (by entries), smallest
    first, until the next holds more entries than all those picked together (and at least half of
    ``min_count`` are picked).

    Rewriting every small manifest at each merge would copy the oldest entries again every ``min_count``
    commits: bytes written would grow with the square of history until manifests reach the target size.
    Merging manifests of similar size (size-tiered, like an LSM tree) rewrites each entry about
    log(history) times instead, and still at least halves the number of small manifests."""
    need = max(2, (min_count + 1) // 2)
    picked: list[ManifestFileMeta] = []
    total = 0
    for m in sorted(small, key=_entries):  # entries, not bytes: a small file's bytes are mostly its schema
        if len(picked) >= need and _entries(m) > total:
            break
        picked.append(m)
        total += _entries(m)
    return picked


def _entries(m: ManifestFileMeta) -> int:
    return m.num_added_files + m.num_deleted_files


class ManifestMerger:
    """Reads manifests through a MetaStore and writes merged ones under names owned by one commit attempt."""

    def __init__(self, store: MetaStore, io: FileIO, schema: TableSchema, policy: MergePolicy, writer_id: str) -> None:
        self._store = store
        self._io = io
        self._schema = schema
        self._policy = policy
        self._writer_id = writer_id
        self._counter = 0
        self.written: list[str] = []  #: manifest names this merger wrote (garbage if the commit fails)

    def next_name(self, list_file: bool = False) -> str:
        self._counter += 1
        make = layout.manifest_list_name if list_file else layout.manifest_name
        return make(self._writer_id, self._counter)

    def write_entries(self, entries: pa.Table, bytes_per_entry: float) -> list[ManifestFileMeta]:
        """Write ``entries`` as manifests of about the target size each."""
        if entries.num_rows == 0:
            return []
        # evenly sized files of about the target size: no small leftover manifest after every merge
        estimated = entries.num_rows * max(bytes_per_entry, 1.0)
        files = max(1, round(estimated / self._policy.target_size))
        per_file = -(-entries.num_rows // files)
        # One record batch per manifest: concatenated inputs arrive as one chunk per source manifest, and
        # writing those chunks as-is would carry every batch's framing (and its count) into each merge.
        entries = entries.combine_chunks()
        out = []
        for start in range(0, entries.num_rows, per_file):
            chunk = entries.slice(start, per_file)
            data = encode_manifest(chunk, self._schema.format_version)
            name = self.next_name()
            self._io.write(layout.manifest_path(name), data, sync=self._policy.fsync)
            self._store.remember_manifest(name, data)
            self.written.append(name)
            out.append(manifest_meta(name, len(data), chunk, self._schema.id))
        return out

    def _rewrite(self, metas: Sequence[ManifestFileMeta], cancel: bool) -> list[ManifestFileMeta]:
        entries = concat_entries([self._store.manifest(m.file_name) for m in metas])
        total_bytes = sum(m.file_size for m in metas)
        per_entry = total_bytes / max(entries.num_rows, 1)
        if cancel:
            entries = cancel_pairs(entries)
        return self.write_entries(entries, per_entry)

    def merge_delta(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """Per-task manifests -> delta manifests: small ones are merged into target-size ones."""
        small = [m for m in metas if m.file_size < self._policy.target_size]
        if len(small) < 2:
            return list(metas)
        big = [m for m in metas if m.file_size >= self._policy.target_size]
        return big + self._merge_small(small, cancel=False)

    def merge_base(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """The previous snapshot's base + delta -> this snapshot's base, with minor or full merge."""
        deletes = sum(m.num_deleted_files for m in metas)
        if deletes >= self._policy.full_threshold:
            return self._rewrite(metas, cancel=True)
        small = [m for m in metas if m.file_size < self._policy.target_size]
        small_bytes = sum(m.file_size for m in small)
        if len(small) < self._policy.min_count and small_bytes < self._policy.target_size:
            return list(metas)
        big = [m for m in metas if m.file_size >= self._policy.target_size]
        chosen = small if small_bytes >= self._policy.target_size else pick_tier(small, self._policy.min_count)
        picked = {id(m) for m in chosen}
        kept = [m for m in small if id(m) not in picked]
        return big + kept + self._merge_small(chosen, cancel=True)

    def _merge_small(self, small: Sequence[ManifestFileMeta], cancel: bool) -> list[ManifestFileMeta]:
        out: list[ManifestFileMeta] = []
        for group in pack(small, lambda m: m.file_size, self._policy.target_size):
            out.extend(group if len(group) == 1 else self._rewrite(group, cancel))
        return out
