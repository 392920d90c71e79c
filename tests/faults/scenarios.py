"""The operations of the crash-point matrix, the history each starts from, and what the table must hold after
it applied exactly once.

Each scenario builds a small table with a known history (every snapshot's rows are modelled here, by hand,
not read back from lakefmt), then names one operation: an append commit, a partition overwrite, a commit that
triggers a full manifest merge, expire, orphan-clean, a one-off ``Table.append``, a compaction, an append that
compacts automatically after it, or a row-level delete; on a key table (rows ``(id, dt, v)``, primary key
``(id, dt)``) a job's upsert commit, a one-off ``Table.upsert``, a delete by key or by filter, a compaction, and
an upsert commit its bucket compaction follows. A commit runs the way a
job does: writer tasks write data files and per-task manifests, then one committer publishes them under a
stable commit user and identifier; recovery runs the whole job again (new files, same rows, same user and
identifier) on a table opened anew, and discards the replay's files when dedup says the first attempt had
landed. Maintenance recovers by running again. A one-off ``Table.append`` has no commit user: after an
unknown outcome (an interrupt, CommitStateUnknownError, a process death) its caller reads the table before
writing the rows again (see :class:`OneOffAppendOp`). A compaction or a delete recovers by running again: neither
can apply twice (see :class:`Compact`, :class:`AutoCompactCommit`, :class:`Delete`).

Module level, so a child process (forkserver or spawn) can import it and run an operation by name.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakefmt
from lakefmt.io import FileIO, file_io_for
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

from .faultio import FaultIO, FaultPlan

__all__ = [
    "KEY_SCHEMA",
    "SCENARIOS",
    "SCHEMA",
    "USER",
    "Commit",
    "Model",
    "Scenario",
    "copy_table",
    "faulty_table",
    "rows_of",
]

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
#: the key tables' rows: primary key (id, dt), partitioned by dt; v tells the versions of a key apart
KEY_SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
USER = "job"  #: the commit user of every committer step (a streaming query, say)

Row = tuple[Any, ...]  #: (id, dt), or (id, dt, v) on a key table
Task = Sequence[Row]


def table_of(rows: Sequence[Row]) -> pa.Table:
    if any(len(r) == 3 for r in rows):
        return pa.table({c: [r[i] for r in rows] for i, c in enumerate(KEY_SCHEMA.names)}, schema=KEY_SCHEMA)
    return pa.table({"id": [r[0] for r in rows], "dt": [r[1] for r in rows]}, schema=SCHEMA)


def rows_of(table: pa.Table) -> Counter[Row]:
    columns = [c for c in KEY_SCHEMA.names if c in table.column_names]  # (id, dt), and v on a key table
    return Counter(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def upserted(rows: Sequence[Row]) -> list[Row]:
    """What survives of ``rows`` written together to a key table: the last row of each key ``(id, dt)``."""
    return list({r[:2]: r for r in rows}.values())


def write_tasks(table: lakefmt.Table, tasks: Sequence[Task]) -> list[lakefmt.CommitMessage]:
    """What the writer tasks of a job do: each writes its rows and returns a commit message.

    They write through their own Table over the same (fault-injecting) FileIO, as Spark's executors do with
    the Table the driver pickled to them (its metadata caches stay behind): the committer's table has not
    seen their manifests and reads them from storage, so those reads are crash points too."""
    executor = lakefmt.Table(table.io, MetaStore(table.io))
    messages = []
    for rows in tasks:
        with executor.new_writer() as writer:
            writer.write(table_of(rows))
            messages.append(writer.prepare_commit())
    return messages


# -- the model ---------------------------------------------------------------------------------------------


@dataclass
class Model:
    """Rows of every retained snapshot (id -> multiset). ``keyed``: the table has the primary key ``(id, dt)``, so
    a write replaces the live row of each of its keys."""

    snapshots: dict[int, Counter[Row]] = field(default_factory=dict)
    keyed: bool = False

    @property
    def latest(self) -> int:
        return max(self.snapshots, default=0)

    def rows(self, snapshot_id: int | None = None) -> Counter[Row]:
        return self.snapshots.get(self.latest if snapshot_id is None else snapshot_id, Counter())

    def commit(self, rows: Counter[Row]) -> None:
        self.snapshots[self.latest + 1] = rows

    def written(self, rows: Counter[Row], new: Sequence[Row]) -> Counter[Row]:
        """``rows`` after writing ``new`` (in order): added, or on a key table upserted (each key's last row)."""
        if not self.keyed:
            return rows + Counter(new)
        live = {r[:2]: r for r in rows.elements()}
        live.update((r[:2], r) for r in new)
        return Counter(live.values())

    def expire(self, retain_max: int) -> None:
        for sid in sorted(self.snapshots)[:-retain_max]:
            del self.snapshots[sid]


# -- steps: the history and the operations -----------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    """A job commit: writer tasks, then ``commit`` (append) or ``overwrite`` by (USER, identifier)."""

    identifier: int
    tasks: tuple[Task, ...]
    overwrite: dict[str, Any] | None = None  #: None: append; {}: whole table; {"dt": v}: one partition

    def run(self, table: lakefmt.Table) -> lakefmt.Snapshot | None:
        messages = write_tasks(table, self.tasks)
        committer = table.new_committer(USER)
        if self.overwrite is None:
            return committer.commit(messages, identifier=self.identifier)
        return committer.overwrite(messages, identifier=self.identifier, partition=self.overwrite or None)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        """Run the job again; a replay that dedup skips deletes its own files (as the Spark sink does)."""
        messages = write_tasks(table, self.tasks)
        committer = table.new_committer(USER)
        if self.overwrite is None:
            snap = committer.commit(messages, identifier=self.identifier)
        else:
            snap = committer.overwrite(messages, identifier=self.identifier, partition=self.overwrite or None)
        if snap is None:
            table.discard(messages)
            return "deduplicated"
        return "committed"

    def apply(self, model: Model) -> None:
        new = [r for task in self.tasks for r in task]  # on a key table: of two rows of a key, the later task's
        rows = model.rows()
        if self.overwrite == {}:
            rows = Counter()
        elif self.overwrite is not None:
            rows = Counter({r: n for r, n in rows.items() if r[1] != self.overwrite["dt"]})
        model.commit(model.written(rows, new))


@dataclass(frozen=True)
class OneOffAppend:
    rows: Task

    def run(self, table: lakefmt.Table) -> Any:
        return table.append(table_of(self.rows))

    def apply(self, model: Model) -> None:
        model.commit(model.written(model.rows(), self.rows))


@dataclass(frozen=True)
class OneOffAppendOp:
    """``Table.append``: a fresh commit user per call, so no dedup can recognise a second attempt. What the
    caller knows is its outcome:

    * it returned: it landed;
    * it raised anything but CommitStateUnknownError: it did not land, and it removed its files;
    * it raised CommitStateUnknownError, was interrupted (``KeyboardInterrupt``), or the process died: the
      outcome is unknown; the rule is that from the moment a publish may have reached storage nothing of the
      commit is deleted, so it may well be live. The caller must look before writing the rows again: it reads
      the table and appends only if its rows are not there (its rows are distinct ids, as a real one-off
      write would check by its own key).

    After a landed append the recovery finishes the expiration the table's retention options run after each
    commit (as the next commit or ``lakefmt expire`` would: it may have been cut short)."""

    rows: Task
    retain_max: int

    def run(self, table: lakefmt.Table) -> Any:
        return table.append(table_of(self.rows))

    def find_rows(self, table: lakefmt.Table) -> bool:
        """What a caller finds by reading the latest snapshot: all of its rows (landed) or none of them."""
        mine = Counter(self.mine())
        found = Counter({r: n for r, n in rows_of(table.to_arrow()).items() if r in mine})
        if found and found != mine:
            raise AssertionError(f"a torn one-off append: the table holds {dict(found)} of {dict(mine)}")
        return bool(found)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        how = ""
        if landed is None:
            landed, how = self.find_rows(table), " (found by reading the table)"
        if landed:
            table.expire_snapshots(retain_max=self.retain_max)
            return f"landed{how}; expiration finished"
        table.append(table_of(self.rows))
        return f"not landed{how}; appended again"

    def mine(self) -> Sequence[Row]:
        """The rows the table holds once the append landed."""
        return self.rows

    def apply(self, model: Model) -> None:
        model.commit(model.written(model.rows(), self.rows))
        model.expire(self.retain_max)


@dataclass(frozen=True)
class OneOffUpsertOp(OneOffAppendOp):
    """``Table.upsert`` on a key table: as a one-off append (no commit user), but what landed is the last row of
    each of its keys, each replacing its key's live row. Its rows carry values ``v`` no other write has, so the
    caller that does not know whether it landed finds all of its surviving rows in the table, or none; it upserts
    them again only if none (``append`` on a key table upserts)."""

    def run(self, table: lakefmt.Table) -> Any:
        return table.upsert(table_of(self.rows))

    def mine(self) -> Sequence[Row]:
        return upserted(self.rows)


@dataclass(frozen=True)
class Expire:
    retain_max: int

    def run(self, table: lakefmt.Table) -> Any:
        return table.expire_snapshots(retain_max=self.retain_max)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        report = table.expire_snapshots(retain_max=self.retain_max)
        return f"expired {len(report.expired_snapshots)} more" if report.expired_snapshots else "nothing left"

    def apply(self, model: Model) -> None:
        model.expire(self.retain_max)


@dataclass(frozen=True)
class OrphanClean:
    def run(self, table: lakefmt.Table) -> Any:
        return table.remove_orphan_files(older_than=0)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        report = table.remove_orphan_files(older_than=0)
        return f"removed {report.total_files} more" if report.total_files else "nothing left"

    def apply(self, model: Model) -> None:
        pass


#: what a rewrite's recovery (run it again) reports: it changed the table, or found its work already done
APPLIED, ALREADY_APPLIED = "applied", "already applied"


@dataclass(frozen=True)
class Compact:
    """``Table.compact``: the same rows in fewer files, in one COMPACT snapshot. Applied exactly once means: the
    rows never change, landed or not; the table ends with exactly one COMPACT snapshot that carries the commit-user
    map unchanged, and the compacted partition is one file. Recovery runs it again: after a landed compaction the
    partition holds one small file, so the second run finds nothing to do."""

    min_files: int
    partition: str  #: the one partition with ``min_files`` small files or more (the others have fewer)

    def run(self, table: lakefmt.Table) -> Any:
        return table.compact(min_files=self.min_files)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        report = table.compact(min_files=self.min_files)
        return APPLIED if report.snapshot is not None else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        model.commit(Counter(model.rows()))

    def check_table(self, table: lakefmt.Table) -> None:
        check_compacted(table, self.partition, table.snapshots()[-1].id)


def check_compacted(table: lakefmt.Table, partition: str, compact_id: int) -> None:
    """Snapshot ``compact_id`` is a COMPACT one carrying the commit-user map of the one before exactly, and
    ``partition`` is one live file."""
    snap, before = table.snapshot(compact_id), table.snapshot(compact_id - 1)
    assert snap.commit_kind is lakefmt.CommitKind.COMPACT, f"snapshot {compact_id} is {snap.commit_kind}"
    assert snap.commit_users == before.commit_users, "the compaction changed the commit-user map"
    files = Counter(f.partition.get("dt") for f in table.files())
    assert files[partition] == 1, f"partition dt={partition} holds {files[partition]} files after the compaction"


@dataclass(frozen=True)
class AutoCompactCommit(Commit):
    """A job's append commit on a table with ``compaction.auto``: the append lands (snapshot n), then the
    automatic compaction of the partition it filled up (snapshot n+1). The append is applied exactly once and is
    reported landed even when the compaction after it died (a compaction is best effort: its errors never reach
    the writer; an interrupt does). Recovery replays the job (dedup skips it once landed), then runs the
    compaction the failed after-commit step left undone (as the next commit would): it must find it done exactly
    when the compaction had landed."""

    compact: Compact = Compact(3, "a")

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        replay = super().recover(table, landed)
        return f"{replay}; compaction {self.compact.recover(table, None)}"

    def apply(self, model: Model) -> None:
        super().apply(model)
        self.compact.apply(model)

    def check_table(self, table: lakefmt.Table) -> None:
        append = table.snapshots()[-2]
        assert append.commit_kind is lakefmt.CommitKind.APPEND and append.commit_identifier == self.identifier
        check_compacted(table, self.compact.partition, append.id + 1)


@dataclass(frozen=True)
class Delete:
    """``Table.delete(dt == <dt> OR id == <id>)``: the file of partition ``dt`` goes by its metadata alone, the
    file holding ``id`` is rewritten without it. It has no commit user, but it is idempotent: recovery runs it
    again, which deletes nothing once it landed (it returns None). Applied exactly once means one delete
    snapshot (kind OVERWRITE, ``lakefmt.operation=delete``) and exactly the matching rows gone."""

    dt: str
    id: int

    @property
    def filter(self) -> Any:
        return (pc.field("dt") == self.dt) | (pc.field("id") == self.id)

    def run(self, table: lakefmt.Table) -> Any:
        return table.delete(self.filter)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        return APPLIED if table.delete(self.filter) is not None else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        model.commit(Counter({r: n for r, n in model.rows().items() if not (r[1] == self.dt or r[0] == self.id)}))

    def check_table(self, table: lakefmt.Table) -> None:
        snap = table.snapshots()[-1]
        assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE and snap.properties.get("lakefmt.operation") == "delete"


@dataclass(frozen=True)
class DeleteKeys:
    """``Table.delete_keys`` on a key table: the live rows of ``keys`` (each has one) marked in deletion vectors,
    one snapshot (kind OVERWRITE, ``lakefmt.operation=delete``). No commit user, but idempotent: recovery runs it
    again, which finds no live row of its keys once it landed (it returns None)."""

    keys: tuple[tuple[int, str], ...]

    def run(self, table: lakefmt.Table) -> Any:
        return table.delete_keys(pa.table({"id": [k[0] for k in self.keys], "dt": [k[1] for k in self.keys]}))

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        return APPLIED if self.run(table) is not None else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        model.commit(Counter({r: n for r, n in model.rows().items() if r[:2] not in self.keys}))

    def check_table(self, table: lakefmt.Table) -> None:
        snap = table.snapshots()[-1]
        assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE and snap.properties.get("lakefmt.operation") == "delete"


@dataclass(frozen=True)
class Merge:
    """``Table.merge`` of ``source`` on ``id`` (and ``dt`` on a key table): a matched row whose other columns differ
    takes the source's (a row without a key moves to the source's partition), a matched row whose source ``v`` is
    negative is deleted (key table), a source row matching none is inserted (unless its ``v`` is negative), and an
    unmatched target row of partition ``gone`` is deleted. One snapshot (``lakefmt.operation=merge``). No commit
    user, but written the idempotent way (update only rows that differ): recovery runs it again, which changes
    nothing once it landed (its report's snapshot_id is None). The model is computed here in plain Python."""

    source: tuple[Row, ...]
    gone: str

    def run(self, table: lakefmt.Table) -> Any:
        keyed = bool(table.primary_key)
        on = "t.id = s.id and t.dt = s.dt" if keyed else "t.id = s.id"
        merger = table.merge(table_of(list(self.source)), on, source_alias="s", target_alias="t")
        if keyed:
            merger = merger.when_matched_delete("s.v < 0").when_matched_update_all("t.v != s.v")
            merger = merger.when_not_matched_insert_all("s.v >= 0")
        else:
            merger = merger.when_matched_update({"dt": "s.dt"}, "t.dt != s.dt").when_not_matched_insert_all()
        return merger.when_not_matched_by_source_delete(f"t.dt = '{self.gone}'").execute()

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        return APPLIED if self.run(table).snapshot_id is not None else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        width = 2 if model.keyed else 1  # the ON condition's columns
        source = {r[:width]: r for r in self.source}
        out: Counter[Row] = Counter()
        matched = set()
        for row, n in model.rows().items():
            src = source.get(row[:width])
            if src is None:
                if row[1] != self.gone:
                    out[row] += n
                continue
            matched.add(row[:width])
            if model.keyed and src[2] < 0:
                continue
            out[src] += n
        for k, src in source.items():
            if k not in matched and not (model.keyed and src[2] < 0):
                out[src] += 1
        model.commit(out)

    def check_table(self, table: lakefmt.Table) -> None:
        snap = table.snapshots()[-1]
        assert snap.properties.get("lakefmt.operation") == "merge"


@dataclass(frozen=True)
class Garbage:
    """What failed and abandoned work leaves behind: a writer task whose commit never came, the temp file of
    an interrupted local publish, the manifest lists of a commit that lost its last retry."""

    def run(self, table: lakefmt.Table) -> Any:
        write_tasks(table, [[(900, "a"), (901, "z")]])
        table.io.write(table.io.new_temp_name(layout.snapshot_path(99)), b'{"partial')
        table.io.write(layout.manifest_path("manifest-list-0123456789abcdef-1"), b"not referenced")
        table.io.write(layout.manifest_path("manifest-list-0123456789abcdef-2"), b"not referenced")

    def apply(self, model: Model) -> None:
        pass


# -- restore (tags and restore) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Restore:
    """``Table.restore(target)``: one OVERWRITE snapshot (``lakefmt.operation=restore``) whose rows are the
    target's, removing the files the target does not have and adding again those it has (its own files: no copy).
    It has no commit user, but it is idempotent: recovery runs it again, which commits nothing once it landed (the
    table already holds exactly the target's files). A pin a killed attempt left behind (``tag/pin-<id>``) only
    keeps the target's files until its retain time passes; it is never an orphan."""

    target: int

    def run(self, table: lakefmt.Table) -> Any:
        return table.restore(self.target)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        return APPLIED if table.restore(self.target) is not None else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        model.commit(Counter(model.rows(self.target)))

    def check_table(self, table: lakefmt.Table) -> None:
        snap = table.snapshots()[-1]
        assert snap.commit_kind is lakefmt.CommitKind.OVERWRITE, snap.commit_kind
        assert snap.properties.get("lakefmt.operation") == "restore", snap.properties
        assert snap.properties.get("lakefmt.restored-snapshot") == str(self.target), snap.properties
        assert {f.path for f in table.files()} == {f.path for f in table.files(self.target)}, "not the target's files"


# -- a schema change (schema evolution) ---------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaChange:
    """A schema change as a merge-schema write makes it (``UpdateSchema.union_by_name``: add the nullable column
    ``note``): ``schema/schema-1``, created exclusively (the change lands there), then a snapshot that records it
    and adds no file (best effort). Recovery runs it again: once the schema file landed it finds nothing to change
    and publishes the recording snapshot if that is missing. Applied exactly once means: schemas 0 and 1 only,
    ``note`` with field id 3, the latest snapshot recording schema 1 (``lakefmt.operation=schema-change``), and
    every row as before, ``note`` null."""

    column: str = "note"

    def _change(self, table: lakefmt.Table) -> lakefmt.TableSchema:
        return table.update_schema().union_by_name(pa.schema([(self.column, pa.string())])).commit()

    def run(self, table: lakefmt.Table) -> Any:
        return self._change(table)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        before = table.table_schema().id
        return APPLIED if self._change(table).id != before else ALREADY_APPLIED

    def apply(self, model: Model) -> None:
        model.commit(Counter(model.rows()))

    def check_table(self, table: lakefmt.Table) -> None:
        assert [s.id for s in table.schemas()] == [0, 1], "the change did not apply exactly once"
        assert table.table_schema().column_ids == {"id": 1, "dt": 2, self.column: 3}
        snap = table.snapshots()[-1]
        assert snap.schema_id == 1 and snap.properties.get("lakefmt.operation") == "schema-change", snap
        assert table.to_arrow().column(self.column).null_count == snap.total_record_count


Step = Commit | OneOffAppend | Expire | OrphanClean | Garbage
Operation = (
    Commit | OneOffAppendOp | Expire | OrphanClean | Compact | Delete | DeleteKeys | Restore | SchemaChange | Merge
)


@dataclass(frozen=True)
class Scenario:
    name: str
    history: tuple[Step, ...]
    operation: Operation
    options: dict[str, str] = field(default_factory=dict)
    #: a key table: rows (id, dt, v) with this primary key; every write upserts
    primary_key: tuple[str, ...] = ()

    def model_before(self) -> Model:
        model = Model(keyed=bool(self.primary_key))
        for step in self.history:
            step.apply(model)
        return model

    def model_after(self) -> Model:
        model = self.model_before()
        self.operation.apply(model)
        return model

    @property
    def is_commit(self) -> bool:
        return isinstance(self.operation, Commit)

    def build(self, uri: str, storage_options: dict[str, Any]) -> None:
        table = lakefmt.create_table(
            uri,
            KEY_SCHEMA if self.primary_key else SCHEMA,
            partition_by=["dt"],
            options=self.options,
            storage_options=storage_options,
            primary_key=list(self.primary_key) or None,
        )
        for step in self.history:
            step.run(table)

    def run(self, table: lakefmt.Table) -> Any:
        return self.operation.run(table)

    def recover(self, table: lakefmt.Table, landed: bool | None) -> str:
        """Recover as a job would; ``landed``: what the first attempt's outcome said (None: unknown: the
        process died, was interrupted, or got CommitStateUnknownError)."""
        return self.operation.recover(table, landed)


H1: tuple[Step, ...] = (
    OneOffAppend(((0, "a"), (1, "a"), (2, "b"), (3, "b"))),
    Commit(1, (((10, "a"),), ((11, "c"),))),
    Commit(2, (((20, "b"), (21, "b")),), overwrite={"dt": "b"}),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("append", H1, Commit(3, (((30, "a"),), ((31, "b"), (32, "c"))))),
        Scenario("overwrite", H1, Commit(3, (((40, "a"),), ((41, "a"),)), overwrite={"dt": "a"})),
        Scenario(
            "full-merge",
            (
                OneOffAppend(((0, "a"), (1, "b"), (2, "c"))),
                Commit(1, (((10, "a"),),), overwrite={"dt": "a"}),
                Commit(2, (((11, "b"),),), overwrite={"dt": "b"}),
                Commit(3, (((12, "c"),),), overwrite={"dt": "c"}),
            ),
            # three DELETE entries pile up in the base by now; this commit rewrites every manifest
            Commit(4, (((30, "a"),), ((31, "d"),))),
            options={"manifest.full-compaction-threshold": "3", "manifest.merge-min-count": "100"},
        ),
        Scenario(
            "expire",
            (
                *H1,
                Commit(3, (((30, "a"),),)),
                Commit(4, (((50, "a"), (51, "b")),), overwrite={}),
                Commit(5, (((60, "c"),),)),
            ),
            Expire(retain_max=2),
        ),
        Scenario("orphan-clean", (*H1, Garbage()), OrphanClean()),
        # dt=a: four small files (one of two rows), c: two; the compaction merges a's only
        Scenario("compact", (*H1, Commit(3, (((30, "a"),), ((31, "a"), (32, "c"))))), Compact(3, "a")),
        # dt=a: two small files; the append's third makes the automatic compaction merge them (min = max = 3)
        Scenario(
            "auto-compact",
            H1,
            AutoCompactCommit(3, (((30, "a"), (33, "a")), ((31, "b"), (32, "c")))),
            options={"compaction.auto": "true", "compaction.min.file-num": "3", "compaction.max.file-num": "3"},
        ),
        # the file of dt=c goes by its partition value; the file of ids 0 and 1 is rewritten with 1 alone
        Scenario("delete", H1, Delete("c", 0)),
        Scenario(
            "one-off-append",
            H1,
            OneOffAppendOp(((70, "a"), (71, "d")), retain_max=3),
            options={"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3"},  # expire after commits
        ),
    )
}

