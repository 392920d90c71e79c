"""MERGE INTO for any table, with deltalake's builder: ``Table.merge(source, predicate, source_alias=,
target_alias=)`` returns a :class:`TableMerger`; its ``when_*`` methods add clauses, evaluated in the order given
(the first whose condition holds applies to a row), and :meth:`TableMerger.execute` runs it as one commit and
returns a :class:`MergeReport`.

Execution: the target's live files are pruned by the source's key ranges (each equi-join key's min and max in the
source, against each file's statistics: a file the statistics cannot rule out is read), the files left are read
(the rows their deletion vectors delete are not target rows), the rows are computed in Arrow
(:mod:`lakefmt.rewrite.merge.rows`), and the commit lands them (:mod:`lakefmt.rewrite.merge.commit`). With a
``when_not_matched_by_source_*`` clause every live file is read. A concurrent commit that removed a file the merge
changes, or deleted one of its rows, makes it fail with :class:`RewriteConflictError`, unless only compactions
did: then it is planned and run once more on the new snapshot. Appends landing meanwhile never conflict (Delta's
WriteSerializable); their rows are not seen by the merge.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import KeyTableError, MergeError, RewriteConflictError, SchemaMismatchError
from lakefmt.meta import entries as ents
from lakefmt.read.masks import deleted_positions, load_vectors
from lakefmt.read.plan import prune_entries
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target, compacted_away, read_checked
from lakefmt.rewrite.merge.commit import commit_copy_on_write, commit_marks
from lakefmt.rewrite.merge.reads import MergeReads
from lakefmt.rewrite.merge.rows import (
    FILE,
    POS,
    Clause,
    MergeSpec,
    check_clause,
    compute_changes,
    key_pairs,
    target_columns,
    target_filter,
)
from lakefmt.spec import Snapshot, TableSchema
from lakefmt.spec.filters import all_of
from lakefmt.spec.keys.rowkind import UPSERT, row_kinds
from lakefmt.write.conform import repeated_names
from lakefmt.write.writer import as_tables

__all__ = ["MergeReport", "TableMerger", "merge"]


@dataclass(frozen=True)
class MergeReport:
    """What a MERGE did (deltalake's metric names). ``num_target_rows_copied``: rows rewritten unchanged
    (copy-on-write); ``snapshot_id``: the snapshot it committed (None: it changed nothing). Reads as a dict too:
    ``report["num_target_rows_updated"]``, :meth:`to_dict`."""

    num_source_rows: int
    num_target_rows_inserted: int
    num_target_rows_updated: int
    num_target_rows_deleted: int
    num_target_rows_copied: int
    num_output_rows: int
    num_target_files_added: int
    num_target_files_removed: int
    num_target_files_scanned: int
    num_target_files_skipped_during_scan: int
    snapshot_id: int | None

    def to_dict(self) -> dict[str, Any]:
        """The report as a plain dict."""
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        """The metric names."""
        return list(self.__dataclass_fields__)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get(self, key: str, default: Any = None) -> Any:
        """A metric by name, or ``default``."""
        return getattr(self, key) if key in self.__dataclass_fields__ else default


class TableMerger:
    """A MERGE being built (deltalake's ``TableMerger``): add clauses with the ``when_*`` methods (each returns the
    merger), then :meth:`execute`. Conditions and values are SQL text over the source's and the target's columns,
    qualified by ``source_alias`` and ``target_alias`` (docs/filters.md; :mod:`lakefmt.spec.sql.bind`)."""

    def __init__(
        self,
        table: Targetable,
        source: Any,
        predicate: str,
        *,
        source_alias: str | None = None,
        target_alias: str | None = None,
    ) -> None:
        if not isinstance(predicate, str) or not predicate.strip():
            raise MergeError("merge needs a predicate: SQL text such as 't.id = s.id'")
        for name, alias in (("source_alias", source_alias), ("target_alias", target_alias)):
            if alias is not None and (not isinstance(alias, str) or not alias.isidentifier()):
                raise MergeError(f"{name} must be a plain name such as 's', got {alias!r}")
        if source_alias is not None and target_alias is not None and source_alias.lower() == target_alias.lower():
            raise MergeError(f"source_alias and target_alias are both {source_alias!r}")
        self._target = as_target(table)
        _check_table(self._target.schema())
        self._source = _source_table(source)
        self._predicate, self._aliases = predicate, (source_alias, target_alias)
        self._clauses: list[Clause] = []
        # the condition checked now (columns, aliases, an equality to join on), before anything is read
        key_pairs(self._spec(), self._source.schema, self._target.schema().arrow_schema)

    def _spec(self) -> MergeSpec:
        return MergeSpec(self._predicate, self._aliases[0], self._aliases[1], tuple(self._clauses))

    def _add(self, clause: Clause) -> TableMerger:
        if clause.predicate is not None and (not isinstance(clause.predicate, str) or not clause.predicate.strip()):
            raise MergeError(f"{clause.method}: predicate must be SQL text, got {clause.predicate!r}")
        if clause.kind.endswith(("update", "insert")) and clause.updates is not None and (
            not isinstance(clause.updates, Mapping) or not clause.updates
        ):
            raise MergeError(f"{clause.method}: updates must be a non-empty dict of column -> SQL expression")
        for col, text in (clause.updates or {}).items():
            if not isinstance(col, str) or not isinstance(text, str):
                raise MergeError(f"{clause.method}: updates must map column names to SQL text, got {col!r}: {text!r}")
        check_clause(self._spec(), clause, self._source.schema, self._target.schema().arrow_schema)
        self._clauses.append(clause)
        return self

    def when_matched_update(self, updates: Mapping[str, str], predicate: str | None = None) -> TableMerger:
        """Update matched target rows (where ``predicate`` holds): ``updates`` maps target columns to SQL
        expressions (``{"x": "s.x + t.x"}``); the other columns keep their values."""
        return self._add(Clause("matched_update", predicate, dict(updates) if updates is not None else {}))

    def when_matched_update_all(self, predicate: str | None = None, except_cols: Sequence[str] | None = None
                                ) -> TableMerger:
        """Update matched target rows (where ``predicate`` holds) with every column of their source row (by name;
        ``except_cols`` keep their target values)."""
        return self._add(Clause("matched_update", predicate, None, tuple(except_cols or ())))

    def when_matched_delete(self, predicate: str | None = None) -> TableMerger:
        """Delete matched target rows (where ``predicate`` holds)."""
        return self._add(Clause("matched_delete", predicate))

    def when_not_matched_insert(self, updates: Mapping[str, str], predicate: str | None = None) -> TableMerger:
        """Insert source rows that match no target row (where ``predicate``, over the source, holds): ``updates``
        maps target columns to SQL expressions over the source; the other columns are null."""
        return self._add(Clause("not_matched_insert", predicate, dict(updates) if updates is not None else {}))

    def when_not_matched_insert_all(self, predicate: str | None = None, except_cols: Sequence[str] | None = None
                                    ) -> TableMerger:
        """Insert source rows that match no target row (where ``predicate`` holds), every column by name
        (``except_cols`` are left null)."""
        return self._add(Clause("not_matched_insert", predicate, None, tuple(except_cols or ())))

    def when_not_matched_by_source_update(self, updates: Mapping[str, str], predicate: str | None = None
                                          ) -> TableMerger:
        """Update target rows that no source row matches (where ``predicate``, over the target, holds)."""
        return self._add(Clause("by_source_update", predicate, dict(updates) if updates is not None else {}))

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> TableMerger:
        """Delete target rows that no source row matches (where ``predicate``, over the target, holds)."""
        return self._add(Clause("by_source_delete", predicate))

    def execute(self) -> MergeReport:
        """Run the MERGE as one commit (``lakefmt.operation=merge``) and report what it did. The snapshot records
        the ON condition (``lakefmt.operation.predicate``) and the report's row counts (``lakefmt.metric.<name>``:
        ``num_source_rows``, ``num_target_rows_inserted``, ``_updated``, ``_deleted``, ``_copied``,
        ``num_output_rows``), which :meth:`lakefmt.Table.history` shows as ``operation_metrics``."""
        if not self._clauses:
            raise MergeError("a merge needs at least one when_* clause")
        spec = self._spec()
        for attempt in (1, 2):
            latest = self._target.latest_snapshot()
            try:
                return _run(self._target, spec, self._source, latest)
            except RewriteConflictError as exc:
                if attempt == 2 or not compacted_away(self._target, latest, exc.gone):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover


def merge(table: Targetable, source: Any, predicate: str, *, source_alias: str | None = None,
          target_alias: str | None = None) -> TableMerger:
    """:meth:`lakefmt.Table.merge`: a :class:`TableMerger` of ``source`` (any Arrow data) into ``table``."""
    return TableMerger(table, source, predicate, source_alias=source_alias, target_alias=target_alias)


def _check_table(schema: TableSchema) -> None:
    engine = schema.table_options.merge_engine
    if schema.has_primary_key and engine != "deduplicate":
        raise KeyTableError(
            f"merge on a key table needs merge-engine=deduplicate, this table has merge-engine={engine}: a MERGE "
            "writes whole rows, which the table's engine would fold again; use upsert"
        )


def _source_table(source: Any) -> pa.Table:
    if hasattr(source, "to_arrow") and not isinstance(source, pa.Table):
        source = source.to_arrow()  # polars, a lakefmt scan
    try:
        parts = list(as_tables(source))
    except SchemaMismatchError as exc:
        raise SchemaMismatchError(f"merge source: {exc}") from None
    if not parts:
        raise SchemaMismatchError("merge source: no data (not even a schema)")
    twice = repeated_names(parts[0].schema.names)
    if twice:
        raise SchemaMismatchError(f"merge source: column(s) {', '.join(map(repr, twice))} appear twice; a column "
                                  "must be named once")
    try:
        return pa.concat_tables(parts).combine_chunks()
    except pa.ArrowInvalid as exc:
        raise SchemaMismatchError(f"merge source: its parts have different schemas ({exc})") from None


def _prune_filter(spec: MergeSpec, source: pa.Table, schema: pa.Schema) -> pc.Expression | bool | None:
    """The target rows a match needs, by each key's range in the source (False: no key can match)."""
    keys, _ = key_pairs(spec, source.schema, schema)
    parts = []
    for t, s in keys:
        f = schema.field(t)
        if pa.types.is_floating(f.type) or pa.types.is_nested(f.type) or source.num_rows == 0:
            continue  # NaN orders above everything in statistics: no pruning on floats
        try:
            mm = pc.min_max(source.column(s).cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        lo, hi = mm["min"], mm["max"]
        if not lo.is_valid:
            return False  # every source key is null: nothing matches
        parts.append((pc.field(t) >= lo) & (pc.field(t) <= hi))
    if source.num_rows == 0:
        return False
    only_target = target_filter(spec, source.schema, schema)
    if only_target is not None:
        parts.append(only_target)
    return all_of(parts)


def _run(target: RewriteTarget, spec: MergeSpec, source: pa.Table, latest: Snapshot | None) -> MergeReport:
    schema = target.store.schema_for(latest) if latest is not None else target.schema()
    _check_table(schema)
    arrow = schema.arrow_schema
    live = ents.live_entries(target.store, latest) if latest is not None else ents.empty_entries_for(schema)
    data = ents.data_files(live)
    flt = None if spec.has("by_source") else _prune_filter(spec, source, arrow)
    read_filter = flt if isinstance(flt, pc.Expression) else None
    # no key can match (no source row, or only null keys): nothing is read, and no row added meanwhile matters
    candidates = data.slice(0, 0) if flt is False else prune_entries(data, read_filter, schema, target.store.schema)
    reads = MergeReads(latest, candidates, read_filter, schema,
                       appends_conflict=not schema.has_primary_key and flt is not False)
    vectors = load_vectors(target.io, ents.vector_files(live), data=data) if schema.deletion_vectors else {}
    columns = target_columns(spec, source.schema, arrow)
    rows, seen = _read(target, candidates, schema, vectors, columns)
    changes = compute_changes(spec, source, rows, arrow)
    files = changes.removed.column(FILE).to_numpy()
    touched = _distinct(files)
    removed = _split(files, changes.removed.column(POS).to_numpy(), touched)  # positions, per touched file
    homes = candidates.take(pa.array(touched, pa.int64()))
    copied = 0
    params = {"predicate": spec.predicate}
    counts = {"num_source_rows": source.num_rows, "num_target_rows_inserted": changes.inserted,
              "num_target_rows_updated": changes.updated, "num_target_rows_deleted": changes.deleted}
    if schema.deletion_vectors:
        marks = dict(zip(ents.paths(homes), removed, strict=True))
        seen_marked = {p: seen[p] for p in marks if p in seen}
        known = frozenset(ents.paths(data)) if schema.has_primary_key else frozenset()
        if schema.has_primary_key:
            _check_unique_keys(changes.written, schema)
            _check_row_kinds(changes.written, schema)
        snap = commit_marks(target, schema, homes, marks, seen_marked, changes.written, reads, known,
                            parameters=params, metrics={**counts, "num_target_rows_copied": 0,
                                                        "num_output_rows": changes.written.num_rows})
        added = int(changes.written.num_rows > 0)
        removed_files = 0
    else:
        kept = _Kept(target, homes, schema, dict(enumerate(removed)))
        snap = commit_copy_on_write(
            target, homes, kept, changes.written, reads, parameters=params,
            metrics=lambda: {**counts, "num_target_rows_copied": kept.rows,
                             "num_output_rows": changes.written.num_rows + kept.rows},
        )
        copied = kept.rows
        added = _files_added(target, snap)
        removed_files = len(touched)
    return MergeReport(
        num_source_rows=source.num_rows,
        num_target_rows_inserted=changes.inserted,
        num_target_rows_updated=changes.updated,
        num_target_rows_deleted=changes.deleted,
        num_target_rows_copied=copied,
        num_output_rows=changes.written.num_rows + copied,
        num_target_files_added=added if snap is not None else 0,
        num_target_files_removed=removed_files if snap is not None else 0,
        num_target_files_scanned=candidates.num_rows,
        num_target_files_skipped_during_scan=data.num_rows - candidates.num_rows,
        snapshot_id=snap.id if snap is not None else None,
    )


def _check_unique_keys(written: pa.Table, schema: TableSchema) -> None:
    """On a key table, refuse two written rows of one key (two source rows inserting it, or updates moving rows
    onto it): one would silently replace the other."""
    keys = list(schema.primary_keys)
    if written.num_rows < 2:
        return
    counts = written.select(keys).group_by(keys).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        first = {k: dup.column(k)[0].as_py() for k in keys}
        raise MergeError(
            f"{dup.num_rows} key(s) would get more than one row from this merge, all with the same key (the first: "
            f"{first}): two source rows inserting one key, or updates moving rows onto one key; on a key table a "
            "key holds one row: make the source's rows unique on the key; nothing was committed"
        )


def _check_row_kinds(written: pa.Table, schema: TableSchema) -> None:
    """On a key table with ``rowkind.field``, refuse written rows whose row kind is not a row's (a delete, or an
    update's before-image): the table would read them as changes, and the merge's counts would say otherwise."""
    field = schema.table_options.rowkind_field
    if field is None or written.num_rows == 0:
        return
    missing = written.column(field).null_count
    if missing:
        raise MergeError(
            f"{missing} row(s) this merge writes have no row kind: column {field!r} (the table's rowkind.field) is "
            "null in them (the source has no such column, or the clauses set none); every row must say what it is; "
            "nothing was committed"
        )
    kinds = row_kinds(written.column(field), schema.table_options)
    wrong = int(np.count_nonzero(kinds != UPSERT))
    if wrong:
        value = written.column(field).filter(pa.array(kinds != UPSERT))[0].as_py()
        raise MergeError(
            f"{wrong} row(s) this merge writes have a row kind that is not a row's (the first: {value!r} in column "
            f"{field!r}, the table's rowkind.field): a delete or an update's before-image would be read as a change "
            "of its key, not as the row the merge inserts or updates. Set the row kind to an insert or an update's "
            "after-image in the merge, delete with when_matched_delete, or write changes with upsert; nothing was "
            "committed"
        )


def _split(files: np.ndarray, positions: np.ndarray, touched: np.ndarray) -> list[np.ndarray]:
    """``positions`` grouped by ``files``, one sorted array per file of ``touched`` (the distinct files, sorted)."""
    order = np.argsort(files, kind="stable")
    bounds = [*np.searchsorted(files[order], touched, side="left").tolist(), len(files)]
    return [np.sort(positions[order[a:b]]) for a, b in itertools.pairwise(bounds)]


def _distinct(values: np.ndarray) -> np.ndarray:
    """``values`` sorted, each once (by sorting: numpy's hash-based unique is slow on large arrays)."""
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))] if len(out) else out


