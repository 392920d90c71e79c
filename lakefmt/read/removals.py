"""Whether a snapshot removed rows: what a reader of appended rows (a plain Spark stream, an incremental copy) must
know of each commit, whatever its kind.

A commit *removes rows* when it deletes or replaces rows that were live before it: it removes data files holding
rows (an overwrite, a copy-on-write delete or MERGE), or it marks rows of files it did not add in deletion vectors
(an upsert that replaces a key's row, a row-kind delete of a live key, ``delete_keys``, a merge-on-read delete, a
MERGE), or it is a restore that removed any file or ADDs again a deletion-vector file whose vectors delete rows of
data files that stay live. A commit that only adds rows does not, even when it marks rows of its own new files (two
rows for one key in one upsert, a row-kind delete of a key without a live row: those rows were never live); nor does
a compaction, which moves rows unchanged.

Commits record it in the snapshot (``removesRows``, :attr:`lakefmt.spec.snapshot.Snapshot.removes_rows`). A snapshot
written before that field is judged here from its delta manifests the same way: a DELETE entry of a data file
holding rows, or a deletion-vector file whose vector of a data file the snapshot did not add deletes more rows than
the vector it replaced (for a restore: a data file live in the snapshot). A reader that reads the delta anyway (the
plain stream) asks for the recorded ``false`` to be checked against it: a snapshot that says it removed nothing and
whose delta shows otherwise is corrupt metadata, never trusted (its reader would emit deleted rows as live).
"""

from __future__ import annotations

import pyarrow.compute as pc

from lakefmt.errors import CorruptMetadataError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.masks import load_vectors
from lakefmt.spec import CommitKind, Snapshot
from lakefmt.spec.operations import Operation

__all__ = ["removes_rows"]


def removes_rows(io: FileIO, store: MetaStore, snap: Snapshot, *, check: bool = False) -> bool:
    """Whether ``snap`` deleted or replaced rows that were live before it (see the module): its recorded
    ``removesRows``, or, for a snapshot written before the field, what its delta manifests show.

    ``check``: a recorded ``false`` is checked against the delta manifests too (a reader that reads them anyway:
    they are cached), and :class:`CorruptMetadataError` naming the snapshot when they show a removal."""
    recorded = snap.removes_rows
    if recorded is not None and (recorded or not check):
        return recorded
    if snap.commit_kind is CommitKind.COMPACT:
        return False
    shown = _removal(io, store, snap)
    if recorded is False and shown is not None:
        raise CorruptMetadataError(
            f"snapshot {snap.id} records removesRows=false, but its delta manifests {shown}: its metadata is "
            "corrupt (a reader of appended rows would return deleted rows as live)"
        )
    return shown is not None


def _removal(io: FileIO, store: MetaStore, snap: Snapshot) -> str | None:
    """What in ``snap``'s delta manifests removes live rows (words for an error), or None when nothing does."""
    metas = store.manifest_list(snap.delta_manifest_list)
    if not metas:
        return None
    delta = ents.concat_entries(ents.read_manifests(store, metas))
    removed, added = ents.deletes(delta), ents.adds(delta)
    restore = snap.operation is Operation.RESTORE
    if restore and removed.num_rows > 0:
        return f"DELETE {ents.paths(removed)[0]} (a restore that removes a file changes rows)"
    gone = ents.data_files(removed)
    holding = gone.filter(pc.greater(gone.column(ents.ROW_COUNT), 0)) if gone.num_rows else gone
    if holding.num_rows:
        return f"DELETE data file {ents.paths(holding)[0]}, which holds rows"
    new_vectors = ents.vector_files(added)
    if new_vectors.num_rows == 0:
        return None
    own = set(ents.paths(ents.data_files(added)))
    after = load_vectors(io, new_vectors)
    before = load_vectors(io, ents.vector_files(removed))
    marked = sorted(
        path
        for path, vector in after.items()
        if path not in own and vector.cardinality > (before[path].cardinality if path in before else 0)
    )
    if marked and restore:  # a restore ADDs an old deletion-vector file again: a vector of a file not live is moot
        live = set(ents.paths(ents.data_files(ents.live_entries(store, snap))))
        marked = [path for path in marked if path in live]
    if not marked:
        return None
    return f"ADD a deletion vector ({after[marked[0]].file}) marking rows of data file {marked[0]}, not added by it"
