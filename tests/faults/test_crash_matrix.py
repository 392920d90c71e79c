"""The crash-point matrix: every storage operation of every operation kind, under every fault kind.

For each scenario (append commit, partition overwrite, a commit that triggers a full manifest merge, expire,
orphan-clean, a one-off ``Table.append`` that expires after committing, a compaction, an append commit that
compacts automatically after it, a row-level delete, and on a key table a job's upsert commit, a one-off
``Table.upsert`` that expires after committing, a delete by key and a delete by filter) a dry run with a
counting FileIO enumerates its N storage operations. Then for EVERY k in 1..N and each fault kind of
:class:`~faults.faultio.Fault` (an ``OSError`` before operation k, or after applying it; the process ended
with ``os._exit`` in a child after applying it; a ``KeyboardInterrupt`` before or after it; a connection-level
botocore error before it reached the store, or after it was applied with its answer lost) the operation runs
on a fresh copy of the scenario's table, is recovered the way a real job recovers (open the table anew with
the plain FileIO, run the same job again with the same commit user and identifier; maintenance: run it
again; a one-off append whose outcome is unknown: read the table, append again only if its rows are not
there; a compaction or a delete: run it again, which must find its work done exactly when it had landed; an
automatic compaction that died: the replayed job, then the compaction it left undone), and the table is
checked:

* the first attempt ends as the rules say: an interrupt reaches the caller as ``KeyboardInterrupt`` (nothing
  swallows it); any other error is an ``OSError``, a ``LakefmtError`` or a botocore error (anything else, say
  a ``TypeError``, is a bug); an interrupt or a ``SystemExit`` never escapes into the test runner;
* a commit's outcome tells the truth: an error other than CommitStateUnknownError means it had not landed, a
  return that it had; and where the dry run's log decides it (the fault came after the snapshot's publish,
  or at it with the publish applied; or an interrupt or a process death before it), whether it landed is
  known and the outcome and the recovery must agree with it: a landed commit reported as failed is a
  failure even if nothing was lost yet (a one-off caller would write it twice);
* snapshot ids are exactly the expected ones, so contiguous; record counts add up;
* the commit's (user, identifier) is in exactly one snapshot and dedup remembers it;
* after orphan-clean with ``older_than=0`` the store holds exactly the files the live snapshots reference;
* the table reads: the latest rows are exactly the modelled multiset (the operation applied exactly once),
  time travel to every retained snapshot reads exactly its modelled rows, expired ones raise
  SnapshotNotFoundError.

Local disk runs the whole matrix for every fault kind but the two connection kinds. S3 (moto), the
connection kinds on local disk and the key-table scenarios run at chosen crash points by default, found in the
dry run's log so that a new scenario gets them unasked (every publish, or a maintenance job's middle delete; the
connection kinds on local disk one more point; the key tables' around their deletion-vector files; one key-table
scenario on S3; see :func:`crash_points`); ``LAKEFMT_FULL_FAULTS=1`` runs every k everywhere.
``LAKEFMT_FAULT_REPORT=path`` writes the counts as JSON. A failing crash point is reported with its
operation from the dry run's log and the end of its traceback.
"""

from __future__ import annotations

import functools
import os
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError

import lakefmt
from lakefmt.errors import CommitStateUnknownError, LakefmtError, SnapshotNotFoundError
from lakefmt.io import FileIO, file_io_for
from lakefmt.maintenance import referenced_files
from lakefmt.maintenance.orphans import unreferenced
from lakefmt.meta import entries
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

from .faultio import EXIT_CODE, Fault, FaultIO, FaultPlan, InjectedInterrupt
from .report import record
from .scenarios import (
    ALREADY_APPLIED,
    APPLIED,
    SAMPLED,
    SCENARIOS,
    USER,
    AutoCompactCommit,
    Commit,
    Compact,
    Delete,
    DeleteKeys,
    Merge,
    Model,
    OneOffAppendOp,
    Restore,
    Scenario,
    SchemaChange,
    copy_table,
    faulty_table,
    rows_of,
    run_in_child,
)

