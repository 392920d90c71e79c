"""The change data feed: the rows each snapshot of a range inserted, updated and deleted.

A snapshot's delta manifests say what it changed, file by file; this module turns that into rows:

* **inserted**: the rows of the data files the snapshot added that its own deletion vectors leave live (a row it
  wrote and marked deleted in the same commit, a key written twice in one upsert, is no change);
* **deleted by vector**: for a data file that was already there, the positions its new vector deletes and the
  previous one did not (the previous vectors are those of the deletion-vector files the snapshot replaced); a
  position the previous vector deleted and the new one does not (a restore) is a row inserted again;
* **removed files** (a copy-on-write delete, an overwrite, a restore): their live rows, less those an added file
  carries unchanged (a multiset difference on whole rows: a rewrite's carried-over rows are no change, and the
  added files' matched rows are no insert either).

On a key table a key that a snapshot both deleted and inserted is an update: ``update_preimage`` for the old row,
``update_postimage`` (right after it) for the new one. COMPACT snapshots move rows and change none; a schema change
commits no file: neither yields a row. Every row is read as the table's current schema (older files are mapped by
field id), with ``_change_type``, ``_commit_snapshot`` and ``_commit_timestamp`` appended (Delta's names), or
``_row_kind`` (Paimon's ``+I -U +U -D``) in place of the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Literal, Unpack

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefmt.errors import (
    CorruptMetadataError,
    MissingMetadataError,
    SchemaMismatchError,
    SnapshotNotFoundError,
)
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.change_labels import ROW_KINDS, label_changes, names_of
from lakefmt.read.change_range import RangeSpellings, change_range
from lakefmt.read.expired import expired_reads
from lakefmt.read.files import read_entries
from lakefmt.read.masks import Home, Vector, check_homes, deleted_positions, homes_of, load_vectors
from lakefmt.read.rows_at import RowReader, RowRequest
from lakefmt.spec import CommitKind, Snapshot, TableSchema
from lakefmt.spec.changelog import ROW_KIND_COLUMN, row_kinds_of, rows_of
from lakefmt.spec.filters import check_filter
from lakefmt.spec.operations import OPERATION_PROPERTY, RESTORE

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_SNAPSHOT",
    "COMMIT_TIMESTAMP",
    "ROW_KIND",
    "ROW_KINDS",
    "change_batches",
    "change_range",
    "change_schema",
    "multiset_minus",
    "read_changes",
    "table_changes",
]

CHANGE_TYPE = "_change_type"
ROW_KIND = "_row_kind"
COMMIT_SNAPSHOT = "_commit_snapshot"
COMMIT_TIMESTAMP = "_commit_timestamp"
_TIMESTAMP = pa.timestamp("ms", tz="UTC")
_READ_AHEAD = 8  #: stored changelogs read ahead of the snapshot being turned into rows


def table_changes(
    io: FileIO,
    store: MetaStore,
    from_snapshot: int | None = None,
    to_snapshot: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    filter: str | pc.Expression | None = None,
    row_kinds: bool = False,
    now_ms: int,
    **spellings: Unpack[RangeSpellings],
) -> pa.Table:
    """:meth:`lakefmt.Table.changes`: the change rows of the range :func:`change_range` resolves (``from_*``: the
    snapshot after which changes start; ``starting_*``: where they start, included; ``to_*`` and ``ending_*``: the
    last snapshot whose changes are read), projected to ``columns`` (then the change columns), keeping the rows
    where ``filter`` is true; ``row_kinds``: Paimon's ``_row_kind`` (``+I -U +U -D``) in place of Delta's
    ``_change_type``."""
    start, end = change_range(
        io, store, from_snapshot=from_snapshot, to_snapshot=to_snapshot, now_ms=now_ms, **spellings
    )
    return read_changes(io, store, start, end, columns=columns, filter=filter, row_kinds=row_kinds)


def read_changes(
    io: FileIO,
    store: MetaStore,
    start: int,
    end: int,
    *,
    columns: Sequence[str] | None = None,
    filter: str | pc.Expression | None = None,
    row_kinds: bool = False,
) -> pa.Table:
    """The change rows of snapshots ``start+1 .. end`` as one table (see the module's docstring)."""
    schema = store.latest_schema()
    parts = list(change_batches(io, store, start, end, columns=columns, filter=filter, row_kinds=row_kinds))
    return pa.concat_tables(parts) if parts else change_schema(schema, columns, row_kinds).empty_table()


def change_schema(schema: TableSchema, columns: Sequence[str] | None = None, row_kinds: bool = False) -> pa.Schema:
    """The change feed's columns for a table of ``schema``: the table's (or ``columns``), then the change type
    (``_change_type``, or ``_row_kind`` with ``row_kinds``), ``_commit_snapshot`` and ``_commit_timestamp``."""
    fields = [schema.arrow_schema.field(c) for c in (columns or schema.arrow_schema.names)]
    kind = ROW_KIND if row_kinds else CHANGE_TYPE
    extra = [pa.field(kind, pa.string(), False), pa.field(COMMIT_SNAPSHOT, pa.int64(), False)]
    return pa.schema([*fields, *extra, pa.field(COMMIT_TIMESTAMP, _TIMESTAMP, False)])


def change_batches(
    io: FileIO,
    store: MetaStore,
    start: int,
    end: int,
    *,
    columns: Sequence[str] | None = None,
    filter: str | pc.Expression | None = None,
    row_kinds: bool = False,
    schema: TableSchema | None = None,
    input_rows: bool = True,
) -> Iterator[pa.Table]:
    """The change rows of snapshots ``start+1 .. end``, one table per snapshot that changed a row, in commit order,
    as ``schema``'s columns (default: the current schema; older files are matched to it by field id).
    Every snapshot of the range must still be retained: :class:`SnapshotNotFoundError` names the first that is
    not, before any row is read. ``input_rows=False``: the changes of a snapshot that stored its input
    (``changelog-producer=input``: rows as given, a delete by key without its row) are derived from its files
    instead, as what it did to the table (what an incremental scan nets)."""
    schema = schema or store.latest_schema()
    if columns is not None:
        unknown = [c for c in columns if c not in schema.arrow_schema.names]
        if unknown:
            raise SchemaMismatchError(
                f"unknown column(s) {', '.join(unknown)}; the table has {', '.join(schema.arrow_schema.names)}"
            )
    if filter is not None:
        filter = check_filter(filter, change_schema(schema, None, row_kinds), "change feed filter")

    # snapshot ``start`` too: the changes of ``start+1`` read the files it replaced (old vectors, removed files),
    # which expiration deletes with the last snapshot holding them; unless ``start+1`` stored its changes
    def needed(sid: int) -> Snapshot:
        try:
            return store.snapshot(sid)
        except SnapshotNotFoundError as exc:
            raise SnapshotNotFoundError(
                f"the changes of snapshots {start + 1}..{end} need snapshot {sid}"
                f"{' (the files its successor replaced)' if sid == start else ''}: {exc}"
            ) from exc

    first = needed(start + 1) if end > start else None
    if start >= 1 and (first is None or not _reads_stored(store, first, input_rows)):
        needed(start)
    snaps = [] if first is None else [first, *(needed(sid) for sid in range(start + 2, end + 1))]
    full = change_schema(schema, None, row_kinds)
    names = [*(columns or schema.arrow_schema.names), *full.names[len(schema.arrow_schema) :]]
    stored = [s for s in snaps if _reads_stored(store, s, input_rows)]
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="lakefmt-feed") as pool:
        walker = _Walker(io, store, schema, pool if len(stored) > 1 else None, input_rows=input_rows)
        for i, snap in enumerate(snaps):
            walker.read_ahead(snaps[i : i + _READ_AHEAD])
            with expired_reads(store, max(start, 1), "this change feed"):
                labelled = walker.changes(snap)
            if labelled is None:
                continue
            rows, codes = labelled
            n = rows.num_rows
            extra = [
                names_of(codes, row_kinds),
                pa.repeat(pa.scalar(snap.id, pa.int64()), n),
                pa.repeat(pa.scalar(snap.time_millis, _TIMESTAMP), n),
            ]
            out = pa.Table.from_arrays([*rows.columns, *extra], schema=full)
            if filter is not None:  # a row where it is null is left out, as in a scan
                out = out.filter(filter)
            if out.num_rows:
                yield out.select(names)


