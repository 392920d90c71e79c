"""Whether a snapshot removed rows: what a reader of appended rows (a plain Spark stream, an incremental copy) must
know of each commit, whatever its kind.

A commit *removes rows* when it deletes or replaces rows that were live before it: it removes data files holding
rows (an overwrite, a copy-on-write delete or MERGE), or it marks rows of files it did not add in deletion vectors
(an upsert that replaces a key's row, a row-kind delete of a live key, ``delete_keys``, a merge-on-read delete, a
MERGE), or it is a restore that changed the table's files other than by adding some. A commit that only adds rows
does not, even when it marks rows of its own new files (two rows for one key in one upsert, a row-kind delete of a
key without a live row: those rows were never live); nor does a compaction, which moves rows unchanged.

Commits record it in the snapshot (``removesRows``, :attr:`lakefmt.spec.snapshot.Snapshot.removes_rows`). A snapshot
written before that field is judged here from its delta manifests the same way: a DELETE entry of a data file
holding rows, or a deletion-vector file whose vector of a data file the snapshot did not add deletes more rows than
the vector it replaced.
"""

from __future__ import annotations

import pyarrow.compute as pc

from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.masks import load_vectors
from lakefmt.spec import CommitKind, Snapshot
from lakefmt.spec.operations import Operation

__all__ = ["removes_rows"]


def removes_rows(io: FileIO, store: MetaStore, snap: Snapshot) -> bool:
    """Whether ``snap`` deleted or replaced rows that were live before it (see the module): its recorded
    ``removesRows``, or, for a snapshot written before the field, what its delta manifests show."""
    if snap.removes_rows is not None:
        return snap.removes_rows
    if snap.commit_kind is CommitKind.COMPACT:
        return False
    metas = store.manifest_list(snap.delta_manifest_list)
    if not metas:
        return False
    delta = ents.concat_entries(ents.read_manifests(store, metas))
    removed, added = ents.deletes(delta), ents.adds(delta)
    if snap.operation is Operation.RESTORE:
        return bool(removed.num_rows > 0)
    if (pc.sum(ents.data_files(removed).column(ents.ROW_COUNT)).as_py() or 0) > 0:
        return True
    new_vectors = ents.vector_files(added)
    if new_vectors.num_rows == 0:
        return False
    own = set(ents.paths(ents.data_files(added)))
    after = load_vectors(io, new_vectors)
    before = load_vectors(io, ents.vector_files(removed))
    return any(
        path not in own and vector.cardinality > (before[path].cardinality if path in before else 0)
        for path, vector in after.items()
    )