FULL = os.environ.get("LAKEFMT_FULL_FAULTS", "") not in ("", "0")
KINDS = [
    Fault.RAISE_BEFORE,
    Fault.RAISE_AFTER,
    Fault.EXIT,
    Fault.INTERRUPT,
    Fault.INTERRUPT_AFTER,
    Fault.CONNECTION_BEFORE,
    Fault.CONNECTION_AFTER,
]


@dataclass
class Base:
    """A scenario's table, built once per store, and the dry run's log of its operation."""

    uri: str
    storage_options: dict[str, Any]
    new_uri: Any = field(repr=False)  #: () -> a fresh location on the same store
    log: list[tuple[str, str]] = field(default_factory=list)
    baseline_orphans: int = 0  #: files a fault-free run leaves for orphan-clean (merged per-task manifests)

    def fresh_copy(self) -> str:
        uri = self.new_uri()
        copy_table(self.io, uri, self.storage_options)
        return uri

    @functools.cached_property
    def io(self) -> FileIO:
        return file_io_for(self.uri, self.storage_options)


_BASES: dict[tuple[str, str], Base] = {}


def _local_root(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.getbasetemp() / "crash-matrix"
    root.mkdir(exist_ok=True)
    return root


def _base(kind: str, name: str, new_uri: Any, storage_options: dict[str, Any], local_root: Any) -> Base:
    """The scenario's table on ``kind``'s store. It is built, checked against the model and dry-run on local
    disk; on S3 the local table is uploaded (a table is relocatable: every stored path is relative) and the
    dry run is repeated there to count S3's operations."""
    key = (kind, name)
    if key in _BASES:
        return _BASES[key]
    scenario = SCENARIOS[name]
    if ("local", name) not in _BASES:
        local = Base(str(local_root / uuid.uuid4().hex), {}, lambda: str(local_root / uuid.uuid4().hex))
        scenario.build(local.uri, {})
        verify(local.uri, {}, scenario, scenario.model_before(), applied=False)  # the history is as modelled
        local.log, local.baseline_orphans = _dry_run(local, scenario, check=True)
        _BASES[("local", name)] = local
    if kind != "local":
        local = _BASES[("local", name)]
        base = Base(new_uri(), storage_options, new_uri)
        base.io.fs.put(f"{local.io.root}/", f"{base.io.root}/", recursive=True)
        base.log, _ = _dry_run(base, scenario, check=False)
        base.baseline_orphans = local.baseline_orphans
        _BASES[key] = base
    return _BASES[key]


def _dry_run(base: Base, scenario: Scenario, check: bool) -> tuple[list[tuple[str, str]], int]:
    """Run the operation once without a fault on a copy: the log of its storage operations, and (with
    ``check``) how many files a fault-free run leaves for orphan-clean (merged per-task manifests)."""
    dry = base.fresh_copy()
    table, io = faulty_table(dry, base.storage_options, FaultPlan())
    scenario.run(table)
    removed = verify(dry, base.storage_options, scenario, scenario.model_after()) if check else 0
    return io.log, removed


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, dict, Any]:
    """(store kind, () -> new table location, storage options, local folder for the built tables)."""
    root = _local_root(tmp_path_factory)
    if request.param == "local":
        return "local", lambda: str(root / uuid.uuid4().hex), {}, root
    server = request.getfixturevalue("moto_server")
    bucket = server["bucket"]
    return "s3", lambda: f"s3://{bucket}/crash-{uuid.uuid4().hex}", dict(server["storage_options"]), root


# -- the checks --------------------------------------------------------------------------------------------


def reopen(io: FileIO) -> lakefmt.Table:
    """What ``open_table`` does, over a given plain FileIO: a new table with no metadata cached."""
    store = MetaStore(io)
    store.latest_schema()  # NotATableError
    return lakefmt.Table(io, store)


