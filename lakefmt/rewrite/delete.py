"""Row-level delete: remove the rows matching a filter, as one rewrite commit.

Three steps, so that an engine can run the middle one in its tasks (the Spark connector does):

1. :func:`plan_delete` (driver): the live files of the latest snapshot that may hold matching rows, by
   partition values and column min/max (the scan's pruning). Among them, a file whose statistics prove that
   *every* row matches is dropped by metadata alone (:attr:`DeletePlan.dropped`); the others must be read
   (:attr:`DeletePlan.candidates`).
2. :func:`delete_in_files` (a task, any process): reads candidate files through
   :func:`lakefmt.read.files.read_inputs`. A file where no row matches is left as it is; one where every row
   matches is removed; any other is rewritten without the matching rows through the table's writer.
3. :func:`commit_delete` (driver): one snapshot of kind OVERWRITE, with the snapshot property
   ``lakefmt.operation=delete``, that removes every dropped or rewritten file and adds the rewritten ones
   (:class:`~lakefmt.commit.kinds.RewriteProducer`: each removed file must still be live, or nothing lands).

Which rows go: those where the filter is **true**. A row where it is false *or null* stays, as in SQL's
``DELETE ... WHERE``: ``id > 5`` never deletes a row whose ``id`` is null. :func:`kept_rows` is that rule as an
expression.

Proving "every row matches" from metadata is done by pyarrow's expression simplifier, as pruning does: each file
gets a guarantee (its partition values, ``lo <= c <= hi`` from min/max, or ``c is null`` for an all-null column),
and a file goes by metadata only when the rule above, simplified under the guarantee, keeps nothing. The proof is
tried only when every column the filter may touch has a null count of 0 (or only nulls) and known min/max (a float
column holding NaN has none), and never for a filter with a NaN literal (the simplifier orders NaN above every
number); otherwise the file is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.binpack import pack
from lakefmt.commit.kinds import RewriteProducer
from lakefmt.errors import RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.read.bounds import SchemaLookup, column_bounds
from lakefmt.read.files import read_inputs
from lakefmt.read.plan import may_hold
from lakefmt.read.scan import Scan
from lakefmt.rewrite.base import OPERATION as BASE_OPERATION
from lakefmt.rewrite.base import RewriteTarget, Targetable, as_target, compacted_away, publish, read_checked
from lakefmt.spec import CommitMessage, Snapshot, TableSchema, filters
from lakefmt.spec.filters import has_nan_literal, referenced_columns

__all__ = [
    "OPERATION",
    "DeletePlan",
    "DeleteResult",
    "Rewriter",
    "check_filter",
    "commit_delete",
    "delete_in_files",
    "delete_rows",
    "kept_rows",
    "plan_delete",
]

#: the snapshot property a row-level delete sets (``lakefmt.operation``) and its value
OPERATION = (BASE_OPERATION, "delete")


def check_filter(filter: Any, schema: pa.Schema) -> pc.Expression:
    """``filter`` checked against ``schema`` before anything is read (:func:`lakefmt.spec.filters.check_filter`):
    ``TypeError`` for what is not an expression, :class:`~lakefmt.errors.UnsupportedFilterError` for a reference
    by position, :class:`InvalidPredicateError` for an unknown column or a type error."""
    return filters.check_filter(filter, schema, "delete filter")


def kept_rows(filter: pc.Expression) -> pc.Expression:
    """The rows a delete by ``filter`` keeps: where ``filter`` is false or null (SQL's DELETE removes only the rows
    where its predicate is true)."""
    return ~filter | filter.is_null()


@dataclass(frozen=True)
class DeletePlan:
    """What a delete will do, planned on one snapshot (``snapshot``; None: the table has no commit yet).

    ``dropped``: ADD entries of the files every row of which matches, by their statistics (removed unread);
    ``candidates``: ADD entries of the files that may hold matching rows and must be read."""

    filter: pc.Expression
    snapshot: Snapshot | None
    dropped: pa.Table
    candidates: pa.Table
    #: the schema the filter's names were resolved under: the tasks read and write under it (a rename landing
    #: meanwhile must not give a name in the filter another column)
    schema: TableSchema | None = None
    #: the filter as the user gave it (SQL text, or the expression printed): what history shows
    predicate: str = ""

    @property
    def nothing_to_do(self) -> bool:
        """No file can hold a matching row."""
        return bool(self.dropped.num_rows == 0 and self.candidates.num_rows == 0)

    @property
    def candidate_bytes(self) -> int:
        """The candidates' bytes on storage (what step 2 reads)."""
        return int(pc.sum(self.candidates.column(ents.FILE_SIZE)).as_py() or 0)

    def groups(self, target_bytes: int) -> list[pa.Table]:
        """The candidates in groups of about ``target_bytes`` on storage (one per engine task), the files of a
        partition next to each other, so that a task's rewritten rows of one partition go into few files."""
        if target_bytes < 1:
            raise ValueError(f"target_bytes must be positive, got {target_bytes!r}")
        order = list(range(self.candidates.num_rows))
        if ents.PARTITION in self.candidates.column_names:
            parts = [repr(sorted((p or {}).items())) for p in self.candidates.column(ents.PARTITION).to_pylist()]
            order.sort(key=lambda i: parts[i])
        sizes = self.candidates.column(ents.FILE_SIZE).to_pylist()
        bins = pack(order, lambda i: sizes[i], target_bytes)
        return [self.candidates.take(pa.array(b, pa.int64())) for b in bins]


