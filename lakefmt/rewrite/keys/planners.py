"""Row-level changes by deletion vectors: upserts and deletes on key tables, and merge-on-read deletes.

Each is a :class:`~lakefmt.commit.kinds.VectorPlanner`: on the snapshot a commit lands on, it finds the rows to
mark, bucket by bucket, and writes each touched bucket's new deletion-vector file (the bucket's old vectors plus
the new marks, one Puffin file; :mod:`lakefmt.spec.deletion_vector`). The commit replaces the bucket's old file
with it; if a concurrent commit changed a touched bucket, the commit plans again on the new snapshot
(:class:`~lakefmt.commit.kinds.KeyedProducer`).

Finding a key's live row (:mod:`lakefmt.rewrite.keys.find`) reads the key index files of the key's bucket's data
files, or, for a file without a usable one, its key columns (and ``sequence.field``), never the rest of the table;
the keys read of each data file are cached by path in the process (data files are immutable), so a long-lived
writer reads each file's keys once (Paimon's writers keep their lookup files so).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.commit.kinds import VectorChanges
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.read.masks import deleted_positions, latest_data, load_vectors
from lakefmt.read.plan import prune_entries
from lakefmt.rewrite.keys.buckets import (
    FILE,
    ORDER,
    POS,
    BucketKey,
    Marks,
    bucket_keys_of,
    key_buckets,
    live_in,
    member,
    read_columns,
    sorted_unique,
    state_of,
    vector_file_path,
    write_vector_file,
)
from lakefmt.rewrite.keys.changelog import store_changelog, store_input
from lakefmt.rewrite.keys.find import Found, KeyFinder, file_index
from lakefmt.rewrite.keys.lookup import Probe, clear_cache, probe_of
from lakefmt.rewrite.keys.stored import clear_stored
from lakefmt.spec import DataFile, ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.filters import referenced_columns
from lakefmt.spec.keys.hashing import key_hash
from lakefmt.spec.keys.index_file import hashed_columns, indexed_column
from lakefmt.spec.keys.rowkind import DELETE, IGNORE, row_kinds

__all__ = ["DeleteKeysPlanner", "DeleteWherePlanner", "Planner", "UpsertPlanner", "dedup_keys", "key_cache_clear"]

def key_cache_clear() -> None:
    """Forget the cached key indexes of data files, and the key index files opened (tests; memory)."""
    clear_cache()
    clear_stored()


# -- dedup within one write -------------------------------------------------------------------------------------
def dedup_keys(table: pa.Table, keys: Sequence[str], sequence: str | None) -> pa.Table:
    """One row per key of ``table``: the last one, or the one with the largest ``sequence`` value (ties: the last;
    a null sequence value is smaller than any other). Rows keep their order."""
    if table.num_rows <= 1:
        return table
    hashes = np.sort(key_hash(table, list(keys)))
    if not bool(np.any(hashes[1:] == hashes[:-1])):  # distinct hashes: distinct keys, nothing to drop
        return table
    order = pa.array(np.arange(table.num_rows, dtype=np.int64))
    probe = table.select(list(keys)).append_column(ORDER, order)
    if sequence is not None and sequence not in keys:  # a key column as the sequence: every tie, the last wins
        probe = probe.append_column(sequence + ORDER, table.column(sequence))
        best = probe.group_by(list(keys), use_threads=False).aggregate([(sequence + ORDER, "max")])
        probe = probe.join(best, list(keys), join_type="inner", use_threads=False)
        top = probe.column(sequence + ORDER + "_max")
        # the rows of the largest value; a key whose values are all null keeps them all (its last row wins)
        keep = pc.or_(pc.fill_null(pc.equal(probe.column(sequence + ORDER), top), False), pc.is_null(top))
        probe = probe.filter(keep)
    last = probe.group_by(list(keys), use_threads=False).aggregate([(ORDER, "max")]).column(ORDER + "_max")
    if len(last) == table.num_rows:
        return table
    return table.take(pc.take(last, pc.sort_indices(last)))  # the winners, in their order


class Planner:
    """What the three planners share: the bucket state, and writing a bucket's new deletion-vector file."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema) -> None:
        self.io, self.store, self.schema = io, store, schema
        self.finder = KeyFinder(io, store, schema)
        self.buckets: set[BucketKey] = set()
        self.writer_id = uuid.uuid4().hex
        self._k = 0
        #: every file a plan wrote or began to write (vectors, merged rows), for the producer to delete those of
        #: plans that never land
        self.written: list[str] = []
        #: whether a plan stores its change rows when the table has a changelog-producer; the entries of the
        #: commit's new data files (an upsert's: its writers' and any merged ones), the writers' alone (the
        #: ``input``), and the keys it deletes by key (``input``: stored as deletes)
        self.stores_changelog = True
        self.new_files: pa.Table | None = None
        self.input_files: pa.Table | None = None
        self.input_deletes: pa.Table | None = None
        #: rows of the writers' files that the ``input`` changelog leaves out, as an upsert never writes them: a row
        #: that lost to a later row of its key in the same commit, and an update's before-image (``rowkind.field``)
        self.input_dropped = Marks({})

    def state(self, latest: Snapshot | None) -> frozenset[str]:
        return state_of(live_in(self.store, latest, self.schema, self.buckets))

    def _changes(self, live: pa.Table, marks: dict[BucketKey, Marks], schema: TableSchema) -> VectorChanges:
        """Write each bucket's new vector file (its live vectors plus ``marks``) and say what the commit changes."""
        removed: list[pa.Table] = []
        added: list[DataFile] = []
        bks = bucket_keys_of(live, schema)
        live_paths = set(ents.paths(ents.data_files(live)))
        removes_live = any(path in live_paths for mark in marks.values() for path in mark.by_file)
        for bk, mark in marks.items():
            if not mark.by_file:
                continue
            here = live.filter(pa.array([b == bk for b in bks], pa.bool_()))
            old_dv = ents.vector_files(here)
            data_paths = set(ents.paths(ents.data_files(here)))
            vectors = load_vectors(self.io, old_dv, data=ents.data_files(here), live=latest_data(self.store))
            merged: dict[str, np.ndarray] = {}
            for path, vec in vectors.items():
                if path in data_paths:  # a vector of a file no longer live is dropped with its file
                    merged[path] = deleted_positions(self.io, vec)
            for path, parts in mark.by_file.items():
                merged[path] = sorted_unique(np.concatenate([merged.get(path, np.zeros(0, np.int64)), *parts]))
            blobs = [(p, pa.array(v, pa.int64())) for p, v in sorted(merged.items())]
            added.append(self._write_vectors(bk, blobs, schema))
            if old_dv.num_rows:
                removed.append(old_dv)
        removed_t = ents.concat_entries(removed) if removed else ents.empty_entries_for(schema)
        added_t = ents.added_entries_for(added, schema)
        stored = self._changelog(live, marks, schema)
        changelog = None if stored is None else ents.added_entries_for([stored], schema)
        return VectorChanges(removed_t, added_t, state_of(live), changelog, removes_live)

    def _changelog(self, live: pa.Table, marks: dict[BucketKey, Marks], schema: TableSchema) -> DataFile | None:
        """With a ``changelog-producer``, store the plan's change rows (:mod:`lakefmt.rewrite.keys.changelog`)."""
        producer = schema.table_options.changelog_producer
        if producer == "none" or not self.stores_changelog:
            return None
        if producer == "input":
            self._k += 1
            path = layout.changelog_file_path(self.writer_id, self._k - 1)
            self.written.append(path)
            inputs = self.input_files if self.input_files is not None else ents.empty_entries_for(schema)
            dropped = {p: sorted_unique(np.concatenate(parts)) for p, parts in self.input_dropped.by_file.items()}
            return store_input(
                self.io, self.store, schema, new=inputs, deleted_keys=self.input_deletes, path=path, dropped=dropped
            )
        by_path: dict[str, np.ndarray] = {}
        for mark in marks.values():
            for path, parts in mark.by_file.items():
                by_path[path] = sorted_unique(np.concatenate([by_path.get(path, np.zeros(0, np.int64)), *parts]))
        new = self.new_files if self.new_files is not None else ents.empty_entries_for(schema)
        self._k += 1
        path = layout.changelog_file_path(self.writer_id, self._k - 1)
        self.written.append(path)
        return store_changelog(
            self.io, self.store, schema, old=ents.data_files(live), new=new, marks=by_path, path=path
        )

    def _write_vectors(self, bk: BucketKey, blobs: list[tuple[str, pa.Array]], schema: TableSchema) -> DataFile:
        values, bucket = bk
        partition = dict(zip(schema.partition_keys, values, strict=True))
        self._k += 1
        self.written.append(vector_file_path(schema, partition, bucket, self.writer_id, self._k - 1))
        return write_vector_file(self.io, schema, partition, bucket, blobs, self.writer_id, self._k - 1)

    def _mark_keys(
        self,
        live: pa.Table,
        keys: pa.Table,
        wanted: list[BucketKey],
        marks: dict[BucketKey, Marks],
        schema: TableSchema,
    ) -> int:
        """Mark the live rows of ``keys`` (``wanted``: each key's partition and bucket) in ``marks``; how many."""
        marked = 0
        for bk in sorted(set(wanted), key=repr):
            these = keys.filter(pa.array([w == bk for w in wanted], pa.bool_()))
            found = self._find(live, bk, probe_of(these, schema.primary_keys), schema, [])
            matched = found.table()
            if matched.num_rows:
                dead = pc.unique(
                    pc.add(pc.multiply(matched.column(FILE).cast(pa.int64()), 1 << 40), matched.column(POS))
                )
                matched = pa.table(
                    {FILE: pc.shift_right(dead, 40).cast(pa.int32()), POS: pc.bit_wise_and(dead, (1 << 40) - 1)}
                )
                UpsertPlanner._mark_rows(marks.setdefault(bk, Marks({})), matched, found.paths)
                marked += matched.num_rows
        return marked

    def _find(self, live: pa.Table, bk: BucketKey, probe: Probe, schema: TableSchema, extra: list[str]) -> Found:
        """The live rows of bucket ``bk`` that hold a probed key (:class:`lakefmt.rewrite.keys.find.KeyFinder`)."""
        return self.finder.find(live, bk, probe, schema, extra)


