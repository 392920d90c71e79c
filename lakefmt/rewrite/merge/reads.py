"""What a MERGE read, checked against the commits that landed since: Delta's WriteSerializable rules for a
command that reads before it writes.

* A data file the merge read that a concurrent commit removed (other than a compaction, which moves the same
  rows) means the merge decided on rows that changed: :class:`RewriteConflictError` naming the files.
* On a table without a key, a data file that a concurrent commit other than a blind append (an append without
  ``lakefmt.operation``) or a compaction added, and whose partition values and statistics may hold rows the merge
  would have read (another MERGE's inserts of the same keys), means the merge did not see rows it might match: it
  would insert a second row for them. :class:`RewriteConflictError`. Blind appends never conflict, as in Delta. On
  a key table the written rows replace their keys' live rows, so no second row can appear and this is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import LakefmtError, RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.plan import prune_entries
from lakefmt.rewrite.base import OPERATION
from lakefmt.spec import CommitKind, Snapshot, TableSchema

__all__ = ["MergeReads"]


@dataclass(frozen=True)
class MergeReads:
    """What a merge read: on ``snapshot`` (None: an empty table), the data files of ``entries`` (ADD entries), chosen
    by ``filter`` (None: every live file); ``schema``: the table's then; ``appends_conflict``: whether rows added
    meanwhile by other writers than blind appends conflict (tables without a key)."""

    snapshot: Snapshot | None
    entries: pa.Table
    filter: pc.Expression | None
    schema: TableSchema
    appends_conflict: bool

    def check(self, store: MetaStore, latest: Snapshot | None) -> None:
        """Raise :class:`RewriteConflictError` if a commit after :attr:`snapshot`, up to ``latest``, changed what the
        merge read (see the module docstring)."""
        since = self.snapshot.id if self.snapshot is not None else 0
        if latest is None or latest.id <= since:
            return
        read = set(ents.paths(self.entries))
        for sid in range(since + 1, latest.id + 1):
            try:
                snap = latest if sid == latest.id else store.snapshot(sid)
                if snap.commit_kind is CommitKind.COMPACT:
                    continue
                blind = snap.commit_kind is CommitKind.APPEND and not (snap.properties or {}).get(OPERATION)
                metas = store.manifest_list(snap.delta_manifest_list)
                delta = ents.concat_entries([store.manifest(m.file_name) for m in metas]) if metas else None
            except (LakefmtError, OSError) as exc:  # expired meanwhile: what it did cannot be checked
                raise RewriteConflictError(
                    f"snapshot {sid}, committed while this merge ran, cannot be read ({exc}); nothing was committed",
                    gone=[],
                ) from None
            if delta is None or delta.num_rows == 0:
                continue
            gone = sorted(read & set(ents.paths(ents.deletes(delta))))
            if gone:
                raise RewriteConflictError(
                    f"{len(gone)} file(s) this merge read were removed by a concurrent commit (snapshot {sid}; the "
                    f"first: {gone[0]}); nothing was committed",
                    gone=gone,
                )
            if blind or not self.appends_conflict:
                continue
            added = ents.data_files(ents.adds(delta))
            if added.num_rows and prune_entries(added, self.filter, self.schema, store.schema).num_rows:
                what = (snap.properties or {}).get(OPERATION) or snap.commit_kind.value.lower()
                raise RewriteConflictError(
                    f"a concurrent commit (snapshot {sid}, {what}) added rows this merge may match but did not read; "
                    "nothing was committed: run it again",
                    gone=[],
                )