@dataclass(frozen=True)
class DeleteResult:
    """What :func:`delete_in_files` did to its files: ``message`` holds the rewritten files (uncommitted);
    ``rewritten`` the ADD entries of the files read that held matching rows (the commit removes them);
    ``deleted_rows`` how many rows matched; ``files_read`` how many files were read."""

    message: CommitMessage
    rewritten: pa.Table
    deleted_rows: int
    files_read: int


def plan_delete(table: Targetable, filter: str | pc.Expression) -> DeletePlan:
    """Plan a delete of the rows matching ``filter`` (SQL text or a pyarrow expression) on the latest snapshot
    (see the module docstring)."""
    target = as_target(table)
    predicate = filter if isinstance(filter, str) else filters.show(filter) if isinstance(filter, pc.Expression) else ""
    filter = check_filter(filter, target.schema().arrow_schema)
    scan = Scan(target.io, target.store, filter=filter)
    maybe = scan.entries()  # pruned by partition values and min/max, each apart
    # by partition values and min/max together, and the proof (statistics by field id: lakefmt.read.bounds)
    may_match, every_row = _classify(maybe, filter, scan.schema, target.store.schema)
    proved = pa.array(every_row, pa.bool_())
    read = pa.array([m and not p for m, p in zip(may_match, every_row, strict=True)], pa.bool_())
    return DeletePlan(filter, scan.snapshot, maybe.filter(proved), maybe.filter(read), scan.schema, predicate)


def delete_in_files(
    table: Targetable, entries: pa.Table, filter: pc.Expression, *, schema: TableSchema | None = None
) -> DeleteResult:
    """Read the files of ``entries`` (a plan's candidates, or a group of them) and write, through one writer of
    the table, the rows of every file that held a matching row except those rows. A file where nothing matches
    is left out of the result; an error deletes what was written here. ``schema``: the plan's
    (:attr:`DeletePlan.schema`), under which the filter's names are resolved, the files read and the rows written;
    default the table's current schema."""
    target = as_target(table)
    schema = target.schema() if schema is None else schema
    filter = check_filter(filter, schema.arrow_schema)
    with filters.evaluating(filter, "delete filter"):
        counts = _match_counts(target, entries, filter, schema)
    rows = entries.column(ents.ROW_COUNT).to_pylist()
    touched = [i for i, n in enumerate(counts) if n]
    keep = kept_rows(filter)
    partial = [i for i in touched if counts[i] < rows[i]]  # some rows stay: rewrite those files without the others
    with target.new_writer(schema_id=schema.id) as writer:
        if partial:
            rewrite = entries.take(pa.array(partial, pa.int64()))
            for batch in read_inputs(target.io, rewrite, schema, target.store, what="delete", filter=keep):
                writer.write(batch)
        message = writer.prepare_commit()
    rewritten = entries.take(pa.array(touched, pa.int64()))
    return DeleteResult(message, rewritten, sum(counts), entries.num_rows)


