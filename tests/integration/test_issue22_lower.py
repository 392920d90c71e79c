"""Issue 22, item 5: the null partition on the command line, rewrites whose input files were overwritten and
expired before they were read, and merge-mode appends of structs lacking a nullable field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in, file_listing, sorted_ids

import lakefmt
from lakefmt.cli import main
from lakefmt.cli.compact import parse_partition
from lakefmt.meta import entries as ents
from lakefmt.rewrite import delete as deletion
from lakefmt.rewrite.compact import run as compaction

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
EVEN = pc.field("id").isin(list(range(0, 1000, 2)))  # one row of each file small_files writes


def rows(*ids: int, dt: str | None = "a") -> pa.Table:
    return pa.table({"id": list(ids), "dt": [dt] * len(ids)}, schema=SCHEMA)


def small_files(store: Any, parts: tuple[str | None, ...] = ("a", "b"), appends: int = 6) -> lakefmt.Table:
    """``appends`` commits of one file of two rows in each partition: ids 100 i + 10 k and 100 i + 10 k + 1 for
    the k-th partition of ``parts``."""
    # compaction on demand: the small files stay until a test compacts them
    options = {"write.fsync": "false", "compaction.auto": "false"}
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options=options)
    for i in range(appends):
        t.append(pa.concat_tables([rows(*ids(i, k), dt=p) for k, p in enumerate(parts)]))
    return t


def ids(i: int, k: int) -> list[int]:
    return [100 * i + 10 * k, 100 * i + 10 * k + 1]


def of(k: int, appends: int = 6) -> list[int]:
    """The ids small_files wrote in the k-th partition."""
    return [n for i in range(appends) for n in ids(i, k)]


def data_files(t: lakefmt.Table) -> set[str]:
    """The data files on storage (everything but metadata)."""
    meta = ("snapshot/", "manifest/", "schema/", "tag/", "consumer/")
    return {p for p in file_listing(t.io) if not p.startswith(meta)}


def referenced(t: lakefmt.Table) -> set[str]:
    """The data files some retained snapshot reads."""
    return {f.path for s in t.snapshots() for f in t.files(snapshot_id=s.id)}


# -- (a) the null partition on the command line --------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["__null__", "__HIVE_DEFAULT_PARTITION__"])
def test_cli_compact_reaches_the_null_partition(
    local_store: Any, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    """The null partition's folder is dt=__null__; Hive and Spark write __HIVE_DEFAULT_PARTITION__: both reach
    it (no spelling did: dt=, dt=None and dt=null all named a partition of text)."""
    t = small_files(local_store, parts=("a", None))
    assert main(["compact", t.uri, "--partition", f"dt={spelling}", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would compact 6 files" in out and "in 1 partition: dt=__null__" in out, out
    assert main(["compact", t.uri, "--partition", f"dt={spelling}"]) == 0
    assert "compacted 6 files" in capsys.readouterr().out
    assert sorted(str(f.partition["dt"]) for f in t.files()) == ["None"] + ["a"] * 6
    assert sorted_ids(t) == sorted(of(0) + of(1))


def test_cli_partition_spellings() -> None:
    assert parse_partition("dt=__null__") == {"dt": None}
    assert parse_partition("dt=__HIVE_DEFAULT_PARTITION__,h=1") == {"dt": None, "h": "1"}
    assert parse_partition("dt=null") == {"dt": "null"}  # a text value "null" is a value like any other
    assert parse_partition("dt=") == {"dt": ""}


def test_cli_compact_unknown_partition_lists_the_null_partition_as_it_is_spelled(
    local_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error listed the null partition as dt=None, and refused --partition dt=None in the same line."""
    t = small_files(local_store, parts=("a", None))
    assert main(["compact", t.uri, "--partition", "dt=None"]) == 1
    err = capsys.readouterr().err
    assert "no live file in partition dt=None" in err and "partitions found: dt=a, dt=__null__" in err, err
    assert err.count("\n") == 1
    assert main(["files", t.uri]) == 0
    assert "dt=__null__" in capsys.readouterr().out


