"""Which of one partition's (or one bucket's) live data files a compaction rewrites together: the decisions of
:func:`lakefmt.rewrite.compact.plan.plan_compaction`, on plain lists (planning runs after every commit with
automatic compaction).

* **Small files** (every table): the files under 3/4 of the target, bin-packed in commit order, once a partition
  holds ``min_files`` of them; in size tiers with ``tiered`` (automatic compaction).
* **Files with many deleted rows** (format version 3): a file whose deletion vector deletes at least
  :data:`DELETE_RATIO` of its rows (Iceberg's ``delete-ratio-threshold``) is rewritten whatever its size, and even
  alone: its rewrite drops the deleted rows, which every read otherwise reads and masks.
* **Key tables** (:func:`plan_bucket`): :meth:`lakefmt.Table.compact` merges every bucket whole that holds more
  than one data file or any deleted row (a full compaction; with ``min_files``, the buckets that hold that many
  files or a file with many deleted rows); automatic compaction, once a bucket holds
  ``num-sorted-run.compaction-trigger`` data files (each upsert adds one), the newest size tier, extended to bring
  the bucket back under the trigger, and the bucket's files with many deleted rows (Paimon's universal compaction, in
  short); the whole bucket once its deleted rows reach ``compaction.bucket.delete-ratio-threshold`` of its
  rows. A bucket's files are merged with their deleted rows dropped, so a key keeps its one live row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DELETE_RATIO", "Files", "next_fit", "plan_bucket", "plan_partition", "tier"]

#: a file whose deletion vector deletes at least this share of its rows is worth rewriting on its own
DELETE_RATIO = 0.3
#: a file is small (worth merging) under this fraction of the target (Iceberg's min-file-size-bytes)
LARGE_ENOUGH = 0.75


@dataclass(frozen=True)
class Files:
    """One partition's (on a version-3 table: one partition and bucket's) live data files as plain lists."""

    rows: list[int]  #: indices into the live entries
    sizes: list[int]
    counts: list[int]  #: row counts
    order: list[tuple[int, str]]  #: (creation time, path): commit order
    deleted: list[int]  #: rows each file's deletion vector deletes (0 without one)

    def heavy(self, i: int) -> bool:
        """Whether file ``i``'s vector deletes at least :data:`DELETE_RATIO` of its rows."""
        return self.deleted[i] > 0 and self.deleted[i] >= DELETE_RATIO * self.counts[i]

    def live(self, i: int) -> int:
        """File ``i``'s live rows."""
        return self.counts[i] - self.deleted[i]


def next_fit(sizes: Sequence[int], target: int) -> list[list[int]]:
    """Indices of consecutive items packed into bins of at most ``target`` (an item alone may exceed it)."""
    bins: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        if current and total + size > target:
            bins.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        bins.append(current)
    return bins


def tier(sizes: Sequence[int], min_files: int) -> int:
    """How many of the newest files (``sizes``: their row counts, oldest first) to merge: walking back from the
    newest, an older file joins while it holds no more rows than the newer ones together; 0 unless the run reaches
    ``min_files``. Rows, not bytes: a merged file's bytes are far fewer than its inputs' (one footer, better
    compression), which would let runs cascade at almost every commit, and partitions written alike would reach
    their thresholds at different commits (one compaction each instead of one for all)."""
    if not sizes:
        return 0
    total, n = sizes[-1], 1
    for size in reversed(sizes[:-1]):
        if size > total:
            break
        total += size
        n += 1
    return n if n >= min_files else 0


def plan_partition(
    files: Files, target: int, min_files: int, max_files: int, sort_by: tuple[str, ...], tiered: bool
) -> list[list[int]]:
    """The input groups of one partition's live files, as indices into the live entries: its small files (once
    there are ``min_files`` of them; the newest size tier with ``tiered``) and its files with many deleted rows."""
    n = len(files.rows)
    small = [i for i, s in enumerate(files.sizes) if s < int(target * LARGE_ENOUGH)]
    heavy = {i for i in range(n) if files.heavy(i)}
    if len(small) < max(min_files, 2):
        small = []
    small.sort(key=lambda i: files.order[i])  # commit order: a run of newest files is a suffix
    if small and tiered and len(small) < max_files:
        k = tier([files.counts[i] for i in small], min_files)
        small = small[len(small) - k :] if k else []
    picked = sorted(set(small) | heavy, key=lambda i: files.order[i])
    if not picked or (len(picked) < 2 and not heavy):
        return []
    if sort_by:
        return [[files.rows[i] for i in picked]]
    bins = next_fit([files.sizes[i] for i in picked], target)
    return [[files.rows[picked[j]] for j in b] for b in bins if len(b) > 1 or picked[b[0]] in heavy]


