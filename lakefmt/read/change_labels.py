"""Labelling one commit's change rows: which of the rows it deleted and inserted are deletes, inserts, and the two
halves of an update. Shared by the change feed (:mod:`lakefmt.read.changes`), which derives a commit's rows from its
deletion vectors and files, and the ``lookup`` changelog producer (:mod:`lakefmt.rewrite.keys.changelog`), which stores
them when the commit is made: both label the same rows the same way.

A change type is stored as Paimon's row-kind byte (``+I`` 0, ``-U`` 1, ``+U`` 2, ``-D`` 3) and shown by Delta's
name (``insert``, ``update_preimage``, ``update_postimage``, ``delete``) or Paimon's (``+I -U +U -D``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["CHANGE_TYPES", "DELETE", "INSERT", "POSTIMAGE", "PREIMAGE", "ROW_KINDS", "label_changes", "names_of"]

INSERT, PREIMAGE, POSTIMAGE, DELETE = "insert", "update_preimage", "update_postimage", "delete"
#: the change types by their row-kind byte (Paimon's ``RowKind`` values)
CHANGE_TYPES = (INSERT, PREIMAGE, POSTIMAGE, DELETE)
#: Delta's change types -> Paimon's row kinds
ROW_KINDS = {INSERT: "+I", PREIMAGE: "-U", POSTIMAGE: "+U", DELETE: "-D"}


def names_of(codes: np.ndarray | pa.Array, row_kinds: bool = False) -> pa.Array:
    """Row-kind bytes as change-type names (``row_kinds``: Paimon's ``+I -U +U -D``)."""
    names = [ROW_KINDS[t] for t in CHANGE_TYPES] if row_kinds else list(CHANGE_TYPES)
    return pa.array(names, pa.string()).take(pa.array(codes, pa.int8()))


def label_changes(deleted: pa.Table, inserted: pa.Table, keys: Sequence[str]) -> tuple[pa.Table, np.ndarray] | None:
    """One commit's change rows and their row-kind bytes: the deletes, then each update's pre- and post-image
    together (a key deleted and inserted, on a key table), then the inserts. None when there is no row."""
    if deleted.num_rows == 0 and inserted.num_rows == 0:
        return None
    n_del, n_ins = deleted.num_rows, inserted.num_rows
    pre, post = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if keys and n_del and n_ins:
        pre, post = _pairs(deleted, inserted, keys)
    only_del = np.ones(n_del, dtype=bool)
    only_del[pre] = False
    only_ins = np.ones(n_ins, dtype=bool)
    only_ins[post] = False
    paired = np.empty(2 * len(pre), np.int64)
    paired[0::2], paired[1::2] = pre, n_del + post
    dels, inss = np.nonzero(only_del)[0], np.nonzero(only_ins)[0]
    order = np.concatenate([dels, paired, n_del + inss])
    codes = np.concatenate([np.full(len(dels), 3, np.int8), np.tile(np.array([1, 2], np.int8), len(pre)),
                            np.zeros(len(inss), np.int8)])  # fmt: skip
    both = pa.concat_tables([deleted, inserted]).combine_chunks()
    return both.take(pa.array(order, pa.int64())), codes


def _pairs(deleted: pa.Table, inserted: pa.Table, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The updates of a commit: the rows of ``deleted`` (in order) whose key a row of ``inserted`` has, and that
    row (the last one with the key). A hash join; keys of a type Arrow cannot join are matched in Python."""
    at, of = "__lakefmt_deleted", "__lakefmt_inserted"
    try:
        ins = inserted.select(list(keys)).append_column(of, pa.array(np.arange(inserted.num_rows, dtype=np.int64)))
        last = ins.group_by(list(keys), use_threads=False).aggregate([(of, "max")])
        dels = deleted.select(list(keys)).append_column(at, pa.array(np.arange(deleted.num_rows, dtype=np.int64)))
        joined = dels.join(last, keys=list(keys), join_type="inner", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        ins_at = {k: i for i, k in enumerate(_key_tuples(inserted, keys))}
        found = [(i, ins_at[k]) for i, k in enumerate(_key_tuples(deleted, keys)) if k in ins_at]
        return np.array([i for i, _ in found], np.int64), np.array([j for _, j in found], np.int64)
    i = joined.column(at).to_numpy()
    j = joined.column(f"{of}_max").to_numpy()
    order = np.argsort(i, kind="stable")
    return i[order].astype(np.int64), j[order].astype(np.int64)


def _key_tuples(rows: pa.Table, keys: Sequence[str]) -> list[tuple[object, ...]]:
    return list(zip(*(rows.column(k).to_pylist() for k in keys), strict=True))
