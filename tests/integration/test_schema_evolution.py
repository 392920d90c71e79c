"""Schema evolution on real storage (local disk, memory, S3 through moto): every allowed change read back
latest, by time travel, through a filter on the changed column and incrementally; every refused change leaves
the table as it was; the pruning traps; the golden version-1 table; writers whose schema changed while they
ran; racing schema changes; merge-mode appends; the CLI."""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt import hooks
from lakefmt.cli.main import main
from lakefmt.io import file_io_for
from lakefmt.spec import layout

D = decimal.Decimal
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_v1"
INFO = pa.struct([("a", pa.int16()), ("b", pa.string())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        ("name", pa.string()),
        ("score", pa.float32()),
        ("amount", pa.decimal128(9, 2)),
        ("info", INFO),
        ("dt", pa.string()),
    ]
)


def _rows(schema: pa.Schema, ids: list[int], **extra: list[Any]) -> pa.Table:
    """Rows for ``ids`` in ``schema``: each column derived from the id, unless given."""
    values: dict[str, Any] = {
        "id": ids,
        "name": [f"n{i}" for i in ids],
        "user_name": [f"n{i}" for i in ids],
        "score": [i + 0.5 for i in ids],
        "amount": [D(i) + D("0.25") for i in ids],
        "info": [{"a": i, "b": f"b{i}"} for i in ids],
        "dt": ["d1" if i % 2 else "d2" for i in ids],
    }
    values.update(extra)
    cols = {}
    for f in schema:
        if pa.types.is_struct(f.type):
            names = {f.type.field(i).name for i in range(f.type.num_fields)}
            raw = [{k: v for k, v in (r or {}).items() if k in names} for r in values.get(f.name, values["info"])]
            cols[f.name] = pa.array(raw, f.type)
        else:
            cols[f.name] = pa.array(values.get(f.name, [None] * len(ids)), f.type)
    return pa.table(cols, schema=schema)


def _table(store: Any) -> lakefmt.Table:
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    t.append(_rows(SCHEMA, [1, 2, 3, 4]))
    return t


def _by_id(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r["id"] is None, r["id"] or 0))


# -- every allowed change ---------------------------------------------------------------------------------