# -- restore (tags and restore) ----------------------------------------------------------------------------
# snapshot 1's files: dt=a {0, 1}, dt=b {2, 3}; snapshot 3 overwrote b, so the restore removes snapshot 2's and
# 3's files and adds dt=b {2, 3} again (its base must drop that path's ADD and DELETE)
SCENARIOS.update({s.name: s for s in (Scenario("restore", H1, Restore(1)),)})
SCENARIOS.update({s.name: s for s in (Scenario("schema-change", H1, SchemaChange()),)})

# -- key tables (primary key (id, dt), two buckets): every write upserts, deletes mark deletion vectors ------------
# the job's two tasks both hold key (0, a): the second task's row wins; (2, b) is replaced twice
HK: tuple[Step, ...] = (
    OneOffAppend(((0, "a", 0), (1, "a", 0), (2, "b", 0), (3, "b", 0), (4, "c", 0))),
    Commit(1, (((0, "a", 1), (10, "a", 1), (2, "b", 1)), ((11, "c", 1), (0, "a", 2)))),
    OneOffAppend(((2, "b", 3), (12, "b", 3))),
)
KEY = ("id", "dt")
SCENARIOS.update(
    {
        s.name: s
        for s in (
            # a job's upsert: old rows of (1, a), (2, b), (11, c) marked; (1, a) in both tasks, the later wins
            Scenario(
                "key-upsert-commit",
                HK,
                Commit(2, (((1, "a", 4), (2, "b", 4), (11, "c", 4)), ((1, "a", 5), (13, "d", 5)))),
                {"bucket": "2"},
                KEY,
            ),
            # a one-off upsert (its key (3, b) twice: the last wins), then expiration after the commit
            Scenario(
                "key-upsert",
                HK,
                OneOffUpsertOp(((3, "b", 6), (14, "a", 6), (3, "b", 7), (0, "a", 7)), retain_max=3),
                {"bucket": "2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3"},
                KEY,
            ),
            Scenario("key-delete-keys", HK, DeleteKeys(((0, "a"), (2, "b"), (11, "c"))), {"bucket": "2"}, KEY),
            # by filter: partition c's rows and key 1's row marked in vectors, no data file rewritten
            Scenario("key-delete", HK, Delete("c", 1), {"bucket": "2"}, KEY),
            # one bucket a partition, no automatic compaction: dt=a's five files (three with deleted rows) merged into
            # one, deleted rows dropped; dt=b's three too (a file of it has most of its rows deleted)
            Scenario(
                "key-compact",
                (*HK, Commit(2, (((1, "a", 4), (20, "a", 4)), ((0, "a", 5),)))),
                Compact(4, "a"),
                {"bucket": "1", "compaction.auto": "false"},
                KEY,
            ),
            # the upsert brings dt=a and dt=b to four files, the sorted-run trigger: the automatic compaction of
            # their buckets follows it as its own COMPACT snapshot
            Scenario(
                "key-auto-compact",
                HK,
                AutoCompactCommit(2, (((1, "a", 4), (20, "a", 4)), ((0, "a", 5), (3, "b", 5)))),
                {"bucket": "1", "num-sorted-run.compaction-trigger": "4"},
                KEY,
            ),
        )
    }
)
# MERGE (after the key scenarios: the first sampled one is the one S3 runs): copy-on-write, a row moved to another
# partition, partition c's unmatched row deleted; with deletion vectors; on a key table, with a matched delete
MERGE_SOURCE = ((1, "b"), (20, "b"), (30, "c"), (31, "a"))
SCENARIOS.update(
    {
        s.name: s
        for s in (
            Scenario("merge-cow", H1, Merge(MERGE_SOURCE, "c")),
            Scenario(
                "merge-dv",
                H1,
                Merge(MERGE_SOURCE, "c"),
                {"write.delete.mode": "merge-on-read", "compaction.auto": "false"},
            ),
            Scenario(
                "key-merge",
                HK,
                Merge(((0, "a", 9), (1, "a", 0), (3, "b", -1), (12, "b", 5), (40, "d", 1), (41, "d", -1)), "c"),
                {"bucket": "2"},
                KEY,
            ),
        )
    }
)
#: the scenarios the matrix runs at chosen crash points on local disk too (every k with LAKEFMT_FULL_FAULTS=1)
SAMPLED = {name for name in SCENARIOS if name.startswith(("key-", "merge-"))}