def verify(
    uri: str,
    storage_options: dict[str, Any],
    scenario: Scenario,
    model: Model,
    applied: bool = True,
    io: FileIO | None = None,
) -> int:
    """Check the table at ``uri`` against ``model``: its history first; then (after the operation) orphan-clean
    it with age 0 and check that the store holds exactly the referenced files; then that the latest snapshot
    and every retained one read exactly as modelled. (Reading after the clean is the stronger check: deleting
    files cannot make a wrong read right, and a stray snapshot file the clean might hide fails the history
    check before it.) Returns how many files the orphan-clean removed."""
    table = reopen(io or file_io_for(uri, storage_options))  # a plain FileIO, no metadata caches
    _check_history(table, scenario, model, applied)
    removed = 0
    if applied:
        removed = table.remove_orphan_files(older_than=0).total_files
        files = {f.path for f in table.io.walk()}
        refs = referenced_files(MetaStore(table.io))
        stray = unreferenced(files, refs)
        assert stray == set(), f"unreferenced files after orphan-clean: {sorted(stray)}"
        assert refs - files <= {layout.LATEST, layout.EARLIEST}, f"referenced but missing: {sorted(refs - files)}"
        table = reopen(table.io)  # no metadata cached from before the clean
        _check_history(table, scenario, model, applied)
    _check_rows(table, scenario, model)
    return removed


def _check_history(table: lakefmt.Table, scenario: Scenario, model: Model, applied: bool) -> None:
    """Snapshot ids exactly the modelled ones (so contiguous), record counts as modelled, and the commit's
    (user, identifier) in exactly one snapshot."""
    snapshots = table.snapshots()
    ids = [s.id for s in snapshots]
    assert ids == sorted(model.snapshots), f"snapshots {ids}, expected {sorted(model.snapshots)}"
    assert ids == list(range(ids[0], ids[-1] + 1))
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == ids[-1]
    for snap in snapshots:
        assert snap.total_record_count == sum(model.rows(snap.id).values()), f"snapshot {snap.id}"
    op = scenario.operation
    if isinstance(op, Commit) and applied:
        pairs = Counter((s.commit_user, s.commit_identifier) for s in snapshots)
        assert pairs[(USER, op.identifier)] == 1, "the commit is not in exactly one snapshot"
        assert table.commit_user_identifier(USER) == op.identifier
    if applied and isinstance(op, Compact | Delete | DeleteKeys | AutoCompactCommit | Restore | SchemaChange):
        op.check_table(table)  # the snapshot's kind and properties; a compaction's commit users and files


def _check_rows(table: lakefmt.Table, scenario: Scenario, model: Model) -> None:
    """The table reads: the latest rows and every retained snapshot's are exactly the modelled multisets;
    expired snapshots are reported as such."""
    got = rows_of(table.to_arrow())
    assert got == model.rows(), f"latest rows: extra {got - model.rows()}, missing {model.rows() - got}"
    for sid in sorted(model.snapshots)[:-1]:
        assert rows_of(table.to_arrow(snapshot_id=sid)) == model.rows(sid), f"time travel to snapshot {sid}"
    for sid in set(scenario.model_before().snapshots) - set(model.snapshots):
        with pytest.raises(SnapshotNotFoundError):
            table.scan(snapshot_id=sid)


# -- the matrix --------------------------------------------------------------------------------------------


