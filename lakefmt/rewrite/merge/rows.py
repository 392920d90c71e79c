"""What a MERGE does to rows, computed in Arrow: which target rows it removes (updated or deleted) and which rows
it writes (updated and inserted), from the source rows and the target rows it read.

The ON condition is split into its conjuncts: equalities between a target and a source column are the keys of a
hash join (``pyarrow.Table.join``) on keys brought to one form in which equal bytes mean ``=`` is true
(:mod:`lakefmt.rewrite.merge.keys`: a null key never matches, as in SQL, nor a NaN, and ``-0.0`` matches ``0.0``,
as pyarrow's ``equal`` says); the other conjuncts filter the joined pairs. A pair matches when the whole
condition is true. Then, as in SQL MERGE:

* a matched target row takes the first ``when_matched_*`` clause whose condition is true (none: it stays);
  a target row matched by two source rows is refused (:class:`MergeMultipleMatchesError`) when a matched clause
  exists, unless the only one is an unconditional delete (the row goes either way);
* a source row matching no target row takes the first ``when_not_matched_insert*`` clause whose condition is true;
* a target row (among those read) matched by no source row takes the first ``when_not_matched_by_source_*``
  clause whose condition is true.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakefmt.errors import InvalidPredicateError, MergeError, MergeMultipleMatchesError, SchemaMismatchError
from lakefmt.rewrite.merge.keys import join_keys
from lakefmt.spec.filters import all_of
from lakefmt.spec.sql.bind import bind_sql
from lakefmt.spec.sql.tree import Call, Expr, Ref, conjuncts, parse_sql, refs
from lakefmt.write.conform import conform

__all__ = [
    "FILE", "POS", "Clause", "ClauseKind", "MergeSpec", "RowChanges", "check_clause", "compute_changes", "key_matches",
    "key_pairs", "target_columns", "target_filter",
]

FILE = "__lakefmt_file"  #: the target rows' column naming their file (index into the entries read)
POS = "__lakefmt_pos"  #: the target rows' column holding their position in their file
_S, _T = "\x00s:", "\x00t:"  # prefixes of the source's and target's columns once joined
_SROW, _TROW = "\x00s_row", "\x00t_row"

ClauseKind = Literal["matched_update", "matched_delete", "not_matched_insert", "by_source_update", "by_source_delete"]
_SIDES = {"matched": "st", "not_matched": "s", "by_source": "t"}


@dataclass(frozen=True)
class Clause:
    """One WHEN clause: its kind, its condition (SQL text, None: always), and for an update or insert the values
    it sets (target column -> SQL expression; None: every column from the source column of the same name, less
    ``except_cols``)."""

    kind: ClauseKind
    predicate: str | None = None
    updates: Mapping[str, str] | None = None
    except_cols: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.kind.rsplit("_", 1)[0]

    @property
    def method(self) -> str:
        """The builder method that made it (for messages)."""
        base = {
            "matched_update": "when_matched_update",
            "matched_delete": "when_matched_delete",
            "not_matched_insert": "when_not_matched_insert",
            "by_source_update": "when_not_matched_by_source_update",
            "by_source_delete": "when_not_matched_by_source_delete",
        }[self.kind]
        return base + ("_all" if self.updates is None and self.kind.endswith(("update", "insert")) else "")


@dataclass(frozen=True)
class MergeSpec:
    """A MERGE as asked: the ON condition, the aliases and the clauses in order."""

    predicate: str
    source_alias: str | None
    target_alias: str | None
    clauses: tuple[Clause, ...]

    def has(self, group: str) -> bool:
        return any(c.group == group for c in self.clauses)


@dataclass
class RowChanges:
    """The rows a MERGE changes: ``removed`` holds the :data:`FILE` and :data:`POS` of the target rows it updates or
    deletes; ``written`` the rows it writes (updated, then inserted), in the target schema."""

    removed: pa.Table
    written: pa.Table
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class _Names:
    """Resolves ``alias.column`` and bare names to the joined tables' columns, for the sides a clause may see."""

    def __init__(self, spec: MergeSpec, source: pa.Schema, target: pa.Schema) -> None:
        self.spec, self.source, self.target = spec, source, target

    def side_of(self, ref: Ref, text: str, sides: str = "st") -> tuple[str, pa.Field]:
        q = ref.qualifier
        found: list[tuple[str, pa.Field]] = []
        for side, alias, schema in (("s", self.spec.source_alias, self.source), ("t", self.spec.target_alias,
                                                                                   self.target)):
            if q is not None and (alias is None or q.lower() != alias.lower()):
                continue
            f = _field(schema, ref.name)
            if f is not None:
                found.append((side, f))
        if q is not None and not any(
            a is not None and q.lower() == a.lower() for a in (self.spec.source_alias, self.spec.target_alias)
        ):
            aliases = [a for a in (self.spec.source_alias, self.spec.target_alias) if a]
            raise InvalidPredicateError(
                f"{text!r}: unknown alias {q!r} in {ref}; the aliases are {', '.join(aliases) or 'not set'} "
                "(source_alias=, target_alias=)"
            )
        if not found:
            raise InvalidPredicateError(f"{text!r}: no column {ref}")
        if len(found) > 1:
            raise InvalidPredicateError(f"{text!r}: column {ref} is in both the source and the target: qualify it")
        side, f = found[0]
        if side not in sides:
            what = "source" if side == "s" else "target"
            raise MergeError(f"{text!r}: refers to the {what} column {ref}, which this clause cannot see")
        return side, f

    def resolver(self, text: str, sides: str = "st"):  # type: ignore[no-untyped-def]
        def resolve(ref: Ref) -> tuple[pc.Expression, pa.DataType]:
            side, f = self.side_of(ref, text, sides)
            return pc.field((_S if side == "s" else _T) + f.name), f.type

        return resolve

    def bind(self, text: str, sides: str, what: str, *, condition: bool = True) -> tuple[pc.Expression, set[str]]:
        """``text`` bound over the prefixed columns, and the prefixed columns it reads."""
        expr = parse_sql(text)
        used = {(_S if s == "s" else _T) + f.name for s, f in (self.side_of(r, text, sides) for r in refs(expr))}
        return bind_sql(expr, self.resolver(text, sides), text, values=True, condition=condition), used


