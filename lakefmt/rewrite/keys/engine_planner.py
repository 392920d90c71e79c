"""A key table's merge engine at commit time (``merge-engine`` other than ``deduplicate``).

Writers (``Table.upsert``, ``Table.append``, engine tasks) write the rows they are given as they are, several per
key if so. The commit plans on the snapshot it lands on, bucket by bucket (:class:`MergePlanner`, a variation of
:class:`~lakefmt.rewrite.keys.planners.UpsertPlanner`):

* ``first-row``: of the new rows of a key, all but the first are marked deleted, and all of them when the key has
  a live row (it stays);
* ``partial-update`` and ``aggregation``: the new rows of each key are folded into one (:func:`~lakefmt.rewrite.
  engines.reduce_batch`, in commit order: the files of earlier messages first), combined with the key's live row
  (:func:`~lakefmt.rewrite.keys.engines.merge_with_live`), and written to a new data file of the bucket; the new rows
  and the live row are marked deleted. A key written once, with no live row, keeps its new row as it is (unless a
  column counts: its row is rewritten with the count).

The merged file and the vectors are written while planning: when a concurrent commit changed a touched bucket, the
commit plans again on the new snapshot (:class:`~lakefmt.commit.kinds.KeyedProducer`), so the merge always starts
from the live row it replaces and no update is lost (the files of the plan it dropped become orphans).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakefmt.commit.kinds import VectorChanges
from lakefmt.meta import entries as ents
from lakefmt.rewrite.keys.buckets import FILE, POS, BucketKey, Marks, bucket_keys_of, live_in, read_columns
from lakefmt.rewrite.keys.engines import merge_rows, reduce_batch
from lakefmt.rewrite.keys.lookup import probe_of
from lakefmt.rewrite.keys.planners import UpsertPlanner
from lakefmt.spec import DataFile, ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.keys.merge_engine import DEDUPLICATE, column_functions
from lakefmt.write.writer import TableWriter

__all__ = ["MergePlanner"]

_ROW = "__lakefmt_reduced_row"


class MergePlanner(UpsertPlanner):
    """Plans an upsert's commit under the table's merge engine (see the module); ``deduplicate`` is
    :class:`UpsertPlanner`'s plan."""

    def plan(self, latest: Snapshot | None, schema: TableSchema, added: Sequence[ManifestFileMeta]) -> VectorChanges:
        schema = self.schema if latest is None else self.store.schema_for(latest)
        if schema.table_options.merge_engine == DEDUPLICATE:
            return super().plan(latest, schema, added)
        tables = [self.store.manifest(m.file_name) for m in added]
        new = ents.data_files(ents.adds(ents.concat_entries(tables))) if tables else ents.empty_entries_for(schema)
        self.input_files, self.input_deletes = new, self.deletes
        new_bks = bucket_keys_of(new, schema)
        self.buckets = set(new_bks)
        live = live_in(self.store, latest, schema, self.buckets) if self.against_live else None
        marks: dict[BucketKey, Marks] = {}
        merged: list[pa.Table] = []
        for bk in sorted(self.buckets, key=repr):
            mine = new.filter(pa.array([b == bk for b in new_bks], pa.bool_()))
            rows = self._bucket(schema, bk, mine, live, marks.setdefault(bk, Marks({})))
            if rows is not None and rows.num_rows:
                merged.append(rows)
        data = ents.empty_entries_for(schema)
        if merged:
            files = self._write_merged(pa.concat_tables(merged), schema)
            data = ents.added_entries_for(files, schema)
        self.new_files = ents.concat_entries([new, data])  # a stored changelog's post-images: the merged rows too
        changes = self._changes(live if live is not None else new.slice(0, 0), marks, schema)
        if not merged:
            return changes
        return dataclasses.replace(changes, added=ents.concat_entries([changes.added, data]))

    def _bucket(
        self,
        schema: TableSchema,
        bk: BucketKey,
        mine: pa.Table,
        live: pa.Table | None,
        mark: Marks,
    ) -> pa.Table | None:
        """Mark what the bucket's commit replaces; return the merged rows to write (None: none)."""
        names = schema.arrow_schema.names
        keys = list(schema.primary_keys)
        new_paths = ents.paths(mine)
        parts = []
        for i in range(mine.num_rows):
            rows = read_columns(self.io, self.store, mine.slice(i, 1), schema, names)
            parts.append(
                rows.append_column(POS, pa.array(np.arange(rows.num_rows, dtype=np.int64))).append_column(
                    FILE, pa.array(np.full(rows.num_rows, i, np.int32))
                )
            )
        incoming = pa.concat_tables(parts).combine_chunks()
        reduced = reduce_batch(incoming.select(names), schema)
        numbered = reduced.select(keys).append_column(_ROW, pa.array(np.arange(reduced.num_rows, dtype=np.int64)))
        # each new row's row of ``reduced`` (its key's)
        tagged = incoming.select([*keys, FILE, POS]).join(numbered, keys, join_type="inner", use_threads=False)
        row_of = tagged.column(_ROW).to_numpy()
        engine = schema.table_options.merge_engine
        has_live = np.zeros(reduced.num_rows, dtype=bool)
        live_rows = schema.arrow_schema.empty_table()
        if live is not None:
            found = self._find(live, bk, probe_of(reduced, keys), schema, [])
            matched = found.table()
            if matched.num_rows:
                has_live[matched.column("probe").to_numpy()] = True
                if engine != "first-row":  # the live row is replaced by the merged one
                    self._mark_rows(mark, matched, found.paths)
                    live_rows = self._live_rows(live, schema, matched, found.paths)
        if engine == "first-row":
            first = np.full(reduced.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
            # the first new row of a key: the smallest (file, position) in commit order
            rank = tagged.column(FILE).to_numpy().astype(np.int64) * (1 << 40) + tagged.column(POS).to_numpy()
            np.minimum.at(first, row_of, rank)
            lose = (rank != first[row_of]) | has_live[row_of]
            self._mark_rows(mark, tagged.filter(pa.array(lose)), new_paths)
            return None
        counts = np.bincount(row_of, minlength=reduced.num_rows)
        counting = "count" in column_functions(schema).values()
        rewrite = has_live | (counts > 1) | counting
        if not rewrite.any():
            return None
        self._mark_rows(mark, tagged.filter(pa.array(rewrite[row_of])), new_paths)
        # every new row of the keys rewritten, in commit order, folded with their live rows in one pass (exact
        # under sequence.field: the live row takes its place among the new rows)
        at = "__lakefmt_at"
        flagged = (
            incoming.select(keys)
            .append_column(at, pa.array(np.arange(incoming.num_rows, dtype=np.int64)))
            .join(numbered, keys, join_type="inner", use_threads=False)
        )
        chosen = np.zeros(incoming.num_rows, dtype=bool)
        chosen[flagged.column(at).to_numpy()] = rewrite[flagged.column(_ROW).to_numpy()]
        return merge_rows(live_rows, incoming.select(names).filter(pa.array(chosen)), schema)

    def _live_rows(self, live: pa.Table, schema: TableSchema, matched: pa.Table, paths: list[str]) -> pa.Table:
        """The whole live rows ``matched`` names (file index into ``paths``, position), read from their files."""
        data = ents.data_files(live)
        by_path = {p: i for i, p in enumerate(ents.paths(data))}
        files = matched.column(FILE).to_numpy()
        positions = matched.column(POS).to_numpy()
        out = []
        for f in np.unique(files):
            entry = data.slice(by_path[paths[int(f)]], 1)
            rows = read_columns(self.io, self.store, entry, schema, schema.arrow_schema.names)
            out.append(rows.take(pa.array(positions[files == f])))
        return pa.concat_tables(out) if out else schema.arrow_schema.empty_table()

    def _write_merged(self, rows: pa.Table, schema: TableSchema) -> list[DataFile]:
        """Write the merged rows to new data files of their buckets (not yet listed in any manifest)."""
        writer = TableWriter(self.io, schema, writer_id=f"{self.writer_id}-merge")
        try:
            with writer:
                writer.write(rows)
                files = writer.close_files()
        finally:  # the files it began too: a write whose answer was lost may have landed
            self.written += writer.begun_paths
        return files