def plan_bucket(
    files: Files, min_files: int, max_files: int, tiered: bool, deleted_share: float | None = None
) -> list[list[int]]:
    """The input group of one key-table bucket's live files (all in one group: a bucket's files are merged, never
    bin-packed apart), as indices into the live entries. ``min_files``: the trigger
    (``num-sorted-run.compaction-trigger``, or the ``min_files`` asked for).

    Without ``tiered`` (:meth:`lakefmt.Table.compact`): every file of a bucket that holds ``min_files`` files, or
    that holds a file with many deleted rows. ``min_files`` 1 (``Table.compact()``'s default on a key table) is a
    full compaction, as Paimon's: every bucket that is not already one file without deleted rows is merged whole (a
    lone file with deleted rows is rewritten without them). With ``tiered`` (automatic compaction, after every
    commit), once the bucket holds ``min_files`` files: the newest size tier, at least enough of the newest files to
    bring the bucket under the trigger, and the files with many deleted rows (every file at ``max_files``); every
    file once the newer files hold half as many live rows as the oldest run, or once the rows the bucket's vectors
    delete reach ``deleted_share`` of the rows in its files (``compaction.bucket.delete-ratio-threshold``; None:
    never). Without that share, an upsert stream leaves many of the oldest run's rows deleted but on disk, read and
    masked by every read: upserting 1% of the keys at each commit, the files held 1.17 times the live rows on
    average and up to 1.31 times; 1.06 and 1.12 with a share of 0.1. The oldest run is then rewritten more often,
    yet the writer of those upserts was measured no slower (its time varied less with the share than between runs);
    0.05 or 0.08 cut the rows only a little more, for rewrites of the whole bucket that cost more on larger buckets.

    Deleted rows alone never start an automatic compaction of a key table: an upsert stream deletes rows at every
    commit, and masking them costs a read far less than rewriting them would cost every commit. The share is only
    checked when the bucket is at the trigger, which an upsert stream reaches every few commits, so the deleted
    rows overshoot the share by a few commits' worth at most."""
    n = len(files.rows)
    order = sorted(range(n), key=lambda i: files.order[i])
    heavy = {i for i in range(n) if files.heavy(i)}
    full = not tiered and min_files <= 1 and (n > 1 or any(files.deleted))
    enough = n >= max(min_files, 2) or full
    if not enough and (tiered or not heavy):
        return []
    if not tiered or n >= max_files:
        picked = order
    else:
        # the oldest run (the files of the bucket's last full merge, which share its creation time) and the newer
        # files: the newer ones become one run; all merge into one once they hold half as many rows as the oldest
        # (write amplification stays ~ log, reads see at most the trigger's number of runs)
        oldest = files.order[order[0]][0]
        base = [i for i in order if files.order[i][0] == oldest]
        newer = [i for i in order if files.order[i][0] != oldest]
        if (
            len(newer) < 2
            or 2 * sum(files.live(i) for i in newer) >= sum(files.live(i) for i in base)
            or _deleted_enough(files, deleted_share)
        ):
            picked = order
        else:
            chosen = heavy | set(newer)
            picked = [i for i in order if i in chosen]
    if len(picked) < 2 and not heavy.intersection(picked) and not full:
        return []
    return [[files.rows[i] for i in picked]]


def _deleted_enough(files: Files, share: float | None) -> bool:
    """Whether the rows the files' vectors delete reach ``share`` of the rows in them (never with None)."""
    deleted = sum(files.deleted)
    return share is not None and deleted > 0 and deleted >= share * sum(files.counts)