def _py(schema: pa.Schema, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Model rows (dicts) as the table reads them: in ``schema``'s column order, sorted by id."""
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    return _by_id(table)


def _struct_add(r: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**r, "info": None if r["info"] is None else {**r["info"], key: value}}


#: the allowed changes, applied one after another to one table: (name, the change, what it does to the rows
#: already there, the two rows written after it, a filter on the changed column, the rows that filter keeps)
STEPS: list[
    tuple[
        str,
        Callable[[lakefmt.UpdateSchema], Any],
        Callable[[dict], dict],
        list[dict],
        pc.Expression,
        Callable[[dict], bool],
    ]
] = [
    (
        "add-column",
        lambda u: u.add_column("country", pa.string()),
        lambda r: {**r, "country": None},
        [{"id": 5, "country": "fr"}, {"id": 6, "country": "fr"}],
        pc.field("country") == "fr",
        lambda r: r["country"] == "fr",
    ),
    (
        "add-struct-field",
        lambda u: u.add_column(("info", "c"), pa.int64()),
        lambda r: _struct_add(r, "c", None),
        [{"id": 7, "info": {"a": 7, "b": "b7", "c": 7}}, {"id": 8, "info": {"a": 8, "b": None, "c": 8}}],
        pc.field("info", "c") > 0,
        lambda r: r["info"] is not None and (r["info"]["c"] or 0) > 0,
    ),
    (
        "rename",
        lambda u: u.rename_column("name", "user_name"),
        lambda r: {**r, "user_name": r.pop("name")},
        [{"id": 9, "user_name": "n2"}, {"id": 10}],
        pc.field("user_name") == "n2",
        lambda r: r["user_name"] == "n2",
    ),
    (
        "drop-and-add-again",
        lambda u: u.drop_column("extra").add_column("extra", pa.string()),
        lambda r: {**r, "extra": None},
        [{"id": 11, "extra": "e"}, {"id": 12}],
        pc.field("extra").is_null(),
        lambda r: r["extra"] is None,
    ),
    (
        "reorder",
        lambda u: u.move_first("dt").move_after("id", "amount"),
        lambda r: r,
        [{"id": 13}, {"id": 14}],
        pc.field("id") >= 13,
        lambda r: r["id"] >= 13,
    ),
    (
        "widen-int",
        lambda u: u.update_column("id", pa.int64()).update_column(("info", "a"), pa.int32()),
        lambda r: r,
        [{"id": 2**31 + 15, "info": {"a": 2**20, "b": None, "c": None}}, {"id": 16}],
        (pc.field("id") > 2**31) | (pc.field("info", "a") > 2**16),
        lambda r: r["id"] > 2**31,
    ),
    (
        "widen-float",
        lambda u: u.update_column("score", pa.float64()),
        lambda r: r,
        [{"id": 17, "score": 1e300}, {"id": 18, "score": 0.25}],
        pc.field("score") > 3.9e38,
        lambda r: (r["score"] or 0) > 3.9e38,
    ),
    (
        "widen-decimal",
        lambda u: u.update_column("amount", pa.decimal128(20, 2)),
        lambda r: r,
        [{"id": 19, "amount": D("12345678901234.25")}, {"id": 20}],
        pc.field("amount") > D("9999999.99"),
        lambda r: r["amount"] is not None and r["amount"] > D("9999999.99"),
    ),
    (
        "make-nullable",
        lambda u: u.make_nullable("req"),
        lambda r: r,
        [{"id": 21, "req": None}, {"id": 22}],
        pc.field("req").is_null(),
        lambda r: r["req"] is None,
    ),
]

BASE = pa.schema(
    [
        *SCHEMA.remove(0).insert(0, pa.field("id", pa.int32())),
        ("extra", pa.int64()),
        pa.field("req", pa.int8(), nullable=False),
    ]
)


def _filled(row: dict[str, Any], schema: pa.Schema = BASE) -> dict[str, Any]:
    """A row written after a step: the columns it does not give derived from its id."""
    i = row["id"]
    extra: Any = i if schema.field("extra").type == pa.int64() else f"e{i}"
    derived = {
        "name": f"n{i}",
        "user_name": f"n{i}",
        "score": i + 0.5,
        "amount": D(i % 1000) + D("0.25"),
        "info": {"a": i % 1000, "b": f"b{i}"},
        "dt": "d1" if i % 2 or i > 4 else "d2",  # rows after the first four: one file per append
        "extra": extra,
        "req": 1,
    }
    return {k: v for k, v in {**derived, **row}.items() if k in schema.names}


def test_every_allowed_change_reads_latest_by_time_travel_filtered_and_incrementally(store: Any) -> None:
    """Each change in turn: rows written before it read by field id (latest), the snapshot before it reads
    with the schema it had, a filter on the changed column is right over old and new files, and an incremental
    read across the change returns what came after it, in the new schema."""
    # merges at every commit: manifests written under different schemas (and versions of a column's type) are
    # concatenated into one, as a long history would do. On S3 (each request a round trip to moto) the checks
    # that do not depend on the storage (merges, count, to_dataset) are left to local disk and memory.
    lean = store.kind == "s3"
    options = {} if lean else {"manifest.merge-min-count": "2"}
    t = create_table_in(store, BASE, partition_by=["dt"], options=options)
    model = [_filled({"id": i}) for i in (1, 2, 3, 4)]
    t.append(pa.Table.from_pylist([{f.name: r[f.name] for f in BASE} for r in model], schema=BASE))
    for name, change, transform, written, flt, keeps in STEPS:
        before, before_schema, before_rows = t.latest_snapshot(), t.schema(), _py(t.schema(), model)
        assert before is not None
        with t.update_schema() as u:
            change(u)
        schema = t.schema()
        model = [transform(dict(r)) for r in model]
        new = [_filled(w, schema) for w in written]
        t.append(pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in new], schema=schema))
        model += _py(schema, new)  # as stored (a float32 rounds)
        latest = t.to_arrow()
        assert latest.schema == schema and _by_id(latest) == _py(schema, model), name
        assert t.schema(snapshot_id=before.id) == before_schema, name
        assert _by_id(t.scan(snapshot_id=before.id).to_arrow()) == before_rows, name
        want = sorted(r["id"] for r in model if keeps(r))
        scan = t.scan(filter=flt)  # planned once, read three ways
        assert sorted(scan.to_arrow().column("id").to_pylist()) == want, name
        if not lean:
            assert scan.count() == len(want), name
        if not lean and name != "widen-float":  # to_dataset() refuses a float column's filter (NaN): Scan.to_dataset
            assert scan.to_dataset().to_table().num_rows == len(want), name
        inc = t.scan(from_snapshot=before.id).to_arrow()
        assert inc.schema == schema and _by_id(inc) == _py(schema, new), name
    assert [s.id for s in t.schemas()] == list(range(len(STEPS) + 1))