# -- storage helpers ---------------------------------------------------------------------------------------


def copy_table(src: FileIO, dst: str, storage_options: dict[str, Any]) -> None:
    """Copy the whole table under ``src`` to ``dst`` (paths in metadata are relative: a copy is the same table,
    elsewhere). On S3 server-side copies through ``src``'s client."""
    if src.protocol == "file":
        shutil.copytree(src.root, file_io_for(dst).root)
        return
    names = [f.path for f in src.walk()]
    dst_root = file_io_for(dst, storage_options).root
    src.fs.copy([f"{src.root}/{n}" for n in names], [f"{dst_root}/{n}" for n in names])


def faulty_table(uri: str, storage_options: dict[str, Any], plan: FaultPlan) -> tuple[lakefmt.Table, FaultIO]:
    io = FaultIO(file_io_for(uri, storage_options), plan)
    return lakefmt.Table(io, MetaStore(io)), io


def child_main(name: str, uri: str, storage_options: dict[str, Any], plan: FaultPlan) -> None:
    """In a child process: run scenario ``name``'s operation with an EXIT fault. Reaching the end means the
    fault never fired: exit 3 so the parent can tell (4: it raised, 5: it fired and the process lived on)."""
    table, io = faulty_table(uri, storage_options, plan)
    try:
        SCENARIOS[name].run(table)
    except BaseException:
        os._exit(4)
    os._exit(3 if not io.fired else 5)


def run_in_child(ctx: Any, name: str, uri: str, storage_options: dict[str, Any], plan: FaultPlan) -> int:
    """Run an operation in a child process of context ``ctx``; its exit code."""
    proc = ctx.Process(target=child_main, args=(name, uri, storage_options, plan))
    proc.start()
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
        proc.join()
    return int(proc.exitcode if proc.exitcode is not None else -1)