def _field(schema: pa.Schema, name: str) -> pa.Field | None:
    if name in schema.names:
        return schema.field(name)
    matches = [f for f in schema if f.name.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def key_pairs(spec: MergeSpec, source: pa.Schema, target: pa.Schema) -> tuple[list[tuple[str, str]], list[Expr]]:
    """The ON condition's equi-join keys (target column, source column) and its other conjuncts."""
    names = _Names(spec, source, target)
    expr = parse_sql(spec.predicate)
    keys: list[tuple[str, str]] = []
    rest: list[Expr] = []
    for c in conjuncts(expr):
        if isinstance(c, Call) and c.op == "=" and all(isinstance(a, Ref) for a in c.args):
            a, b = (names.side_of(r, spec.predicate) for r in c.args if isinstance(r, Ref))
            if {a[0], b[0]} == {"s", "t"}:
                t, s = (a, b) if a[0] == "t" else (b, a)
                keys.append((t[1].name, s[1].name))
                continue
        for r in refs(c):
            names.side_of(r, spec.predicate)
        rest.append(c)
    if not keys:
        raise MergeError(
            f"{spec.predicate!r}: a MERGE condition needs at least one equality between a target and a source "
            "column (t.id = s.id), joined with AND to the rest"
        )
    return keys, rest


def check_clause(spec: MergeSpec, clause: Clause, source: pa.Schema, target: pa.Schema) -> None:
    """Bind ``clause``'s condition and values now (columns, aliases, the sides it may see, types), on no rows, so
    that a bad clause is refused before anything is read."""
    names = _Names(spec, source, target)
    sides = _SIDES[clause.group]
    empty = pa.table({**{_S + f.name: pa.array([], f.type) for f in source},
                      **{_T + f.name: pa.array([], f.type) for f in target}})
    if clause.predicate is not None:
        _holds(empty, names.bind(clause.predicate, sides, clause.method)[0], clause.method)
    if not clause.kind.endswith("delete"):
        _values(names, clause, empty, target, source, sides)


def target_columns(spec: MergeSpec, source: pa.Schema, target: pa.Schema) -> list[str]:
    """The target columns the MERGE reads to decide and compute its rows: the columns its conditions and values
    name, and every column when a clause keeps some target values (an update that sets only some columns, or an
    update_all from a source that lacks some)."""
    names = _Names(spec, source, target)
    lacking = any(_field(source, f.name) is None for f in target)  # an update_all keeps those target values
    keep_all = any(
        c.kind.endswith("update") and (c.updates is not None or c.except_cols or lacking) for c in spec.clauses
    )
    if keep_all:
        return list(target.names)
    used: set[str] = set()
    texts = [spec.predicate, *(c.predicate for c in spec.clauses if c.predicate)]
    texts += [v for c in spec.clauses for v in (c.updates or {}).values()]
    for text in texts:
        for r in refs(parse_sql(text)):
            side, f = names.side_of(r, text)
            if side == "t":
                used.add(f.name)
    return [n for n in target.names if n in used]


def target_filter(spec: MergeSpec, source: pa.Schema, target: pa.Schema) -> pc.Expression | None:
    """The ON condition's conjuncts that name only target columns (``t.dt = '2026-11-01'``), as a filter over the
    target's own column names: a target row where it is not true matches nothing, so it prunes files."""
    names = _Names(spec, source, target)
    _, rest = key_pairs(spec, source, target)
    parts = []
    for c in rest:
        sides = {names.side_of(r, spec.predicate)[0] for r in refs(c)}
        if sides == {"t"}:

            def plain(ref: Ref) -> tuple[pc.Expression, pa.DataType]:
                f = names.side_of(ref, spec.predicate)[1]
                return pc.field(f.name), f.type

            parts.append(bind_sql(c, plain, spec.predicate, values=True))
    return all_of(parts)


def _evaluate(table: pa.Table, columns: Mapping[str, pc.Expression], what: str) -> pa.Table:
    try:
        return ds.dataset(table).to_table(columns=dict(columns))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPredicateError(f"{what}: cannot evaluate ({exc})") from None


def _holds(table: pa.Table, expr: pc.Expression, what: str) -> np.ndarray:
    out = _evaluate(table, {"v": expr}, what).column("v")
    if not pa.types.is_boolean(out.type) and not pa.types.is_null(out.type):
        raise InvalidPredicateError(f"{what}: is of type {out.type}, not a condition")
    return np.asarray(pc.fill_null(out.cast(pa.bool_()), False).to_numpy(zero_copy_only=False), dtype=bool)


def _prefixed(table: pa.Table, prefix: str) -> pa.Table:
    return table.rename_columns([prefix + n for n in table.column_names])


def compute_changes(spec: MergeSpec, source: pa.Table, target_rows: pa.Table, schema: pa.Schema) -> RowChanges:
    """The changes of ``spec`` (see the module docstring): ``source`` the source rows, ``target_rows`` the target
    rows read (the table's columns, plus :data:`FILE` and :data:`POS`), ``schema`` the table's."""
    names = _Names(spec, source.schema, schema)
    keys, rest = key_pairs(spec, source.schema, schema)
    src = _prefixed(source, _S).append_column(_SROW, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    tgt = _prefixed(target_rows.select([n for n in schema.names if n in target_rows.column_names]), _T).append_column(
        _TROW, pa.array(np.arange(target_rows.num_rows, dtype=np.int64))
    )
    pairs = key_matches(keys, source, target_rows, what=repr(spec.predicate))
    if rest and pairs.num_rows:
        cond = rest[0] if len(rest) == 1 else Call("and", tuple(rest))
        bound = bind_sql(cond, names.resolver(spec.predicate), spec.predicate, values=True)
        joined = _joined(src, tgt, pairs)
        pairs = pairs.filter(pa.array(_holds(joined, bound, spec.predicate)))
    s_rows = pairs.column(_SROW).to_numpy()
    t_rows = pairs.column(_TROW).to_numpy()
    matched_sources = s_rows
    matched_clauses = [c for c in spec.clauses if c.group == "matched"]
    if matched_clauses and len(t_rows) and not (
        len(matched_clauses) == 1 and matched_clauses[0].kind == "matched_delete" and
        matched_clauses[0].predicate is None
    ):
        counts = np.bincount(t_rows, minlength=target_rows.num_rows)
        if counts.max(initial=0) > 1:
            raise MergeMultipleMatchesError(
                f"{int((counts > 1).sum())} target row(s) are matched by more than one source row (a row is "
                f"matched {int(counts.max())} times) under {spec.predicate!r}; a MERGE cannot choose which one "
                "changes it: make the source's rows unique on the condition; nothing was committed"
            )
    out = RowChanges(pa.table({FILE: pa.array([], pa.int32()), POS: pa.array([], pa.int64())}),
                     schema.empty_table())
    removed: list[np.ndarray] = []
    written: list[pa.Table] = []
    # matched pairs
    if matched_clauses and len(t_rows):
        if matched_clauses[0].kind == "matched_delete" and len(matched_clauses) == 1:  # an unconditional delete
            keep = np.concatenate(([True], np.diff(np.sort(t_rows)) != 0))
            t_rows = np.sort(t_rows)[keep]
            s_rows = np.zeros(len(t_rows), dtype=np.int64)  # any source row: the delete reads none
        joined = _joined(src, tgt, pa.table({_SROW: s_rows, _TROW: t_rows}))
        rm, wr, up, dl = _apply(names, matched_clauses, joined, schema, source.schema, "st")
        removed.append(t_rows[rm])
        written.append(wr)
        out.updated += up
        out.deleted += dl
    # source rows matching nothing
    inserts = [c for c in spec.clauses if c.group == "not_matched"]
    if inserts:
        alone = np.ones(source.num_rows, dtype=bool)
        alone[matched_sources] = False
        rows = src.filter(pa.array(alone))
        if rows.num_rows:
            _, wr, ins, _ = _apply(names, inserts, rows, schema, source.schema, "s")
            written.append(wr)
            out.inserted += ins
    # target rows matched by nothing
    by_source = [c for c in spec.clauses if c.group == "by_source"]
    if by_source:
        alone = np.ones(target_rows.num_rows, dtype=bool)
        alone[t_rows] = False
        idx = np.flatnonzero(alone)
        rows = tgt.take(pa.array(idx))
        if rows.num_rows:
            rm, wr, up, dl = _apply(names, by_source, rows, schema, source.schema, "t")
            removed.append(idx[rm])
            written.append(wr)
            out.updated += up
            out.deleted += dl
    gone = np.sort(np.concatenate(removed)) if removed else np.zeros(0, np.int64)
    out.removed = target_rows.select([FILE, POS]).take(pa.array(gone, pa.int64()))
    out.written = pa.concat_tables([schema.empty_table(), *written]) if written else schema.empty_table()
    return out


def key_matches(keys: Sequence[tuple[str, str]], source: pa.Table, target_rows: pa.Table, *, what: str) -> pa.Table:
    """The pairs of a source row and a target row (their row numbers, columns :data:`_SROW` and :data:`_TROW`) whose
    key columns (``keys``: target column, source column) are all equal under SQL ``=`` (:mod:`lakefmt.rewrite
    .merge_keys`): a hash join, the source (usually the smaller side) building the table, the target probing it."""
    kn = [f"\x00k{i}" for i in range(len(keys))]
    left: dict[str, pa.ChunkedArray] = {}
    right: dict[str, pa.ChunkedArray] = {}
    for name, (t, s) in zip(kn, keys, strict=True):
        left[name], right[name] = join_keys(source.column(s), target_rows.column(t), what=f"{what}: {t} = {s}")
    left[_SROW] = pa.chunked_array([np.arange(source.num_rows, dtype=np.int64)], pa.int64())
    right[_TROW] = pa.chunked_array([np.arange(target_rows.num_rows, dtype=np.int64)], pa.int64())
    return pa.table(right).join(pa.table(left), kn, join_type="inner", use_threads=False).select([_SROW, _TROW])


def _joined(src: pa.Table, tgt: pa.Table, pairs: pa.Table) -> pa.Table:
    """The source and target columns of each pair, side by side."""
    s = src.take(pairs.column(_SROW))
    t = tgt.take(pairs.column(_TROW))
    return pa.table({**{n: s.column(n) for n in s.column_names}, **{n: t.column(n) for n in t.column_names}})


def _apply(
    names: _Names, clauses: Sequence[Clause], rows: pa.Table, schema: pa.Schema, source: pa.Schema, sides: str
) -> tuple[np.ndarray, pa.Table, int, int]:
    """Each row of ``rows`` takes the first of ``clauses`` whose condition holds: which rows are removed (a mask),
    the rows written, and how many were updated (or inserted) and deleted."""
    free = np.ones(rows.num_rows, dtype=bool)
    removed = np.zeros(rows.num_rows, dtype=bool)
    written: list[pa.Table] = []
    changed = deleted = 0
    for clause in clauses:
        if not free.any():
            break
        if clause.predicate is None:
            take = free.copy()
        else:
            expr, _ = names.bind(clause.predicate, sides, clause.method)
            take = free & _holds(rows, expr, f"{clause.method} predicate {clause.predicate!r}")
        free &= ~take
        n = int(take.sum())
        if not n:
            continue
        if clause.kind.endswith("delete"):
            removed |= take
            deleted += n
            continue
        removed |= take
        changed += n
        written.append(_values(names, clause, rows.filter(pa.array(take)), schema, source, sides))
    return removed, pa.concat_tables(written) if written else schema.empty_table(), changed, deleted


def _values(names: _Names, clause: Clause, rows: pa.Table, schema: pa.Schema, source: pa.Schema, sides: str
            ) -> pa.Table:
    """The rows an update or insert clause writes for ``rows``, in the target schema."""
    exprs: dict[str, pc.Expression] = {}
    if clause.updates is None:
        skip = {c.lower() for c in clause.except_cols}
        for f in schema:
            if f.name.lower() in skip:
                continue
            src = _field(source, f.name)
            if src is None and ("t" in sides or f.nullable):  # Delta's rule: an update keeps, an insert nulls
                continue
            if src is None:
                raise SchemaMismatchError(
                    f"{clause.method}: the source has no column {f.name!r}, which is not nullable: every row "
                    f"inserted needs a value (source columns: {', '.join(source.names)})"
                )
            exprs[f.name] = pc.field(_S + src.name)
    else:
        for col, text in clause.updates.items():
            f = _field(schema, col)
            if f is None:
                raise SchemaMismatchError(f"{clause.method}: the target has no column {col!r}")
            if not isinstance(text, str):
                raise TypeError(f"{clause.method}: the value of {col!r} must be SQL text, got {type(text).__name__}")
            exprs[f.name] = names.bind(text, sides, clause.method, condition=False)[0]
    for f in schema:  # an update keeps what it does not set; an insert leaves it null
        if f.name not in exprs:
            exprs[f.name] = pc.field(_T + f.name) if "t" in sides else pc.scalar(pa.scalar(None, f.type))
    out = _evaluate(rows, {f.name: exprs[f.name] for f in schema}, clause.method)
    try:
        return conform(out, schema)
    except SchemaMismatchError as exc:
        raise SchemaMismatchError(f"{clause.method}: {exc}") from None