def _files_added(target: RewriteTarget, snap: Snapshot | None) -> int:
    if snap is None:
        return 0
    delta = [target.store.manifest(m.file_name) for m in target.store.manifest_list(snap.delta_manifest_list)]
    return ents.adds(ents.concat_entries(delta)).num_rows if delta else 0


class _Kept:
    """The rows of the files the merge rewrites (``rewritten``) that it leaves as they are, read again whole, file
    by file, without the ``removed`` positions (``removed``: positions by index into ``rewritten``); counts them."""

    def __init__(self, target: RewriteTarget, rewritten: pa.Table, schema: TableSchema,
                 removed: dict[int, np.ndarray]) -> None:
        self.target, self.rewritten, self.schema, self.removed = target, rewritten, schema, removed
        self.rows = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        offsets = [0] * self.rewritten.num_rows
        for i, batch in read_checked(self.target, self.rewritten, self.schema, what="merge"):
            start = offsets[i]
            offsets[i] += batch.num_rows
            gone = self.removed.get(i)
            if gone is not None:
                lo, hi = np.searchsorted(gone, [start, start + batch.num_rows])
                if hi > lo:
                    keep = np.ones(batch.num_rows, dtype=bool)
                    keep[gone[lo:hi] - start] = False
                    batch = batch.filter(pa.array(keep))
            self.rows += batch.num_rows
            if batch.num_rows:
                yield batch