def commit_delete(table: Targetable, plan: DeletePlan, results: Sequence[DeleteResult]) -> Snapshot | None:
    """Commit a delete: one OVERWRITE snapshot (``lakefmt.operation=delete``) that removes the plan's dropped
    files and every file the results rewrote, and adds the results' files. Returns it, or None when nothing
    matched. :class:`RewriteConflictError` if a concurrent commit removed one of those files first (nothing
    lands). The results' files are deleted when the commit is known not to have landed, and never otherwise."""
    target = as_target(table)
    messages = [r.message for r in results]
    removed = ents.concat_entries([plan.dropped, *(r.rewritten for r in results)])
    if removed.num_rows == 0:
        target.discard(messages)  # nothing matched: nothing was written either
        return None
    return publish(
        target, RewriteProducer, messages, removed, operation=OPERATION[1], after_commit=target.after_commit,
        parameters={"predicate": plan.predicate} if plan.predicate else None,
    )


#: runs step 2 for a plan (in this process, or in an engine's tasks) and returns what each task did
Rewriter = Callable[[DeletePlan], Sequence[DeleteResult]]


def delete_rows(table: Targetable, filter: str | pc.Expression, *, rewriter: Rewriter | None = None) -> Snapshot | None:
    """:meth:`lakefmt.Table.delete`: plan, rewrite (with ``rewriter``; by default in this process, one writer),
    commit.

    Concurrency (Delta's WriteSerializable): appends committed meanwhile never conflict (their files are not among
    those rewritten, so their rows stay, matching or not). A concurrent commit that removed a file this delete
    rewrites makes it fail with :class:`RewriteConflictError` and nothing lands, unless only compactions removed
    them: a compaction never fails a writer, so the delete is then planned and run once more on the new snapshot
    (the same rows, in the compacted files, plus any appended since); a second such loss is reported. A file that
    was removed and then deleted by an expiration before the delete read it counts the same (it is no longer live).
    """
    target = as_target(table)
    first: TableSchema | None = None
    for attempt in (1, 2):
        plan = plan_delete(target, filter)
        first = first or plan.schema
        if plan.schema is not None and first is not None and plan.schema.id != first.id:
            # the filter's names were resolved under the first plan's schema: another may give them other columns
            raise RewriteConflictError(
                f"the table's schema changed (schema {first.id} -> {plan.schema.id}) while the delete ran; "
                "nothing was deleted: run it again",
                gone=[],
            )
        if plan.nothing_to_do:
            return None
        try:  # a file removed and deleted meanwhile is a conflict when it is read, or else at commit
            if rewriter is None:
                results: Sequence[DeleteResult] = [
                    delete_in_files(target, plan.candidates, plan.filter, schema=plan.schema)
                ]
            else:
                results = rewriter(plan) if plan.candidates.num_rows else []
            return commit_delete(target, plan, results)
        except RewriteConflictError as exc:
            if attempt == 2 or not compacted_away(target, plan.snapshot, exc.gone):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


# -- helpers ------------------------------------------------------------------------------------------------------
def _match_counts(target: RewriteTarget, entries: pa.Table, filter: pc.Expression, schema: TableSchema) -> list[int]:
    """How many rows of each file match ``filter``: one read of the columns it needs over every file (pyarrow
    reads ahead across files, which matters on object stores; every file's rows counted against its entry by
    :func:`~lakefmt.rewrite.base.read_checked`), evaluated in chunks of about :data:`COUNT_CHUNK` rows."""
    counts = [0] * entries.num_rows
    columns = referenced_columns(filter, schema.arrow_schema)
    chunk: list[pa.Table] = []
    size = 0

    def flush() -> None:
        nonlocal chunk, size
        if chunk:
            found = pc.value_counts(pa.concat_tables(chunk).filter(filter).column(_FILE))
            for i, c in zip(found.field("values").to_pylist(), found.field("counts").to_pylist(), strict=True):
                counts[i] += c
        chunk, size = [], 0

    for i, batch in read_checked(target, entries, schema, what="delete", columns=columns):
        tag = pa.repeat(pa.scalar(i, pa.int32()), batch.num_rows)
        chunk.append(pa.Table.from_batches([batch]).append_column(_FILE, tag))
        size += batch.num_rows
        if size >= COUNT_CHUNK:
            flush()
    flush()
    return counts


#: rows evaluated per call of the filter in the counting pass (each call has a fixed cost)
COUNT_CHUNK = 1 << 20
_FILE = "__lakefmt_file"