def _reads_stored(store: MetaStore, snap: Snapshot, input_rows: bool) -> bool:
    """Whether the feed reads the change rows ``snap`` stored (it stored some; ``input_rows``: see
    :func:`change_batches`)."""
    if snap.changelog_manifest_list is None:
        return False
    return input_rows or store.schema(snap.schema_id).table_options.changelog_producer != "input"


class _Walker:
    """Goes through the snapshots of a range in order, turning each one's delta into change rows. With a ``pool``,
    the stored changelogs of the next snapshots are read ahead, a few at once (:meth:`read_ahead`).
    ``input_rows``: as for :func:`change_batches`."""

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        schema: TableSchema,
        pool: Executor | None = None,
        *,
        input_rows: bool = True,
    ) -> None:
        self.io, self.store, self.schema = io, store, schema
        self.pool = pool
        self.input_rows = input_rows
        self.ahead: dict[int, Future[tuple[pa.Table, np.ndarray] | Literal[False] | None]] = {}
        #: live data path -> its schema id and home (partition and bucket), once a vector needs it
        self.live: dict[str, tuple[int | None, Home]] | None = None
        self.rows = RowReader(io, store, schema)
        self.decoded: dict[str, tuple[Vector, np.ndarray]] = {}  # data path -> its last vector decoded

    def changes(self, snap: Snapshot) -> tuple[pa.Table, np.ndarray] | None:
        """The rows ``snap`` changed, with their row-kind bytes; None when it changed none."""
        if self.live is None:  # no live file is being followed: a commit that changed no row, or stored its rows,
            if snap.commit_kind is CommitKind.COMPACT:  # needs no look at its files
                return None
            if _reads_stored(self.store, snap, self.input_rows) and (stored := self._stored(snap)) is not False:
                return stored
        metas = self.store.manifest_list(snap.delta_manifest_list)
        if not metas:
            return None
        delta = ents.concat_entries(ents.read_manifests(self.store, metas))
        data, dv = ents.data_files(delta), ents.vector_files(delta)
        added, removed = ents.adds(data), ents.deletes(data)
        ents.check_data_paths(data, f"the delta manifests of snapshot {snap.id}")
        self._follow(snap, added, removed)
        if snap.commit_kind is CommitKind.COMPACT:
            return None
        if _reads_stored(self.store, snap, self.input_rows) and (stored := self._stored(snap)) is not False:
            return stored  # stored when it was committed (changelog-producer=lookup)
        new = load_vectors(self.io, ents.adds(dv))
        old = load_vectors(self.io, ents.deletes(dv))
        self._check_homes(snap, ents.adds(dv), new, added)
        added_paths, removed_paths = ents.paths(added), ents.paths(removed)
        inserted = [self._read(added, new)]
        deleted: list[pa.Table] = []
        if removed.num_rows:
            gone, kept = multiset_minus(self._read(removed, old), inserted[0])
            deleted, inserted = [gone], [kept]
        touched = set(added_paths) | set(removed_paths)
        # a commit other than a restore only adds marks: a vector as long as the one it replaces is the same vector
        forward = snap.properties.get(OPERATION_PROPERTY) != RESTORE
        changed: list[tuple[str, np.ndarray, np.ndarray, Vector | None, Vector | None]] = []
        for path in sorted((set(new) | set(old)) - touched):
            now, before = new.get(path), old.get(path)
            if now == before:
                continue
            if forward and now and before and now.cardinality == before.cardinality:
                self._copied(path, before, now)
                continue
            before_pos = self._positions(path, before)  # the older first: the newer one is kept
            now_pos = self._positions(path, now)
            newly, again = _differences(now_pos, before_pos)
            if len(newly) or len(again):
                changed.append((path, newly, again, now, before))
        if changed:  # the rows at those positions, each file's needed row groups read once
            sids = [self._schema_id(snap, c[0]) for c in changed]
            gone = [RowRequest(c[0], sid, c[1], _file(c[3])) for c, sid in zip(changed, sids, strict=True) if len(c[1])]
            back = [RowRequest(c[0], sid, c[2], _file(c[4])) for c, sid in zip(changed, sids, strict=True) if len(c[2])]
            deleted.append(self.rows.take(gone))
            inserted.append(self.rows.take(back))
        return label_changes(
            pa.concat_tables(deleted) if deleted else inserted[0].slice(0, 0),
            pa.concat_tables(inserted),
            self.schema.primary_keys,
        )

    def read_ahead(self, snaps: Sequence[Snapshot]) -> None:
        """Start reading the stored changelogs of ``snaps`` (those not started yet) in the pool."""
        if self.pool is None:
            return
        for snap in snaps:
            if _reads_stored(self.store, snap, self.input_rows) and snap.id not in self.ahead:
                self.ahead[snap.id] = self.pool.submit(self._load_stored, snap)

    def _stored(self, snap: Snapshot) -> tuple[pa.Table, np.ndarray] | Literal[False] | None:
        """The change rows ``snap`` stored in its changelog files (read ahead, or now)."""
        future = self.ahead.pop(snap.id, None)
        return future.result() if future is not None else self._load_stored(snap)

    def _load_stored(self, snap: Snapshot) -> tuple[pa.Table, np.ndarray] | Literal[False] | None:
        """The change rows ``snap`` stored in its changelog files, in their order, as the current schema; False
        when a file of them is missing (removed by a tool that did not know them): the changes are then derived."""
        assert snap.changelog_manifest_list is not None
        try:
            metas = self.store.manifest_list(snap.changelog_manifest_list)
            entries = ents.adds(ents.concat_entries(ents.read_manifests(self.store, metas))) if metas else None
            if entries is None or entries.num_rows == 0:
                return None
            ents.check_changelog_paths(entries, f"the changelog manifests of snapshot {snap.id}")
            paths = ents.paths(entries)
            if set(ents.schema_ids(entries)) == {self.schema.id}:  # written under the current schema: one read a file
                names = [*self.schema.arrow_schema.names, ROW_KIND_COLUMN]
                read = [(p, self._parquet(p, names)) for p in paths]
                rows = pa.concat_tables([rows_of(t, self.schema.arrow_schema, p) for p, t in read])
                kinds = np.concatenate([row_kinds_of(t, p) for p, t in read])
            else:  # columns matched by field id; the row kinds read on their own
                rows = self._read(entries, {})
                kinds = np.concatenate([row_kinds_of(self._parquet(p, [ROW_KIND_COLUMN]), p) for p in paths])
        except (FileNotFoundError, MissingMetadataError):
            return False
        if len(kinds) != rows.num_rows:
            raise CorruptMetadataError(
                f"the changelog files of snapshot {snap.id} hold {rows.num_rows} rows and {len(kinds)} row kinds: "
                "the files are corrupt"
            )
        return (rows, kinds) if rows.num_rows else None

    def _parquet(self, path: str, columns: list[str]) -> pa.Table:
        """``columns`` of Parquet file ``path`` (relative to the root), read whole."""
        with self.io.fs.open(self.io.full_path(path), "rb") as f:
            try:
                return pq.read_table(f, columns=columns)
            except (pa.ArrowInvalid, KeyError) as exc:  # not Parquet, or a column missing
                raise CorruptMetadataError(f"changelog file {path} cannot be read as one: {exc}") from exc

    def _positions(self, path: str, vector: Vector | None) -> np.ndarray:
        """The positions ``vector`` (of data file ``path``) deletes; the last one decoded per file is kept, as the
        next snapshot that changes the file compares its new vector with it. Kept positions are reused for that
        very vector only (the same blob of the same file), never for another vector that deletes as many rows: a
        restore in between may have reset the file's vector, and a later vector of the same count holds other
        positions."""
        if vector is None:
            return np.zeros(0, np.int64)
        hit = self.decoded.get(path)
        if hit is not None and hit[0] == vector:
            return hit[1]
        out = deleted_positions(self.io, vector)
        self.decoded[path] = (vector, out)
        return out

    def _copied(self, path: str, before: Vector, now: Vector) -> None:
        """A commit that only adds marks replaced ``before`` (the file's vector) by ``now`` deleting as many rows:
        the same positions, copied into another vector file. When ``before``'s are kept, they are ``now``'s too."""
        hit = self.decoded.get(path)
        if hit is not None and hit[0] == before:
            self.decoded[path] = (now, hit[1])

    def _read(self, entries: pa.Table, vectors: Mapping[str, Vector]) -> pa.Table:
        """The live rows of the files of ``entries`` under ``vectors``, in order, as the current schema."""
        batches = read_entries(self.io, entries, self.schema, schemas=self.store.schema, vectors=vectors)
        return pa.Table.from_batches(list(batches), schema=self.schema.arrow_schema)

    def _follow(self, snap: Snapshot, added: pa.Table, removed: pa.Table) -> None:
        """Keep the live data files current through ``snap`` (when they are being followed)."""
        if self.live is None:
            return
        for path in ents.paths(removed):
            self.live.pop(path, None)
        self.live.update(zip(ents.paths(added), zip(ents.schema_ids(added), homes_of(added), strict=True), strict=True))

    def _live_at(self, snap: Snapshot) -> dict[str, tuple[int | None, Home]]:
        """The live data files of ``snap`` (followed from here on: :meth:`_follow`)."""
        if self.live is None:
            live = ents.data_files(ents.live_entries(self.store, snap))
            both = zip(ents.schema_ids(live), homes_of(live), strict=True)
            self.live = dict(zip(ents.paths(live), both, strict=True))
        return self.live

    def _check_homes(
        self, snap: Snapshot, vector_entries: pa.Table, vectors: Mapping[str, Vector], added: pa.Table
    ) -> None:
        """Every vector ``snap`` ADDs must be in the deletion-vector file of its data file's partition and bucket
        (:func:`lakefmt.read.masks.check_homes`, as every read and write checks): a file it adds by its entry, any
        other by the live files. A vector of a file in another partition would otherwise be read as deletes."""
        homes = dict(zip(ents.paths(added), homes_of(added), strict=True))
        others = [path for path in vectors if path not in homes]
        if others:
            live = self._live_at(snap)
            homes.update({path: live[path][1] for path in others if path in live})
        check_homes(vector_entries, vectors, homes)

    def _schema_id(self, snap: Snapshot, path: str) -> int | None:
        """The schema id of data file ``path`` (live in ``snap``), whose rows a vector's positions index."""
        if self.live is not None and path not in self.live:  # a file this walk has not seen added: read again
            self.live = None
        live = self._live_at(snap)
        if path not in live:
            raise CorruptMetadataError(
                f"snapshot {snap.id} has a deletion vector for {path}, a data file it does not hold"
            )
        return live[path][0]


