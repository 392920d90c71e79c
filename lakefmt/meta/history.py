"""A table's history, newest first (deltalake's ``DeltaTable.history()``): one record per retained snapshot with
what it did (:mod:`lakefmt.spec.operations`), its parameters, who committed it, and how many rows and files it
added and removed (read from the snapshot's delta manifests: one or a few small reads per snapshot)."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc

from lakefmt.errors import InvalidOptionError
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot, operations

__all__ = ["HISTORY_FIELDS", "history", "history_record"]

#: the keys of a history record, in order
HISTORY_FIELDS = (
    "version", "timestamp", "operation", "operation_parameters", "operation_metrics", "rows_added", "rows_removed",
    "files_added", "files_removed", "commit_user", "commit_identifier", "commit_kind", "schema_id", "total_rows",
    "total_files",
)


def history(store: MetaStore, limit: int | None = None) -> list[dict[str, Any]]:
    """The records of the retained snapshots, newest first; at most ``limit`` of them (a positive int, or None for
    all: :class:`InvalidOptionError` otherwise). A table without commits has an empty history."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidOptionError(f"limit must be a positive integer or None, got {limit!r}")
    latest = store.latest_snapshot()
    if latest is None:
        return []
    if limit is None:
        snaps = list(reversed(store.retained_snapshots()))
    else:  # walk back from the latest: expiration removes the oldest first, so the retained ids are contiguous
        snaps = [latest]
        while len(snaps) < limit and snaps[-1].id > 1:
            older = store.try_snapshot(snaps[-1].id - 1)
            if older is None:
                break
            snaps.append(older)
    return [history_record(store, s) for s in snaps]


def history_record(store: MetaStore, snap: Snapshot) -> dict[str, Any]:
    """One snapshot's history record (keys :data:`HISTORY_FIELDS`). ``timestamp``: the commit time in epoch
    milliseconds. ``operation_metrics``: what the operation itself counted (a MERGE's ``num_target_rows_updated``,
    ``num_target_rows_inserted``, ``num_target_rows_deleted``, ...: deltalake's ``operationMetrics``; empty for
    operations that record none). ``rows_added`` counts the rows of the data files it added, ``rows_removed``
    those of the data files it removed and the rows its deletion vectors newly mark: a copy-on-write delete that
    rewrites a file without one of its rows counts the rows it kept on both sides, as it counts the file
    (``total_rows`` minus the previous snapshot's is the net change). ``files_*`` count data files (not
    deletion-vector files)."""
    added_rows = removed_rows = added_files = removed_files = 0
    metas = store.manifest_list(snap.delta_manifest_list)
    if metas:
        delta = ents.concat_entries(ents.read_manifests(store, metas))
        data, vectors = ents.data_files(delta), ents.vector_files(delta)
        adds, deletes = ents.adds(data), ents.deletes(data)
        added_files, removed_files = adds.num_rows, deletes.num_rows
        added_rows, removed_rows = _rows(adds), _rows(deletes)
        removed_rows += _rows(ents.adds(vectors)) - _rows(ents.deletes(vectors))
    return {
        "version": snap.id,
        "timestamp": snap.time_millis,
        "operation": snap.operation.value,
        "operation_parameters": snap.operation_parameters,
        "operation_metrics": operations.metrics_of(snap.properties),
        "rows_added": added_rows,
        "rows_removed": removed_rows,
        "files_added": added_files,
        "files_removed": removed_files,
        "commit_user": snap.commit_user,
        "commit_identifier": snap.commit_identifier,
        "commit_kind": snap.commit_kind.value,
        "schema_id": snap.schema_id,
        "total_rows": snap.total_record_count,
        "total_files": snap.total_file_count,
    }


def _rows(entries: Any) -> int:
    if entries.num_rows == 0:
        return 0
    return int(pc.sum(entries.column(ents.ROW_COUNT)).as_py() or 0)
