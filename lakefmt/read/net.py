"""The rows a range of snapshots added that are still live, from the change feed: what an incremental scan of a
table with deletion vectors reads when a compaction in its range merged files the range added with older ones
(:mod:`lakefmt.read.incremental`: those files can no longer be read with the right vectors).

The feed of snapshots ``start+1 .. end`` (:func:`lakefmt.read.changes.change_batches`) is replayed in commit order:

* on a key table, each key's last change in the range decides: an insert or an update's post-image is the key's
  live row at ``end``, added in the range; a delete means no row (a key changed in the range and deleted again, or
  a row from before the range deleted);
* on a table without a key, rows are matched whole: a delete takes back an equal row the range inserted before it
  (if none, the deleted row was older than the range); what remains is the range's live rows. Equal rows are
  interchangeable, so which of two equal rows a delete took back does not change the result's rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.io import FileIO
from lakefmt.meta.store import MetaStore
from lakefmt.read.change_labels import DELETE, INSERT, POSTIMAGE, PREIMAGE
from lakefmt.read.changes import CHANGE_TYPE, change_batches, multiset_minus
from lakefmt.spec import TableSchema

__all__ = ["net_rows"]

_SEQ = "__lakefmt_seq"


def net_rows(io: FileIO, store: MetaStore, start: int, end: int, schema: TableSchema) -> pa.Table:
    """The rows snapshots ``start+1 .. end`` added that ``end`` still holds, as ``schema``'s columns, in commit
    order (see the module's docstring)."""
    names = schema.arrow_schema.names
    batches = change_batches(io, store, start, end, schema=schema, input_rows=False)  # what the table holds
    parts = [p.select([*names, CHANGE_TYPE]) for p in batches]
    if not parts:
        return schema.arrow_schema.empty_table()
    if schema.primary_keys:
        return _last_per_key(pa.concat_tables(parts), schema)
    live = schema.arrow_schema.empty_table()
    older = schema.arrow_schema.empty_table()  # rows from before the range the range deleted (so far)
    for part in parts:  # in commit order; within a snapshot the deletes come before the inserts
        kinds = part.column(CHANGE_TYPE)
        gone = part.filter(pc.is_in(kinds, pa.array([DELETE, PREIMAGE]))).select(names).cast(schema.arrow_schema)
        new = part.filter(pc.is_in(kinds, pa.array([INSERT, POSTIMAGE]))).select(names).cast(schema.arrow_schema)
        if gone.num_rows:
            before, live = multiset_minus(gone, live)
            older = pa.concat_tables([older, before])
        if new.num_rows and older.num_rows:  # a row from before the range brought back (a restore): not added
            older, new = multiset_minus(older, new)
        live = pa.concat_tables([live, new])
    return live


def _last_per_key(changes: pa.Table, schema: TableSchema) -> pa.Table:
    keys = list(schema.primary_keys)
    numbered = changes.append_column(_SEQ, pa.array(np.arange(changes.num_rows, dtype=np.int64)))
    last = numbered.select([*keys, _SEQ]).group_by(keys, use_threads=False).aggregate([(_SEQ, "max")])
    at = np.sort(last.column(f"{_SEQ}_max").to_numpy())
    rows = changes.take(pa.array(at, pa.int64()))
    kept = rows.filter(pc.is_in(rows.column(CHANGE_TYPE), pa.array([INSERT, POSTIMAGE])))
    kept = kept.select(schema.arrow_schema.names).cast(schema.arrow_schema)
    # a key whose first change in the range deleted its row from before the range, and whose last one brought
    # that very row back (a restore): the row is not one the range added
    first = numbered.select([*keys, _SEQ]).group_by(keys, use_threads=False).aggregate([(_SEQ, "min")])
    firsts = changes.take(pa.array(np.sort(first.column(f"{_SEQ}_min").to_numpy()), pa.int64()))
    older = firsts.filter(pc.is_in(firsts.column(CHANGE_TYPE), pa.array([DELETE, PREIMAGE])))
    if older.num_rows == 0 or kept.num_rows == 0:
        return kept
    _, back = multiset_minus(older.select(schema.arrow_schema.names).cast(schema.arrow_schema), kept)
    return back  # each side keeps its order