class UpsertPlanner(Planner):
    """Plans an upsert's commit: the writers' files hold the new rows (at most one per key each, in commit order);
    for each key, every other live row is marked deleted: the older versions in the bucket's files, and the
    earlier of two new rows (with ``sequence.field``, the row of the smaller sequence value loses, the new row
    when the live row's value is larger; ties: the new row wins; a null value is smaller than any other).

    ``against_live=False`` (an overwrite of a key table, which replaces the old rows anyway) only settles the
    new rows among themselves. ``deletes``: keys whose live rows the same commit marks deleted.

    With the table option ``rowkind.field`` (:mod:`lakefmt.spec.keys.rowkind`) the new rows are changes: a key's
    winning row that is a delete marks the key's live row as an upsert would, and is marked deleted itself (no
    delete row is ever live); a row to ignore (an update's before-image) takes no part and is marked deleted."""

    def __init__(
        self,
        io: FileIO,
        store: MetaStore,
        schema: TableSchema,
        *,
        against_live: bool = True,
        deletes: pa.Table | None = None,
    ) -> None:
        super().__init__(io, store, schema)
        self.against_live = against_live
        self.stores_changelog = against_live  # an overwrite's changes are derived from the files it replaces
        #: keys (the key columns, conformed) whose live rows this commit deletes too, planned with the new rows on
        #: the snapshot it lands on (:func:`lakefmt.rewrite.keys.upsert.apply_key_changes`); none of them is a new row's
        self.deletes = deletes
        #: per data file, the live rows that a new row of their key lost to (``sequence.field``) in the last plan
        self.kept_live = Marks({})

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        schema = self.schema if latest is None else self.store.schema_for(latest)
        tables = [self.store.manifest(m.file_name) for m in added]
        new = ents.data_files(ents.adds(ents.concat_entries(tables))) if tables else ents.empty_entries_for(schema)
        self.new_files = self.input_files = new
        self.input_deletes = self.deletes
        self.input_dropped = Marks({})
        self.kept_live = Marks({})
        seq = schema.table_options.sequence_field
        if seq in schema.primary_keys:  # the same value for every version of a key: ties alone, the later wins
            seq = None
        rowkind = schema.table_options.rowkind_field
        columns = list(dict.fromkeys([*schema.primary_keys, *([seq] if seq else []), *([rowkind] if rowkind else [])]))
        new_bks = bucket_keys_of(new, schema)
        deleting = key_buckets(self.deletes, schema) if self.deletes is not None else []
        self.buckets = set(new_bks) | set(deleting)
        live = live_in(self.store, latest, schema, self.buckets) if self.against_live else None
        marks: dict[BucketKey, Marks] = {}
        extra = [seq] if seq else []
        # the new files' lookups need no index built here: they have key index files
        indexed = (indexed_column(schema) is not None or hashed_columns(schema) is not None) and not extra
        for bk in sorted(set(new_bks), key=repr):
            mark = marks.setdefault(bk, Marks({}))
            mine = new.filter(pa.array([b == bk for b in new_bks], pa.bool_()))
            new_paths = ents.paths(mine)
            rows = []
            for i in range(mine.num_rows):
                entry = mine.slice(i, 1)
                keys = read_columns(self.io, self.store, entry, schema, columns)
                if not indexed:  # the next upsert's lookup: built now
                    file_index(self.io, self.store, entry, schema, extra, read=keys)
                pos = np.arange(keys.num_rows, dtype=np.int64)
                rows.append(
                    keys.append_column(POS, pa.array(pos)).append_column(
                        FILE, pa.array(np.full(len(pos), i, np.int32))
                    )
                )
            incoming = pa.concat_tables(rows).combine_chunks()
            if rowkind:  # an update's before-image is no version of its key: out of the settling, and never live
                kinds = row_kinds(incoming.column(rowkind), schema.table_options)
                self._mark_rows(mark, incoming.filter(pa.array(kinds == IGNORE)), new_paths)
                self._mark_rows(self.input_dropped, incoming.filter(pa.array(kinds == IGNORE)), new_paths)
                incoming = incoming.filter(pa.array(kinds != IGNORE))
            order = pa.array(np.arange(incoming.num_rows, dtype=np.int64))
            incoming = incoming.append_column(ORDER, order)
            probe = probe_of(incoming, schema.primary_keys)
            if len(probe.hashes) > 1 and bool(np.any(probe.hashes[1:] == probe.hashes[:-1])):
                winners = dedup_keys(incoming, schema.primary_keys, seq)  # some key twice (or a hash collision)
                won = np.zeros(incoming.num_rows, dtype=bool)
                won[winners.column(ORDER).to_numpy()] = True
                lost = np.nonzero(~won)[0]
                if len(lost):
                    self._mark_rows(mark, incoming.take(pa.array(lost)), new_paths)
                    self._mark_rows(self.input_dropped, incoming.take(pa.array(lost)), new_paths)
                probe = probe_of(winners, schema.primary_keys)
            else:
                winners = incoming  # every key once: each new row wins among the new ones
            if rowkind:  # a winning delete is never live; it still replaces (deletes) the key's live row below
                dead = row_kinds(winners.column(rowkind), schema.table_options) == DELETE
                self._mark_rows(mark, winners.filter(pa.array(dead)), new_paths)
            if live is None:
                continue
            found = self._find(live, bk, probe, schema, extra)
            matched = found.table()
            if matched.num_rows == 0:
                continue
            if seq is None:
                self._mark_rows(mark, matched, found.paths)
                continue
            probe_rows = matched.column("probe")
            old_seq = pa.chunked_array(found.extra).combine_chunks()
            new_seq = winners.column(seq).take(probe_rows)
            # the live row stays if its value is larger (null is the smallest value; ties: the new row wins)
            old_wins = pc.or_(
                pc.fill_null(pc.greater(old_seq, new_seq), False), pc.and_(pc.is_valid(old_seq), pc.is_null(new_seq))
            )
            # a live row this commit removes anyway (a MERGE's own marks) does not compete with the new row
            old_wins = pc.and_(old_wins, pa.array(~self._removed_anyway(matched, found.paths)))
            self._mark_rows(mark, matched.filter(pc.invert(old_wins)), found.paths)
            self._mark_rows(self.kept_live, matched.filter(old_wins), found.paths)
            beaten = winners.take(probe_rows).filter(old_wins)
            if beaten.num_rows:
                self._mark_rows(mark, beaten, new_paths)
        if self.deletes is not None and live is not None:
            self._mark_keys(live, self.deletes, deleting, marks, schema)
        return self._changes(live if live is not None else new.slice(0, 0), marks, schema)

    def _removed_anyway(self, rows: pa.Table, paths: list[str]) -> np.ndarray:
        """Which live ``rows`` (their files indexing ``paths``) this commit removes whatever the new rows hold:
        none for an upsert."""
        return np.zeros(rows.num_rows, dtype=bool)

    @staticmethod
    def _mark_rows(mark: Marks, rows: pa.Table, paths: list[str]) -> None:
        files = rows.column(FILE).to_numpy()
        pos = rows.column(POS).to_numpy()
        for i in np.flatnonzero(np.bincount(files)):
            mark.add(paths[int(i)], pos[files == i])