def _read(
    target: RewriteTarget, entries: pa.Table, schema: TableSchema, vectors: Mapping[str, Any],
    columns: Sequence[str] | None,
) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """The live rows of the files of ``entries`` (``columns`` of them; None: all), with their file (index into
    ``entries``) and position, and the positions each file's vector deleted."""
    arrow = schema.arrow_schema if columns is None else pa.schema([schema.arrow_schema.field(c) for c in columns])
    paths = ents.paths(entries)
    seen: dict[str, np.ndarray] = {}
    masks: dict[int, np.ndarray] = {}
    for i, p in enumerate(paths):
        if p in vectors:
            seen[p] = deleted_positions(target.io, vectors[p])
            masks[i] = seen[p]
    batches: list[pa.RecordBatch] = []
    owners: list[int] = []
    for i, batch in read_checked(target, entries, schema, what="merge", columns=columns):
        batches.append(batch)
        owners.append(i)
    table = pa.Table.from_batches(batches, schema=arrow).combine_chunks() if batches else arrow.empty_table()
    lens = np.array([b.num_rows for b in batches], dtype=np.int64)
    file_of = np.repeat(np.array(owners, dtype=np.int32), lens)
    # a row's position in its file: its row number less the number of its file's first row (batches come in file
    # order, each file's whole)
    if len(lens):
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        seen_file: dict[int, int] = {}
        for o, st in zip(owners, starts.tolist(), strict=True):
            seen_file.setdefault(o, st)
        first_row = np.array([seen_file[o] for o in owners], dtype=np.int64)
        pos = np.arange(table.num_rows, dtype=np.int64) - np.repeat(first_row, lens)
    else:
        pos = np.zeros(0, dtype=np.int64)
    table = table.append_column(FILE, pa.array(file_of)).append_column(POS, pa.array(pos))
    if masks:
        keep = np.ones(table.num_rows, dtype=bool)
        for i, deleted in masks.items():
            rows_of = np.flatnonzero(file_of == i)
            keep[rows_of[np.isin(pos[rows_of], deleted)]] = False
        table = table.filter(pa.array(keep))
    return table, seen