def _classify(
    entries: pa.Table, filter: pc.Expression, schema: TableSchema, schemas: SchemaLookup | None = None
) -> tuple[list[bool], list[bool]]:
    """For each file of ``entries``, from its partition values and statistics alone: may ``filter`` be true for one
    of its rows (else the delete leaves it alone), and is it proved true for every one (then it goes unread)?
    Unsure answers are "may" and "not proved".

    A column with some nulls among other values is "in range, or null": pyarrow's simplifier uses no disjunction,
    so the file is asked as two cases, in range and null (up to :data:`MAX_CASES` cases per file; past that, such
    columns count as unknown). ``user_id = 42`` thus skips a file whose ``user_id`` spans 100..200 with nulls."""
    n = entries.num_rows
    if n == 0:
        return [], []
    if has_nan_literal(filter):  # the simplifier orders NaN above every number: neither prune nor prove
        return [True] * n, [False] * n
    arrow = schema.arrow_schema
    columns = referenced_columns(filter, arrow)
    known = [_column_guarantees(entries, c, schema, schemas) for c in columns]
    cases: list[pc.Expression] = []  # every file's cases, in order
    owner: list[int] = []  # the file of each case
    first: list[int] = []  # per file: the index of its first case
    exact: list[bool] = []  # per file: one case, and no column the filter touches unknown or partly null
    for i in range(n):
        per_column = [g[i] for g in known]
        alternatives = [alts for alts in per_column if alts]
        count = 1
        for alts in alternatives:
            count *= len(alts)
        if count > MAX_CASES:
            alternatives = [alts for alts in alternatives if len(alts) == 1]
        combos: list[pc.Expression] = [pc.scalar(True)]
        for alts in alternatives:
            combos = [c & a for c in combos for a in alts]
        first.append(len(cases))
        cases += combos
        owner += [i] * len(combos)
        exact.append(all(alts is not None and len(alts) == 1 for alts in per_column))
    may_match = [False] * n
    for i, may in zip(owner, may_hold(filter, arrow, cases), strict=True):
        may_match[i] = may_match[i] or may
    proved = [False] * n
    tried = [i for i in range(n) if exact[i] and may_match[i]]
    if tried:
        may_keep = may_hold(kept_rows(filter), arrow, [cases[first[i]] for i in tried])  # exact: one case
        for i, keeps in zip(tried, may_keep, strict=True):
            proved[i] = not keeps
    return may_match, proved


#: the most cases (combinations of "in range" and "null" for partly null columns) a file is asked as
MAX_CASES = 8


def _column_guarantees(
    entries: pa.Table, column: str, schema: TableSchema, schemas: SchemaLookup | None
) -> list[list[pc.Expression] | None]:
    """Per file, what its metadata says of every value of ``column``, as alternatives that together cover every
    row: ``[c == v]`` (a partition value, or min = max), ``[lo <= c <= hi]``, ``[c is null]``, or, for a column
    with some nulls among other values, ``[lo <= c <= hi, c is null]``. None: nothing is known (no bounds, or NaN)."""
    n = entries.num_rows
    col = pc.field(column)
    if column in schema.partition_keys and ents.PARTITION in entries.column_names:
        values = entries.column(ents.PARTITION).combine_chunks().field(column)
        out: list[list[pc.Expression] | None] = []
        for v in values:
            if not v.is_valid:
                out.append([col.is_null()])
            elif isinstance(v.as_py(), float) and v.as_py() != v.as_py():
                out.append(None)  # a NaN partition value: the simplifier orders NaN above every number
            else:
                out.append([col == v])
        return out
    bounds = column_bounds(entries, column, schema, schemas)  # by field id, in the current type
    if bounds is None:
        return [None] * n
    lows, highs = bounds[0], bounds[1]
    nulls = bounds[2].to_pylist()
    rows = entries.column(ents.ROW_COUNT).to_pylist()
    result: list[list[pc.Expression] | None] = []
    for lo, hi, null_count, row_count in zip(lows, highs, nulls, rows, strict=True):
        if null_count is not None and row_count is not None and null_count >= row_count:
            result.append([col.is_null()])
        elif null_count is None or not lo.is_valid or not hi.is_valid:
            result.append(None)
        else:
            # min == max is one value, unless it is a float zero: Parquet writes a column of zeros as -0.0..+0.0
            # whatever their signs, and is_in tells 0.0 from -0.0, so ``c == -0.0`` would be a false guarantee
            same = lo == hi and not (pa.types.is_floating(lo.type) and lo.as_py() == 0)
            rng = col == lo if same else (col >= lo) & (col <= hi)
            result.append([rng] if null_count == 0 else [rng, col.is_null()])
    return result