def _file(vector: Vector | None) -> str | None:
    return None if vector is None else vector.file


def _differences(now: np.ndarray, before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions in ``now`` and not in ``before``, and those in ``before`` and not in ``now`` (both sorted)."""
    at = np.searchsorted(now, before)
    if len(before) == 0 or (at[-1] < len(now) and np.array_equal(now[at], before)):  # before within now: the usual
        keep = np.ones(len(now), dtype=bool)
        keep[at] = False
        return now[keep], before[:0]
    return np.setdiff1d(now, before, assume_unique=True), np.setdiff1d(before, now, assume_unique=True)


def _groupable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


def multiset_minus(a: pa.Table, b: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The rows of ``a`` that no row of ``b`` matches, and those of ``b`` that none of ``a`` matches: equal whole
    rows are matched one to one (a row twice in ``a`` and once in ``b`` leaves one), each side keeps its order."""
    if a.num_rows == 0 or b.num_rows == 0:
        return a, b
    both = pa.concat_tables([a, b])
    keys: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, field in enumerate(both.schema):  # nested values are compared by their Python form
        col = both.column(i)
        keys[f"k{i}"] = col if _groupable(field.type) else pa.array([repr(v) for v in col.to_pylist()], pa.string())
    keys["side"] = pa.array(np.repeat(np.array([0, 1], np.int8), [a.num_rows, b.num_rows]))
    keys["i"] = pa.array(np.arange(both.num_rows, dtype=np.int64))
    names = [f"k{i}" for i in range(both.num_columns)]
    groups = pa.table(keys).group_by(names, use_threads=False).aggregate([("side", "sum"), ("i", "list")])
    in_b = groups.column("side_sum").to_numpy()
    lists = groups.column("i_list")
    count = pc.list_value_length(lists).to_numpy()
    unequal = np.nonzero(count != 2 * in_b)[0]
    keep_a: list[int] = []
    keep_b: list[int] = []
    for rows in lists.take(pa.array(unequal, pa.int64())).to_pylist():
        from_a = [r for r in rows if r < a.num_rows]
        from_b = [r - a.num_rows for r in rows if r >= a.num_rows]
        extra = len(from_a) - len(from_b)
        if extra > 0:
            keep_a.extend(from_a[len(from_a) - extra :])
        else:
            keep_b.extend(from_b[len(from_b) + extra :])
    return a.take(pa.array(sorted(keep_a), pa.int64())), b.take(pa.array(sorted(keep_b), pa.int64()))