# -- every refused change leaves the table as it was ------------------------------------------------------

REFUSED: dict[str, Callable[[lakefmt.UpdateSchema], Any]] = {
    "narrow": lambda u: u.update_column("id", pa.int16()),
    "float-narrow": lambda u: u.update_column("score", pa.float16()),
    "other-type": lambda u: u.update_column("name", pa.int64()),
    "decimal-scale": lambda u: u.update_column("amount", pa.decimal128(12, 3)),
    "partition-type": lambda u: u.update_column("dt", pa.large_string()),
    "drop-partition": lambda u: u.drop_column("dt"),
    "rename-partition": lambda u: u.rename_column("dt", "day"),
    "name-used": lambda u: u.rename_column("name", "score"),
    "add-existing": lambda u: u.add_column(("info", "a"), pa.int64()),
    "unknown-column": lambda u: u.drop_column("nope"),
    "second-of-two": lambda u: u.add_column("ok", pa.int8()).update_column("id", pa.int8()),
}


def test_every_refused_change_is_a_clear_error_and_the_table_is_unchanged(store: Any) -> None:
    t = _table(store)
    listing = file_listing(t.io)
    for name, change in REFUSED.items():
        with pytest.raises(lakefmt.SchemaEvolutionError) as err, t.update_schema() as u:
            change(u)
        assert str(err.value).startswith("cannot ") or "has no column 'nope'" in str(err.value), name
        assert file_listing(t.io) == listing, name
    again = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    assert again.table_schema().id == 0 and again.schema() == SCHEMA
    assert _by_id(again.to_arrow()) == _by_id(_rows(SCHEMA, [1, 2, 3, 4]))


# -- pruning traps ----------------------------------------------------------------------------------------