def test_compact_help_names_the_null_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compact", "--help"])
    assert "__null__" in capsys.readouterr().out


# -- (b) rewrite inputs overwritten and expired before they are read ------------------------------------------
def _overwrite_and_expire(store: Any, t: lakefmt.Table, dt: str = "a") -> Callable[[], None]:
    """Another process overwrites partition ``dt`` with one row (id 999) and expires every older snapshot, which
    deletes the files it replaced."""

    def run() -> None:
        other = lakefmt.open_table(t.uri, storage_options=store.storage_options)
        other.overwrite(rows(999, dt=dt), partition={"dt": dt})
        other.expire_snapshots(retain_max=1)

    return run


def _compact_and_expire(store: Any, t: lakefmt.Table) -> Callable[[], None]:
    def run() -> None:
        other = lakefmt.open_table(t.uri, storage_options=store.storage_options)
        assert other.compact().snapshot is not None
        other.expire_snapshots(retain_max=1)

    return run


def _after_plan(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, meanwhile: Callable[[], None]) -> None:
    """The first plan ``module.name`` makes is followed by ``meanwhile`` (before anything reads its files)."""
    original = getattr(module, name)
    calls = []

    def plan(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if not calls:
            calls.append(1)
            meanwhile()
        return out

    monkeypatch.setattr(module, name, plan)


@pytest.mark.parametrize("how", [{}, {"parallelism": 2}, {"sort_by": "id"}])
def test_compaction_whose_inputs_were_overwritten_and_expired_gives_them_up(
    store: Any, monkeypatch: pytest.MonkeyPatch, how: dict[str, Any]
) -> None:
    """The partition a was overwritten and the snapshot the plan read expired, so its small files are deleted
    before the compaction reads them: pyarrow's FileNotFoundError escaped. Now a is re-planned (nothing left to
    compact there) and b is compacted; the writer never fails, nothing written for a is left behind."""
    t = small_files(store)
    _after_plan(monkeypatch, compaction, "plan_compaction", _overwrite_and_expire(store, t))
    report = t.compact(**how)
    assert report.snapshot is not None and report.partitions == [{"dt": "b"}]
    assert report.replanned == [{"dt": "a"}] and report.given_up == []
    assert sorted_ids(t) == sorted([999, *of(1)])
    assert data_files(t) == referenced(t)  # the files written for a's group were deleted


def test_compaction_that_loses_its_inputs_twice_gives_the_partition_up(
    local_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-plan's inputs are overwritten and expired too: the partition is given up, still without an error."""
    t = small_files(local_store, parts=("a",), appends=6)
    original = compaction.plan_compaction
    state = {"n": 0}

    def plan(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        state["n"] += 1
        if state["n"] == 2:  # the re-plan: a file of six more appends
            for i in range(6):
                t.append(rows(500 + i))
            out = original(*args, **kwargs)
        if state["n"] <= 2:
            _overwrite_and_expire(local_store, t)()
        return out

    monkeypatch.setattr(compaction, "plan_compaction", plan)
    report = t.compact()
    assert report.snapshot is None and report.replanned == [{"dt": "a"}]
    assert [g.partition for g in report.given_up] == [{"dt": "a"}]
    assert "removed" in report.given_up[0].reason
    assert sorted_ids(t) == [999]
    assert data_files(t) == referenced(t)


def test_rewrite_group_whose_input_is_gone_raises_a_conflict_naming_it(local_store: Any) -> None:
    t = small_files(local_store, parts=("a",))
    plan = compaction.plan_compaction(t)
    (group,) = plan.groups
    _overwrite_and_expire(local_store, t)()
    before = data_files(t)
    with pytest.raises(lakefmt.RewriteConflictError) as exc:
        compaction.rewrite_group(t, group)
    assert exc.value.gone and set(exc.value.gone) <= set(group.paths)
    assert exc.value.gone[0] in str(exc.value)
    assert data_files(t) == before


def test_a_live_input_missing_from_storage_is_not_a_conflict(local_store: Any) -> None:
    """A file the latest snapshot still holds, deleted behind the table's back: damage, named as such."""
    t = small_files(local_store, parts=("a",))
    (group,) = compaction.plan_compaction(t).groups
    t.io.delete(group.paths[2])
    with pytest.raises(lakefmt.CorruptMetadataError, match=group.paths[2]):
        t.compact()
    assert [s.id for s in t.snapshots()] == list(range(1, 7))


def test_delete_whose_input_was_overwritten_and_expired_is_a_conflict(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow's FileNotFoundError escaped; now a RewriteConflictError naming the file, nothing committed."""
    t = small_files(store)
    _after_plan(monkeypatch, deletion, "plan_delete", _overwrite_and_expire(store, t))
    with pytest.raises(lakefmt.RewriteConflictError) as exc:
        t.delete(EVEN)  # one row of every file: every file is read
    assert exc.value.gone and all(p.startswith("dt=a/") for p in exc.value.gone)
    assert exc.value.gone[0] in str(exc.value)
    latest = t.latest_snapshot()
    assert latest is not None and latest.commit_kind is lakefmt.CommitKind.OVERWRITE
    assert sorted_ids(t) == sorted([999, *of(1)])
    assert data_files(t) == referenced(t)


def test_delete_whose_input_was_compacted_and_expired_plans_again(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a compaction removed the files: the delete plans again once, on the compacted files, and lands."""
    t = small_files(store)
    _after_plan(monkeypatch, deletion, "plan_delete", _compact_and_expire(store, t))
    snap = t.delete(EVEN)
    assert snap is not None
    assert sorted_ids(t) == sorted(n for n in of(0) + of(1) if n % 2)
    assert data_files(t) == referenced(t)


def test_delete_in_files_whose_input_is_gone_raises_a_conflict(local_store: Any) -> None:
    t = small_files(local_store, parts=("a",))
    plan = deletion.plan_delete(t, EVEN)
    _overwrite_and_expire(local_store, t)()
    with pytest.raises(lakefmt.RewriteConflictError) as exc:
        deletion.delete_in_files(t, plan.candidates, plan.filter)
    assert set(exc.value.gone) <= set(ents.paths(plan.candidates))


# -- (c) merge-mode appends and structs ------------------------------------------------------------------------
NESTED = pa.schema(
    [
        ("id", pa.int64()),
        (
            "s",
            pa.struct(
                [("a", pa.int64()), ("b", pa.string()), ("in", pa.struct([("x", pa.int64()), ("y", pa.int64())]))]
            ),
        ),
    ]
)


def test_merge_append_fills_a_nullable_field_missing_inside_a_struct(local_store: Any) -> None:
    t = create_table_in(local_store, NESTED)
    inner = pa.struct([("x", pa.int64())])
    data = pa.table(
        {
            "id": [1, 2, 3],
            "s": pa.array(
                [{"a": 1, "in": {"x": 7}}, None, {"a": 3, "in": None}], pa.struct([("a", pa.int64()), ("in", inner)])
            ),
        }
    )
    t.append(data, schema_mode="merge")
    assert t.schema() == NESTED  # no schema change: nothing was added
    got = t.to_arrow().sort_by("id").column("s").to_pylist()
    assert got == [
        {"a": 1, "b": None, "in": {"x": 7, "y": None}},
        None,
        {"a": 3, "b": None, "in": None},
    ]


def test_merge_append_still_refuses_a_missing_required_field_inside_a_struct(local_store: Any) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("s", pa.struct([("a", pa.int64()), pa.field("b", pa.string(), nullable=False)]))]
    )
    t = create_table_in(local_store, schema)
    data = pa.table({"id": [1], "s": pa.array([{"a": 1}], pa.struct([("a", pa.int64())]))})
    with pytest.raises(lakefmt.SchemaMismatchError, match="column 's'"):
        t.append(data, schema_mode="merge")
    assert t.latest_snapshot() is None
    with pytest.raises(lakefmt.SchemaMismatchError):
        t.append(data)  # without merge: refused as before
