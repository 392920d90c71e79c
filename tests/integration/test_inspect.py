"""``Table.inspect``: the metadata tables as Arrow tables with fixed schemas, holding what the rest of the API says
(``snapshots()``, ``history()``, ``files()``, ``changes()``, the tags), on a plain table, a key table with deletion
vectors and a table without commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.read import inspect

SCHEMAS = {
    "snapshots": inspect.SNAPSHOTS_SCHEMA,
    "history": inspect.HISTORY_SCHEMA,
    "files": inspect.FILES_SCHEMA,
    "delete_files": inspect.FILES_SCHEMA,
    "deletion_vectors": inspect.DELETION_VECTORS_SCHEMA,
    "partitions": inspect.PARTITIONS_SCHEMA,
    "manifests": inspect.MANIFESTS_SCHEMA,
    "tags": inspect.TAGS_SCHEMA,
}
NOSYNC = {"write.fsync": "false", "compaction.auto": "false"}
EVENTS = pa.schema([("id", pa.int64()), ("dt", pa.string())])
KEYED = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def events(path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(path / "events"), EVENTS, partition_by=["dt"], options=NOSYNC)
    t.append(pa.table({"id": [1, 2, 3], "dt": ["2026-11-01", "2026-11-01", "2026-11-02"]}, schema=EVENTS))
    t.append(pa.table({"id": [4], "dt": ["2026-11-02"]}, schema=EVENTS))
    t.delete("id = 1")
    t.create_tag("first", 1, retain="30d")
    return t


def keyed(path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(path / "keyed"), KEYED, primary_key=["id"], options={**NOSYNC, "bucket": "2"})
    t.upsert(pa.table({"id": list(range(10)), "v": ["a"] * 10}, schema=KEYED))
    t.upsert(pa.table({"id": [1, 2, 3], "v": ["b"] * 3}, schema=KEYED))
    t.delete_keys(pa.table({"id": [5]}))
    return t


def parts(value: list[tuple[str, str | None]]) -> dict[str, str | None]:
    return dict(value)


@pytest.mark.parametrize("make", [events, keyed])
def test_every_table_has_its_fixed_schema(tmp_path: Path, make: Any) -> None:
    t = make(tmp_path)
    for name, schema in SCHEMAS.items():
        assert getattr(t.inspect, name)().schema == schema, name


def test_a_table_without_commits_has_empty_tables_of_the_same_schemas(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "empty"), EVENTS, partition_by=["dt"])
    for name, schema in SCHEMAS.items():
        got = getattr(t.inspect, name)()
        assert got.num_rows == 0 and got.schema == schema, name
    assert t.inspect.audit_log().num_rows == 0


def test_snapshots_and_history_say_what_the_api_says(tmp_path: Path) -> None:
    t = events(tmp_path)
    snaps = t.inspect.snapshots().to_pylist()
    assert [s["snapshot_id"] for s in snaps] == [s.id for s in t.snapshots()]
    for row, s in zip(snaps, t.snapshots(), strict=True):
        assert row["commit_kind"] == s.commit_kind.value and row["operation"] == s.operation.value
        assert row["total_record_count"] == s.total_record_count and row["delta_record_count"] == s.delta_record_count
        assert int(row["commit_time"].timestamp() * 1000) == s.time_millis
        assert parts(row["properties"]) == dict(s.properties)
        assert row["parent_id"] == (s.id - 1 if s.id > 1 else None)
        assert row["delta_manifest_list"] == s.delta_manifest_list
    history = t.inspect.history().to_pylist()
    records = list(reversed(t.history()))
    assert len(history) == len(records) == 3
    for row, rec in zip(history, records, strict=True):
        for key in ("version", "operation", "rows_added", "rows_removed", "files_added", "files_removed",
                    "commit_user", "commit_identifier", "commit_kind", "schema_id", "total_rows", "total_files"):
            assert row[key] == rec[key], key
        assert parts(row["operation_parameters"]) == rec["operation_parameters"]
        assert int(row["timestamp"].timestamp() * 1000) == rec["timestamp"]
    assert [r["version"] for r in t.inspect.history(limit=2).to_pylist()] == [2, 3]
    assert history[-1]["operation"] == "DELETE" and history[-1]["parameters"]


def test_files_and_partitions_add_up_to_the_live_files(tmp_path: Path) -> None:
    t = events(tmp_path)
    files = t.inspect.files()
    tasks = {f.path: f for f in t.files()}
    assert sorted(files.column("file_path").to_pylist()) == sorted(tasks)
    for row in files.to_pylist():
        task = tasks[row["file_path"]]
        assert (row["record_count"], row["file_size_in_bytes"], row["schema_id"]) == (
            task.row_count, task.file_size, task.schema_id
        )
        assert parts(row["partition"]) == task.partition and row["deleted_record_count"] == 0
        assert (row["content"], row["file_format"], row["bucket"]) == (0, "PARQUET", None)
    assert t.inspect.files(1).num_rows == len(t.files(1))
    by_part: dict[str | None, list[Any]] = {}
    for f in t.files():
        by_part.setdefault(f.partition["dt"], []).append(f)
    rows = {parts(r["partition"])["dt"]: r for r in t.inspect.partitions().to_pylist()}
    assert set(rows) == set(by_part)
    for dt, fs in by_part.items():
        assert rows[dt]["file_count"] == len(fs)
        assert rows[dt]["record_count"] == sum(f.row_count for f in fs)
        assert rows[dt]["total_data_file_size_in_bytes"] == sum(f.file_size for f in fs)
    assert sum(r["record_count"] for r in rows.values()) == t.latest_snapshot().total_record_count  # type: ignore[union-attr]
    assert t.inspect.delete_files().num_rows == 0 and t.inspect.deletion_vectors().num_rows == 0
    with pytest.raises(lakefmt.SnapshotNotFoundError):
        t.inspect.files(99)


def test_manifests_list_what_the_snapshot_reads(tmp_path: Path) -> None:
    t = events(tmp_path)
    manifests = t.inspect.manifests()
    assert set(manifests.column("manifest_list").to_pylist()) <= {"base", "delta"}
    for path, length in zip(manifests.column("path").to_pylist(), manifests.column("length").to_pylist(), strict=True):
        assert len(t.io.read(path)) == length
    added = pc.sum(manifests.column("added_files_count")).as_py()
    deleted = pc.sum(manifests.column("deleted_files_count")).as_py()
    assert added - deleted == len(t.files())  # ADD minus DELETE entries: the live files
    bounds = [b for s in manifests.column("partition_summaries").to_pylist() for b in s]
    assert bounds and all(b["field"] == "dt" and b["lower_bound"] <= b["upper_bound"] for b in bounds)


def test_tags(tmp_path: Path) -> None:
    t = events(tmp_path)
    t.create_tag("forever")
    tags = t.inspect.tags().to_pylist()
    assert [r["name"] for r in tags] == [tag.name for tag in t.tags()] == ["first", "forever"]
    first, forever = tags
    assert first["snapshot_id"] == 1 and first["record_count"] == t.snapshot(1).total_record_count
    assert first["max_reference_age_in_ms"] == 30 * 86_400_000 and forever["max_reference_age_in_ms"] is None
    assert forever["snapshot_id"] == t.version() and not first["expired"] and not forever["expired"]


def test_a_key_table_shows_its_deletion_vectors(tmp_path: Path) -> None:
    t = keyed(tmp_path)
    files = t.inspect.files()
    assert set(files.column("bucket").to_pylist()) == {0, 1}
    deleted = {f.path: f.deletion_vector.cardinality for f in t.files() if f.deletion_vector}
    assert {r["file_path"]: r["deleted_record_count"] for r in files.to_pylist() if r["deleted_record_count"]} == (
        deleted
    )
    assert sum(deleted.values()) == 4  # 3 keys replaced and 1 deleted
    vectors = t.inspect.deletion_vectors().to_pylist()
    assert {v["referenced_data_file"]: v["record_count"] for v in vectors} == deleted
    puffins = t.inspect.delete_files().to_pylist()
    assert {p["file_path"] for p in puffins} == {v["file_path"] for v in vectors}
    assert all(p["content"] == 1 and p["file_format"] == "PUFFIN" for p in puffins)
    assert sum(p["record_count"] for p in puffins) == sum(deleted.values())
    for v in vectors:
        size = next(p["file_size_in_bytes"] for p in puffins if p["file_path"] == v["file_path"])
        assert v["content_offset"] > 0 and v["content_offset"] + v["content_size_in_bytes"] <= size
    (part,) = t.inspect.partitions().to_pylist()
    assert part["position_delete_record_count"] == 4 and part["position_delete_file_count"] == len(puffins)
    assert part["record_count"] - part["position_delete_record_count"] == t.latest_snapshot().total_record_count  # type: ignore[union-attr]
    assert part["bucket_count"] == 2


def test_the_audit_log_is_the_change_feed_with_row_kinds(tmp_path: Path) -> None:
    t = keyed(tmp_path)
    log = t.inspect.audit_log()
    assert log.equals(t.changes(0, row_kinds=True))
    kinds = log.column("_row_kind").to_pylist()
    assert kinds.count("+I") == 10 and kinds.count("-U") == kinds.count("+U") == 3 and kinds.count("-D") == 1
    assert t.inspect.audit_log(2).equals(t.changes(2, row_kinds=True))


def test_the_audit_log_by_default_reads_the_retained_history(tmp_path: Path) -> None:
    """Found: ``audit_log()`` with no arguments started at snapshot 0 and raised ``SnapshotNotFoundError`` once any
    snapshot expired. By default it now reads the retained history: from the first commit while it is retained,
    else the changes after the earliest retained snapshot (the first ones that can still be read)."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "a"), schema, primary_key=["k"], options={"compaction.auto": "false"})
    for i in range(4):
        t.upsert(pa.table({"k": [i], "v": [i]}, schema=schema))
    assert t.inspect.audit_log().column("_commit_snapshot").to_pylist() == [1, 2, 3, 4]
    t.expire_snapshots(retain_max=2)
    assert [s.id for s in t.snapshots()] == [3, 4]
    log = t.inspect.audit_log()
    assert log.column("_commit_snapshot").to_pylist() == [4]
    assert log.equals(t.changes(3, row_kinds=True))