def test_pruning_traps(local_store: Any) -> None:
    """Where data silently disappears when statistics are taken by name or in the wrong type."""
    schema = pa.schema([("id", pa.int32()), ("x", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
    t = create_table_in(local_store, schema, partition_by=["dt"])
    t.append(pa.table({"id": pa.array([1, 2], pa.int32()), "x": [1, 5], "v": ["a", "b"], "dt": ["p", "p"]}))
    t.append(pa.table({"id": pa.array([3], pa.int32()), "x": [7], "v": ["c"], "dt": ["q"]}))
    with t.update_schema() as u:
        u.rename_column("v", "w")  # a renamed column's old stats still prune
        u.drop_column("x")
        u.add_column("x", pa.string())  # the same name, a new column: the old x's stats must not touch it
        u.update_column("id", pa.int64())
    t.append(pa.table({"id": [2**40], "w": ["z"], "x": ["new"], "dt": ["p"]}))

    def ids(flt: pc.Expression) -> list[int]:
        return sorted(t.scan(filter=flt).to_arrow().column("id").to_pylist())

    def files(flt: pc.Expression) -> int:
        return len(t.scan(filter=flt).files())

    assert ids(pc.field("w") == "b") == [2] and files(pc.field("w") == "b") == 1
    # every old file has x null (it came after them): under the old name's stats (1..5, no nulls) they would go
    assert ids(pc.field("x").is_null()) == [1, 2, 3]
    assert ids(pc.field("x") == "new") == [2**40] and files(pc.field("x") == "new") == 1
    # beyond int32's range: compared in int64, never overflowed into the old type
    assert ids(pc.field("id") > 2**31) == [2**40] and files(pc.field("id") > 2**31) == 1
    assert ids(pc.field("id") < 2**31) == [1, 2, 3]
    assert ids(pc.field("id") >= -(2**31) - 1) == [1, 2, 3, 2**40]
    # partition pruning after a rename of a non-partition column
    flt = (pc.field("dt") == "q") & (pc.field("w") != "zz")
    assert ids(flt) == [3] and files(flt) == 1


def test_a_version_1_tables_name_keyed_stats_are_read_by_id_after_the_upgrade(tmp_path: Any) -> None:
    t = _golden(tmp_path)
    with t.update_schema() as u:  # the first change upgrades the table
        u.rename_column("user", "who")
        u.drop_column("score")
        u.add_column("score", pa.float64())
    assert t.table_schema().format_version == 2
    assert sorted(t.scan(filter=pc.field("score").is_null()).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    assert t.scan(filter=pc.field("who") == "cy").to_arrow().column("id").to_pylist() == [4]
    assert len(t.scan(filter=pc.field("who") == "cy").files()) == 1  # version-1 stats, by the implied id


# -- the golden version-1 table ---------------------------------------------------------------------------

GOLDEN_ROWS = [
    {"id": 1, "user": "ann", "score": 1.5, "amount": D("1.10"), "info": {"a": 1, "b": "x"}, "dt": "2026-01-01"},
    {"id": 2, "user": "bob", "score": 2.5, "amount": D("2.20"), "info": None, "dt": "2026-01-01"},
    {"id": 3, "user": None, "score": None, "amount": D("3.30"), "info": {"a": 3, "b": None}, "dt": "2026-01-02"},
    {"id": 4, "user": "cy", "score": 4.0, "amount": D("4.40"), "info": {"a": 4, "b": "w"}, "dt": "2026-01-02"},
]


def _golden(tmp_path: Any, store: Any = None) -> lakefmt.Table:
    """A copy of the golden version-1 table (written by lakefmt before format version 2) on ``store``."""
    uri = str(tmp_path / "golden") if store is None else store.uri()
    options = {} if store is None else store.storage_options
    io = file_io_for(uri, options)
    for path in sorted(GOLDEN.rglob("*")):
        if path.is_file():
            io.write(path.relative_to(GOLDEN).as_posix(), path.read_bytes(), sync=False)
    return lakefmt.open_table(uri, storage_options=options)


def test_the_golden_version_1_table_reads_keeps_writing_version_1_and_upgrades(store: Any, tmp_path: Any) -> None:
    t = _golden(tmp_path, store)
    assert t.table_schema().format_version == 1
    assert _by_id(t.to_arrow()) == GOLDEN_ROWS
    assert _by_id(t.scan(snapshot_id=1).to_arrow()) == GOLDEN_ROWS[:3]
    assert t.scan(filter=pc.field("id") == 4).to_arrow().to_pylist() == GOLDEN_ROWS[3:]
    assert len(t.scan(filter=pc.field("id") == 4).files()) == 1
    # a writer of a version-1 table writes what version-1 readers read: version-1 files, no field ids
    extra = {"id": 5, "user": "dd", "score": 5.0, "amount": D("5.50"), "info": None, "dt": "2026-01-03"}
    snap = t.append(pa.Table.from_pylist([extra], schema=t.schema()))
    assert snap is not None and snap.version == 1
    assert json.loads(t.io.read(layout.snapshot_path(snap.id)))["version"] == 1
    assert [s.id for s in t.schemas()] == [0]
    (new_file,) = [f for f in t.files() if f.partition == {"dt": "2026-01-03"}]
    assert all(f.metadata is None for f in pq.read_schema(pa.BufferReader(t.io.read(new_file.path))))
    # the upgrade: same columns, ids in column order, format version 2 from then on
    dry = t.upgrade(dry_run=True)
    assert dry.format_version == 2 and [s.id for s in t.schemas()] == [0]
    upgraded = t.upgrade()
    assert upgraded.id == 1 and upgraded.format_version == 2 and upgraded.arrow_schema == t.schema(snapshot_id=1)
    assert upgraded.column_ids == {"id": 1, "user": 2, "score": 3, "amount": 4, "info": 5, "dt": 6}
    latest = t.latest_snapshot()
    assert latest is not None and latest.version == 2 and latest.schema_id == 1
    assert latest.properties == {"lakefmt.operation": "upgrade"} and latest.delta_record_count == 0
    assert t.upgrade() == upgraded  # a second upgrade does nothing
    assert _by_id(t.to_arrow()) == [*GOLDEN_ROWS, extra]
    after = t.append(pa.Table.from_pylist([{**extra, "id": 6}], schema=t.schema()))
    assert after is not None and after.version == 2
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    assert len(fresh.to_arrow()) == 6 and fresh.scan(snapshot_id=2).schema.format_version == 1


# -- writers whose schema changed while they ran ----------------------------------------------------------


def test_a_writer_whose_files_lack_an_added_column_commits_under_the_new_schema(local_store: Any) -> None:
    t = _table(local_store)
    committer = t.new_committer("stream")
    writer = t.new_writer()  # schema 0
    writer.write(_rows(SCHEMA, [5]))
    message = writer.prepare_commit()
    other = lakefmt.open_table(t.uri)
    with other.update_schema() as u:
        u.add_column("country", pa.string()).rename_column("name", "user_name")
    snap = committer.commit([message], identifier=1)
    assert snap is not None and snap.schema_id == 1
    rows = _by_id(lakefmt.open_table(t.uri).to_arrow())
    assert rows[4]["user_name"] == "n5" and rows[4]["country"] is None
    # exactly-once across the change: a replay of identifier 1 is skipped
    assert committer.commit([message], identifier=1) is None
    assert committer.last_result is not None and committer.last_result.outcome.value == "already-committed"


def test_a_writer_whose_column_was_dropped_meanwhile_fails_and_commits_nothing(local_store: Any) -> None:
    t = _table(local_store)
    writer = t.new_writer()
    writer.write(_rows(SCHEMA, [5]))
    message = writer.prepare_commit()
    with lakefmt.open_table(t.uri).update_schema() as u:
        u.drop_column(("info", "b"))
    latest = t.latest_snapshot()
    with pytest.raises(lakefmt.SchemaConflictError, match=r"'info\.b' \(field id 8\)"):
        t.new_committer("w").commit([message], identifier=1)
    assert t.latest_snapshot() == latest
    assert len(lakefmt.open_table(t.uri).to_arrow()) == 4


def test_a_schema_change_that_lands_during_a_commit_is_checked_after_the_lost_race(local_store: Any) -> None:
    """The commit had read the latest snapshot (schema 0) when the schema change's snapshot took its id."""
    t = _table(local_store)
    writer = t.new_writer()
    writer.write(_rows(SCHEMA, [5]))
    message = writer.prepare_commit()
    fired: list[int] = []

    def change_schema(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and not fired:
            fired.append(snap.id)
            with lakefmt.open_table(t.uri).update_schema() as u:
                u.drop_column("score")

    remove = hooks.add_publish_hook(change_schema)
    try:
        with pytest.raises(lakefmt.SchemaConflictError, match="'score'"):
            t.new_committer("w").commit([message], identifier=1)
    finally:
        remove()
    assert fired == [2]
    latest = t.latest_snapshot()
    assert latest is not None and latest.id == 2 and latest.properties == {"lakefmt.operation": "schema-change"}


def test_a_commit_that_loses_to_an_added_column_lands_under_it(local_store: Any) -> None:
    t = _table(local_store)
    writer = t.new_writer()
    writer.write(_rows(SCHEMA, [5]))
    message = writer.prepare_commit()
    fired: list[int] = []

    def change_schema(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and not fired:
            fired.append(snap.id)
            with lakefmt.open_table(t.uri).update_schema() as u:
                u.add_column("late", pa.int8())

    remove = hooks.add_publish_hook(change_schema)
    try:
        snap = t.new_committer("w").commit([message], identifier=1)
    finally:
        remove()
    assert snap is not None and snap.id == 3 and snap.schema_id == 1
    assert lakefmt.open_table(t.uri).to_arrow().column("late").null_count == 5


# -- racing schema changes --------------------------------------------------------------------------------


def test_a_schema_change_that_lost_the_race_is_applied_again_on_the_winner(local_store: Any) -> None:
    store = local_store
    t = _table(store)
    mine = t.update_schema().add_column("mine", pa.int8())
    lakefmt.open_table(t.uri, storage_options=store.storage_options).update_schema().add_column(
        "theirs", pa.int8()
    ).commit()
    result = mine.commit()
    assert result.id == 2 and result.arrow_schema.names[-2:] == ["theirs", "mine"]
    assert result.column_ids["mine"] == 10 and result.column_ids["theirs"] == 9
    assert [s.schema_id for s in t.snapshots()][-2:] == [1, 2]


def test_a_schema_change_that_no_longer_applies_is_a_conflict_and_writes_nothing(local_store: Any) -> None:
    store = local_store
    t = _table(store)
    mine = t.update_schema().rename_column("name", "mine")
    lakefmt.open_table(t.uri, storage_options=store.storage_options).update_schema().rename_column(
        "name", "theirs"
    ).commit()
    listing = file_listing(t.io)
    with pytest.raises(lakefmt.SchemaConflictError, match="no column 'name'"):
        mine.commit()
    assert file_listing(t.io) == listing
    assert lakefmt.open_table(t.uri, storage_options=store.storage_options).schema().names[1] == "theirs"


def test_a_schema_change_keeps_the_dedup_memory(local_store: Any) -> None:
    t = _table(local_store)
    c = t.new_committer("stream")
    w = t.new_writer()
    w.write(_rows(SCHEMA, [5]))
    c.commit([w.prepare_commit()], identifier=7)
    users = t.latest_snapshot().commit_users  # type: ignore[union-attr]
    with t.update_schema() as u:
        u.add_column("x", pa.int8())
    snap = t.latest_snapshot()
    assert snap is not None and snap.commit_users == users and snap.commit_kind is lakefmt.CommitKind.APPEND
    assert t.commit_user_identifier("stream") == 7


def test_nothing_to_change_writes_nothing(local_store: Any) -> None:
    t = _table(local_store)
    listing = file_listing(t.io)
    with t.update_schema() as u:
        u.rename_column("name", "name").make_nullable("name")
    assert file_listing(t.io) == listing and t.table_schema().id == 0


# -- merge-mode appends and coercion ----------------------------------------------------------------------


def test_append_in_merge_mode_adds_the_datas_new_columns(local_store: Any) -> None:
    t = _table(local_store)
    data = _rows(SCHEMA, [5]).append_column(pa.field("country", pa.string(), nullable=False), pa.array(["fr"]))
    with pytest.raises(lakefmt.SchemaMismatchError, match=r"extra column.*country"):
        t.append(data)
    assert t.table_schema().id == 0
    snap = t.append(data, schema_mode="merge")
    assert snap is not None and snap.schema_id == 1
    assert t.schema().field("country") == pa.field("country", pa.string(), nullable=True)
    assert [r["country"] for r in _by_id(t.to_arrow())] == [None, None, None, None, "fr"]
    assert t.append(data, schema_mode="merge") is not None and t.table_schema().id == 1  # nothing more to add
    with pytest.raises(ValueError, match="schema_mode"):
        t.append(data, schema_mode="overwrite")  # type: ignore[arg-type]


def test_a_polars_frame_is_written_with_safe_coercion(local_store: Any) -> None:
    import polars as pl  # the dev extra has it: this test must run, not skip
    t = create_table_in(local_store, pa.schema([("id", pa.int64()), ("user", pa.string())]))
    frame = pl.DataFrame({"id": pl.Series([1, 2], dtype=pl.Int16), "user": ["a", "b"]})
    assert t.append(frame) is not None
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "user": "a"}, {"id": 2, "user": "b"}]


# -- the CLI ----------------------------------------------------------------------------------------------


def test_cli_schema_history_and_upgrade(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    t = _golden(tmp_path)
    assert main(["schema", t.uri]) == 0
    out = capsys.readouterr().out
    assert "schema 0 (format version 1, field ids implied by column order" in out and "info.b" in out
    assert main(["upgrade", t.uri, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["upgraded"] is False and dry["schema_id"] == 1 and [s.id for s in t.schemas()] == [0]
    assert main(["upgrade", t.uri]) == 0
    assert "published schema 1: format version 1 -> 2" in capsys.readouterr().out
    assert main(["upgrade", t.uri]) == 0
    assert "already format version 2" in capsys.readouterr().out
    with lakefmt.open_table(t.uri).update_schema() as u:
        u.rename_column("user", "who").add_column(("info", "c"), pa.int8())
    assert main(["schema", t.uri, "--json"]) == 0
    fields = {f["path"]: f["id"] for f in json.loads(capsys.readouterr().out)["fields"]}
    assert fields["who"] == 2 and fields["info.c"] == 9 and fields["dt"] == 6
    assert main(["schema", t.uri, "--history", "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["schema_id"] for h in history] == [0, 1, 2]
    assert history[2]["changes"] == ["renamed 'user' to 'who' (field id 2)", "added 'info.c' int8 (field id 9)"]
