"""Incremental reads through compactions: what a range of snapshots added, with COMPACT snapshots taken for
what they are, moves of rows that were already there, so that no row is read twice and none is lost.

A compaction in the range is seen, per partition, in one of three ways:

* it merged only files added within the range: a move of rows the range added, kept as it is (its inputs leave
  the added set, its outputs join it);
* it merged only files from before the range: it added no row, skipped;
* it merged both: its outputs hold rows from before the range, so it is skipped and the in-range inputs stay
  in the added set (the snapshots that added them are in the range, so their files are still there); each
  output remembers those inputs, and a later commit in the range that removes an output (an overwrite, a
  row-level delete) removes them too.

:func:`through_compactions` rewrites the deltas of a range accordingly; the caller then nets them out (ADD minus
DELETE, the last entry of a path deciding).

The third case cannot be read file by file on a table with deletion vectors: the in-range inputs are no longer
live, so neither the rows their vectors had deleted before the compaction nor those later commits deleted through
the compaction's outputs are masked. :class:`lakefmt.read.scan.Scan` reads such a range from the change feed
instead (:mod:`lakefmt.read.net`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import CommitKind, Snapshot, TableSchema

__all__ = ["added_between", "through_compactions"]


def _part_key(part: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((part or {}).items(), key=lambda kv: kv[0]))


def _parts(table: pa.Table) -> list[tuple[tuple[str, Any], ...]]:
    if ents.PARTITION not in table.column_names:
        return [()] * table.num_rows
    return [_part_key(p) for p in table.column(ents.PARTITION).to_pylist()]


def through_compactions(
    deltas: Sequence[tuple[CommitKind, pa.Table]], mixed: list[bool] | None = None
) -> list[pa.Table]:
    """The delta entries of consecutive snapshots (oldest first, with their kinds), with each COMPACT snapshot's
    entries kept, dropped or turned into the removals it stands for, as the module's docstring says. ``mixed``
    (a list) gets True appended when a compaction merged files the range added with older ones."""
    if not any(kind is CommitKind.COMPACT for kind, _ in deltas):
        return [t for _, t in deltas]
    out: list[pa.Table] = []
    added: set[str] = set()  # paths the range has added so far (and not removed)
    stands_for: dict[str, set[str]] = {}  # a skipped compaction's output -> the in-range files it merged
    for kind, delta in deltas:
        if kind is CommitKind.COMPACT:
            out.extend(_compaction(delta, added, stands_for, mixed))
            continue
        dels = ents.deletes(delta)
        extra: set[str] = set()
        for path in ents.paths(dels):
            added.discard(path)
            for moved in stands_for.pop(path, ()):
                if moved in added:
                    extra.add(moved)
                    added.discard(moved)
        out.append(delta)
        if extra:  # removals of the in-range files a removed output stood for: their ADDs are earlier in ``out``
            earlier = ents.adds(ents.concat_entries(out))
            hit = earlier.filter(pc.is_in(earlier.column(ents.PATH), value_set=pa.array(sorted(extra), pa.string())))
            out.append(ents.as_deletes(hit))
        added.update(ents.paths(ents.adds(delta)))
    return out


def _compaction(
    delta: pa.Table, added: set[str], stands_for: dict[str, set[str]], mixed: list[bool] | None
) -> list[pa.Table]:
    """One COMPACT snapshot's delta, partition by partition: kept where it moved only in-range files."""
    adds, dels = ents.adds(delta), ents.deletes(delta)
    add_parts, del_parts = _parts(adds), _parts(dels)
    del_paths, add_paths = ents.paths(dels), ents.paths(adds)
    keep_parts = []
    for part in dict.fromkeys(del_parts + add_parts):
        ins = [p for p, k in zip(del_paths, del_parts, strict=True) if k == part]
        outs = [p for p, k in zip(add_paths, add_parts, strict=True) if k == part]
        if ins and all(p in added for p in ins):  # a move of rows the range added
            keep_parts.append(part)
            added.difference_update(ins)
            added.update(outs)
            continue
        merged = {p for p in ins if p in added}
        for p in ins:
            merged.update(stands_for.pop(p, ()))
        if merged:
            for o in outs:
                stands_for[o] = set(merged)
            if mixed is not None:
                mixed.append(True)
    if not keep_parts:
        return []
    if len(keep_parts) == len(set(add_parts) | set(del_parts)):
        return [delta]
    wanted = set(keep_parts)
    mask = pa.array([k in wanted for k in _parts(delta)], pa.bool_())
    return [delta.filter(mask)]


def added_between(
    store: MetaStore, start: int, end: Snapshot, schema: TableSchema, mixed: list[bool] | None = None
) -> pa.Table:
    """The entries of the files snapshots ``start+1 .. end`` added and did not delete again within the range, a
    compaction's moves followed (:func:`through_compactions`: no row is read twice), paths checked. A path a
    restore added again after its DELETE counts as added. ``mixed``: as for :func:`through_compactions`."""
    deltas = []
    for sid in range(start + 1, end.id + 1):
        snap = end if sid == end.id else store.snapshot(sid)
        if mixed is not None and snap.properties.get("lakefmt.operation") == "restore":
            mixed.append(True)  # its files hold rows from before the range: on a vector table, read from the feed
        parts = [store.manifest(m.file_name) for m in store.manifest_list(snap.delta_manifest_list)]
        if parts:
            deltas.append((snap.commit_kind, ents.concat_entries(parts)))
    tables = through_compactions(deltas, mixed)
    if not tables:
        return ents.empty_entries_for(schema)
    added = ents.net_added(tables)
    ents.check_data_paths(added, f"a manifest of snapshots {start + 1}..{end.id}")
    return added