class DeleteKeysPlanner(Planner):
    """Plans a delete by key on a key table: the live row of each key given is marked deleted (keys with no live
    row are skipped)."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema, keys: pa.Table) -> None:
        super().__init__(io, store, schema)
        self.keys = self.input_deletes = keys
        self.deleted = 0  #: rows the last plan marks

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        schema = self.schema if latest is None else self.store.schema_for(latest)
        wanted = key_buckets(self.keys, schema)
        self.buckets = set(wanted)
        live = live_in(self.store, latest, schema, self.buckets)
        marks: dict[BucketKey, Marks] = {}
        self.deleted = self._mark_keys(live, self.keys, wanted, marks, schema)
        return self._changes(live, marks, schema)


class DeleteWherePlanner(Planner):
    """Plans a merge-on-read delete by filter: every live row of the table where ``filter`` is true is marked
    deleted. Files are pruned by partition values and statistics; a file that may hold a match is read (only the
    columns the filter needs), whole, so positions are exact."""

    def __init__(self, io: FileIO, store: MetaStore, schema: TableSchema, filter: pc.Expression) -> None:
        super().__init__(io, store, schema)
        self.filter = filter
        self.deleted = 0  #: rows the last plan marks

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        schema = self.schema if latest is None else self.store.schema_for(latest)
        self.deleted = 0
        if latest is None:
            self.buckets = set()
            return self._changes(ents.empty_entries_for(schema), {}, schema)
        live = ents.live_entries(self.store, latest)
        data = ents.data_files(live)
        candidates = prune_entries(data, self.filter, schema, self.store.schema)
        self.buckets = set(bucket_keys_of(candidates, schema))
        mine = [bk in self.buckets for bk in bucket_keys_of(live, schema)]
        live = live.filter(pa.array(mine, pa.bool_()))
        vectors = load_vectors(
            self.io, ents.vector_files(live), data=ents.data_files(live), live=latest_data(self.store)
        )
        columns = referenced_columns(self.filter, schema.arrow_schema) or [schema.arrow_schema.names[0]]
        marks: dict[BucketKey, Marks] = {}
        for i, (path, bk) in enumerate(zip(ents.paths(candidates), bucket_keys_of(candidates, schema), strict=True)):
            rows = read_columns(self.io, self.store, candidates.slice(i, 1), schema, list(columns))
            numbered = rows.append_column(POS, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
            where = numbered.filter(self.filter).column(POS).to_numpy()
            if path in vectors and len(where):
                where = where[~member(where, deleted_positions(self.io, vectors[path]))]
            if len(where):
                marks.setdefault(bk, Marks({})).add(path, where)
                self.deleted += len(where)
        return self._changes(live, marks, schema)