def crash_points(log: list[tuple[str, str]], store: str, kind: Fault, sampled: bool = False) -> list[int]:
    """Every k on local disk (and everywhere with LAKEFMT_FULL_FAULTS=1), except for the connection kinds, which
    stand for S3's lost answers and take chosen points on local disk too (every k with the flag). A ``sampled``
    scenario (the key tables': their commit path is the append's but for the deletion vectors it plans) takes
    chosen points on local disk for every kind: see below.

    The chosen points come from the dry run's log alone, so a new scenario gets them with no change here. The
    *main* points are the operation's publishes, every one (an append that compacts after it publishes two
    snapshots; a schema change its schema file, then its snapshot); an operation that publishes nothing
    (maintenance) has one, its middle delete. By default:

    * on S3 every fault kind at the main points, but ``INTERRUPT``: once, in the middle of the work after the
      last publish (the LATEST hint; in the one-off append, the expiration after the commit; maintenance: the
      first delete). The publish is the operation S3 does differently (a conditional PUT, its answer read back
      when it was lost), and there the connection kinds come at the request inside it; elsewhere every kind
      but those two comes at the FileIO boundary on both stores, and the full run's outcomes on S3 were local
      disk's, case by case. 7 runs for an operation that publishes once, 13 for one that publishes twice;
    * the connection kinds on local disk, where they come at the FileIO boundary and cost little, at the main
      points and at one more: the first operation, the one before the last publish or the last, a different one
      for each kind (maintenance: the main point only);
    * a sampled scenario on local disk, every kind but the connection kinds (as above) and ``INTERRUPT`` (as on
      S3): the main points, the last operation, the one before the last publish (a manifest list), the write of
      the first deletion-vector file (``*.puffin``) and the read before it, the write after the last one (the
      manifest of the entries that replace the old vectors) and the first delete after the publish (expiration,
      merged manifests). On S3 the first sampled scenario only (all of them with the flag): the publish is the
      same for every kind of commit."""
    n = len(log)
    if FULL or (store == "local" and not kind.connection and not sampled):
        return list(range(1, n + 1))
    publishes = [i for i, (op, _) in enumerate(log, 1) if op == "publish"]
    if publishes:
        mains, before, after = publishes, publishes[-1] - 1, (publishes[-1] + 1 + n) // 2
    else:  # maintenance (an operation with neither a publish nor a delete: its middle operation)
        deletes = [i for i, (op, _) in enumerate(log, 1) if op == "delete"] or [(n + 1) // 2]
        mains, before, after = [deletes[len(deletes) // 2]], deletes[0], deletes[0]
    if kind is Fault.INTERRUPT:
        return [after]
    if store == "local" and sampled and not kind.connection and publishes:
        vectors = [i for i, (op, p) in enumerate(log, 1) if op == "write" and p.endswith(".puffin")]
        planned = [vectors[0] - 1, vectors[0], vectors[-1] + 1] if vectors else []  # around the vector files
        cleanup = [i for i, (op, _) in enumerate(log, 1) if op == "delete" and i > mains[-1]][:1]
        return sorted({before, n, *mains, *planned, *cleanup})
    if store != "local" or not publishes:
        return mains
    others = sorted({1, before, n} - set(mains)) or [n]
    return sorted({*mains, others[KINDS.index(kind) % len(others)]})


def publish_index(log: list[tuple[str, str]], snapshot_id: int | None = None, path: str | None = None) -> int | None:
    """The operation that publishes snapshot ``snapshot_id`` (or the file ``path``; default: the last publish),
    1-based, if any."""
    want = path if path is not None else None if snapshot_id is None else layout.snapshot_path(snapshot_id)
    publishes = [i for i, (op, p) in enumerate(log, 1) if op == "publish" and (want is None or p == want)]
    return publishes[-1] if publishes else None


def landed_by_log(
    log: list[tuple[str, str]], plan: FaultPlan, snapshot_id: int | None = None, path: str | None = None
) -> bool | None:
    """Whether the commit's snapshot file exists after the faulted first attempt, as far as the dry run's log
    decides it (runs are deterministic up to the fault): a fault after the publish comes when it was applied,
    and so does one that applies the publish itself; an interrupt or a process death before it ends the
    attempt there. None: not decided by the log (an error before the publish may be absorbed, a publish that
    failed before it was applied may be retried). ``snapshot_id``: which snapshot's publish (an append that
    compacts automatically publishes two; ``path``: another file's publish, a schema's); default the last one."""
    p = publish_index(log, snapshot_id, path)
    if p is None or plan.kind is Fault.NONE:
        return None
    k = plan.at
    if k > p or (k == p and not plan.kind.before):
        return True
    if plan.kind.interrupts or plan.kind is Fault.EXIT:
        return False
    return None


def first_attempt(scenario: Scenario, io: FaultIO) -> tuple[str, bool | None]:
    """Run the operation over the fault-injecting ``io`` and classify how it ended: ("absorbed", True) if it
    returned; (error name, False) for an error that says the operation did not happen; (name, None) when its
    outcome is unknown (CommitStateUnknownError, the injected interrupt). The injected KeyboardInterrupt is
    caught here, as is anything else that is not an Exception, so neither can end the test session; a real
    Ctrl-C (no interrupt was injected) still stops it."""
    try:
        scenario.run(lakefmt.Table(io, MetaStore(io)))
    except KeyboardInterrupt as exc:
        if not (io.plan.kind.interrupts and io.fired):
            raise  # the user's Ctrl-C
        if isinstance(exc, InjectedInterrupt):
            return "KeyboardInterrupt", None
        return f"KeyboardInterrupt (a new one: {type(exc).__name__})", None
    except CommitStateUnknownError:
        return "CommitStateUnknownError", None  # may have landed: recovery must not rely on either
    except (OSError, LakefmtError, BotoCoreError) as exc:  # anything else (a TypeError, a KeyError) is a bug
        return type(exc).__name__, False
    except Exception:
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit: a bug, and it must not end the session
        raise AssertionError(f"the first attempt raised {type(exc).__name__}: {exc}") from exc
    return "absorbed", True


def run_one(base: Base, scenario: Scenario, plan: FaultPlan, ctx: Any) -> dict[str, Any]:
    """One fault run: first attempt with the fault, recovery, checks. Returns what happened."""
    uri = base.fresh_copy()
    plain = file_io_for(uri, base.storage_options)  # one per run: on S3, one client for all its steps
    landed: bool | None = None  # what the first attempt's outcome says (None: unknown, e.g. the process died)
    where = ""
    if plan.kind is Fault.EXIT:
        code = run_in_child(ctx, scenario.name, uri, base.storage_options, plan)
        assert code == EXIT_CODE, f"the child did not die at the fault (exit code {code})"
        first = "process died"
    else:
        io = FaultIO(plain, plan)
        first, landed = first_attempt(scenario, io)
        assert io.fired, "the fault never fired: the operation is not deterministic"
        where = io.fired_at
        if plan.kind.interrupts:
            assert first.startswith("KeyboardInterrupt"), f"the interrupt did not reach the caller: {first}"
    op = scenario.operation
    first_new = scenario.model_before().latest + 1  # the snapshot the operation creates (the append, if two)
    commits = isinstance(op, Commit | OneOffAppendOp | Compact | Delete | DeleteKeys | Restore | Merge)
    truth = landed_by_log(base.log, plan, first_new) if commits else None
    if truth is not None and landed is not None:
        assert landed == truth, (
            f"first attempt {first}: it says the commit {'landed' if landed else 'did not land'}, "
            f"but its snapshot was {'published' if truth else 'never published'}"
        )
    recovery = scenario.recover(reopen(plain), landed)  # the table opened anew, with the plain FileIO
    if isinstance(op, Commit):
        # the outcome is the truth: an error other than CommitStateUnknownError means it did not land
        expected = landed if landed is not None else truth
        if expected is not None:
            replay = recovery.split(";")[0]
            assert replay == ("deduplicated" if expected else "committed"), f"first attempt {first}, then {recovery}"
        compacted = landed_by_log(base.log, plan, first_new + 1) if isinstance(op, AutoCompactCommit) else None
        if expected is not None and compacted is not None:
            # the compaction is left to recovery exactly when the append landed and its compaction did not
            left = APPLIED if expected and not compacted else ALREADY_APPLIED
            assert recovery.endswith(f"compaction {left}"), f"first attempt {first}, then {recovery}"
    elif isinstance(op, OneOffAppendOp) and landed is None and truth is not None:
        assert recovery.startswith("landed" if truth else "not landed"), f"first attempt {first}, then {recovery}"
    elif isinstance(op, Compact | Delete | DeleteKeys | Restore | Merge):  # run again: done exactly if it landed
        expected = landed if landed is not None else truth
        if expected is not None:
            want = ALREADY_APPLIED if expected else APPLIED
            assert recovery == want, f"first attempt {first}, then {recovery}"
    elif isinstance(op, SchemaChange):  # it lands with its schema file; the snapshot recording it is best effort
        truth = landed_by_log(base.log, plan, path=layout.schema_path(1))
        if truth is not None and landed is not None:
            assert landed == truth, f"first attempt {first}: yet the schema file was {'' if truth else 'not '}published"
        expected = landed if landed is not None else truth
        if expected is not None:
            assert recovery == (ALREADY_APPLIED if expected else APPLIED), f"first attempt {first}, then {recovery}"
    removed = verify(uri, base.storage_options, scenario, scenario.model_after(), io=plain)
    return {"first": first, "recovery": recovery, "orphans": removed - base.baseline_orphans, "where": where}


def failure_summary(exc: BaseException) -> str:
    """The exception and where it came from: its last frames (and those of what caused it), one line each."""
    lines = []
    cause: BaseException | None = exc
    while cause is not None and len(lines) < 3:
        frames = traceback.extract_tb(cause.__traceback__)[-3:]
        where = " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}" for f in reversed(frames))
        text = " ".join(str(cause).split())[:300]
        lines.append(f"{'' if cause is exc else '    caused by '}{type(cause).__name__}: {text} [at {where}]")
        cause = cause.__cause__ or cause.__context__
    return "\n".join(lines)


MATRIX = [pytest.param(name, kind, id=f"{name}-{kind.value}") for name in SCENARIOS for kind in KINDS]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind"), MATRIX)
def test_crash_matrix(where: tuple[str, Any, dict, Any], name: str, kind: Fault, fault_ctx: Any) -> None:
    store, new_uri, storage_options, local_root = where
    # on S3 one key-table scenario runs unless LAKEFMT_FULL_FAULTS=1: tests/faults/conftest.py deselects the others
    scenario = SCENARIOS[name]
    base = _base(store, name, new_uri, storage_options, local_root)
    points = crash_points(base.log, store, kind, sampled=name in SAMPLED)
    started = time.monotonic()
    failures: list[str] = []
    outcomes: Counter[str] = Counter()
    per_k: list[str] = []
    for k in points:
        op, path = base.log[k - 1]
        try:
            result = run_one(base, scenario, FaultPlan(kind, k), fault_ctx)
        except (Exception, InjectedInterrupt) as exc:  # an injected interrupt must never end the session
            failures.append(f"k={k} ({op} {path}): {failure_summary(exc)}")
            continue
        outcomes[f"first attempt: {result['first']}"] += 1
        outcomes[f"recovery: {result['recovery']}"] += 1
        outcomes["files left for orphan-clean by the fault"] += result["orphans"]
        if result["where"] == "request":
            outcomes["connection fault at an S3 request inside the operation"] += 1
        per_k.append(f"{k} {op} {path}: {result['first']}; {result['recovery']}; +{result['orphans']} orphans")
    record(
        "crash_matrix",
        f"{store}/{name}/{kind.value}",
        {
            "operations": len(base.log),
            "runs": len(points),
            "failed": len(failures),
            "seconds": round(time.monotonic() - started, 1),
            "outcomes": dict(sorted(outcomes.items())),
            "per_k": per_k,
        },
    )
    assert not failures, f"{len(failures)} of {len(points)} crash points failed ({store}, {name}, {kind.value}):\n" + (
        "\n".join(failures)
    )


def test_merge_scenario_really_triggers_a_full_merge(tmp_path: Any) -> None:
    """The full-merge scenario's commit rewrites the base: its base list holds no DELETE entries although the
    snapshot before it carried three."""
    scenario = SCENARIOS["full-merge"]
    uri = str(tmp_path / "t")
    scenario.build(uri, {})
    table = lakefmt.open_table(uri)
    store = MetaStore(table.io)
    before = table.latest_snapshot()
    assert before is not None
    assert sum(m.num_deleted_files for m in store.snapshot_manifests(before)) >= 3
    scenario.run(table)
    after = table.latest_snapshot()
    assert after is not None and after.id == before.id + 1
    base = store.manifest_list(after.base_manifest_list)
    assert sum(m.num_deleted_files for m in base) == 0
    assert not {m.file_name for m in base} & {m.file_name for m in store.snapshot_manifests(before)}


def test_crash_points_cover_every_step_of_a_commit(tmp_path: Any) -> None:
    """The dry run of a commit sees the writer's files, the metadata reads, the manifest lists, the publish,
    the hint and (if it does I/O) the after-commit step, in protocol order: the matrix really walks the
    protocol."""
    scenario = SCENARIOS["append"]
    uri = str(tmp_path / "t")
    scenario.build(uri, {})
    table, io = faulty_table(uri, {}, FaultPlan())
    scenario.run(table)
    ops = [op for op, _ in io.log]
    assert ops[:3] == ["list", "read", "open_output"]  # the writer reads the schema, then writes data
    assert {"close", "sync", "write", "publish"} <= set(ops)
    publish = ops.index("publish")
    assert io.log[publish][1] == layout.snapshot_path(4)
    assert io.log[publish + 1] == ("write", layout.LATEST)
    # after the publish: no retention options, so Table's after-commit step, if anything, only reads; the
    # committer may drop the per-task manifests this commit merged into its delta (referenced by no snapshot)
    written = {path for op, path in io.log[:publish] if op == "write" and path.startswith("manifest/manifest-")}
    refs = referenced_files(MetaStore(io.inner))
    for op, path in io.log[publish + 2 :]:
        assert op in ("read", "list") or (op == "delete" and path in written and path not in refs), io.log[publish:]


def test_rewrite_scenarios_do_what_they_say(tmp_path: Any) -> None:
    """The delete drops the file of dt=c unread and rewrites the one of ids 0 and 1; the compaction merges dt=a's
    four small files alone; the automatic compaction follows the append as its own COMPACT snapshot."""
    from lakefmt.rewrite.delete import plan_delete

    delete = SCENARIOS["delete"]
    table = lakefmt.open_table(_built(tmp_path / "delete", delete))
    op = delete.operation
    assert isinstance(op, Delete)
    plan = plan_delete(table, op.filter)
    assert [p["dt"] for p in plan.dropped.column("partition").to_pylist()] == ["c"]
    assert plan.candidates.num_rows == 1 and plan.candidates.column("row_count").to_pylist() == [2]

    compact = SCENARIOS["compact"]
    table = lakefmt.open_table(_built(tmp_path / "compact", compact))
    report = table.compact(min_files=3, dry_run=True)
    assert report.partitions == [{"dt": "a"}] and report.rewritten_files == 4

    auto = SCENARIOS["auto-compact"]
    table = lakefmt.open_table(_built(tmp_path / "auto", auto))
    assert [s.commit_kind for s in table.snapshots()][-1] is not lakefmt.CommitKind.COMPACT
    auto.run(table)
    kinds = [s.commit_kind for s in table.snapshots()[-2:]]
    assert kinds == [lakefmt.CommitKind.APPEND, lakefmt.CommitKind.COMPACT]


def _built(path: Any, scenario: Scenario) -> str:
    scenario.build(str(path), {})
    return str(path)


def test_key_scenarios_do_what_they_say(tmp_path: Any) -> None:
    """The key tables' operations: the job's upsert marks old rows in new deletion-vector files (no data file
    removed); the deletes add vectors and rewrite no data file; the compaction merges dt=a's and dt=b's buckets; the
    upsert that reaches the sorted-run trigger is followed by its bucket compaction."""
    for name in ("key-upsert-commit", "key-upsert", "key-delete-keys", "key-delete"):
        scenario = SCENARIOS[name]
        table = lakefmt.open_table(_built(tmp_path / name, scenario))
        before = {f.path for f in table.files()}
        scenario.run(table)
        snap = table.latest_snapshot()
        assert snap is not None and snap.commit_kind is not lakefmt.CommitKind.COMPACT, name
        assert before <= {f.path for f in table.files()}, f"{name} removed a data file"
        store = MetaStore(table.io)
        metas = store.manifest_list(snap.delta_manifest_list)
        delta = entries.concat_entries([store.manifest(m.file_name) for m in metas])
        assert entries.vector_files(entries.adds(delta)).num_rows, f"{name} added no deletion-vector file"

    compact = SCENARIOS["key-compact"]
    table = lakefmt.open_table(_built(tmp_path / "key-compact", compact))
    report = table.compact(min_files=4, dry_run=True)
    assert report.partitions == [{"dt": "a"}, {"dt": "b"}], report.partitions

    auto = SCENARIOS["key-auto-compact"]
    table = lakefmt.open_table(_built(tmp_path / "key-auto", auto))
    auto.run(table)
    kinds = [s.commit_kind for s in table.snapshots()[-2:]]
    assert kinds == [lakefmt.CommitKind.APPEND, lakefmt.CommitKind.COMPACT]
