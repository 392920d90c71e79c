"""lakefmt's SQL functions (Python UDTFs registered by ``pyspark_lakefmt.register``) against real Spark (the shared
``local[2]`` session): system tables and procedures called by name from SQL, on one small table, each result checked
against the library's own view of the table; and the errors Spark shows for a bad call."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


@pytest.fixture(scope="module")
def sql(spark: Any) -> Any:
    """The shared session with lakefmt's SQL functions registered; ``sql(text)`` collects a query's rows."""
    import pyspark_lakefmt

    names = pyspark_lakefmt.register(spark)
    assert set(names) <= {r.function for r in spark.sql("SHOW USER FUNCTIONS").collect()} | set(names)
    return lambda text: spark.sql(text).collect()


def _append(t: lakefmt.Table, ids: list[int], dt: str) -> None:
    t.append(pa.table({"id": ids, "dt": [dt] * len(ids)}, schema=SCHEMA))


def _ids(t: lakefmt.Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def test_system_tables_and_procedures_in_sql(spark: Any, sql: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "ev"), SCHEMA, partition_by=["dt"])
    uri = t.uri
    _append(t, [1, 2], "a")
    _append(t, [3], "a")
    _append(t, [4], "b")

    # snapshots and history: one row per snapshot, as the library lists them
    snaps = sql(f"SELECT * FROM lakefmt_snapshots('{uri}') ORDER BY snapshot_id")
    assert [(r.snapshot_id, r.commit_kind, r.total_record_count, r.delta_record_count) for r in snaps] == [
        (s.id, s.commit_kind.value, s.total_record_count, s.delta_record_count) for s in t.snapshots()
    ]
    assert snaps[0].commit_time == datetime.datetime.fromtimestamp(t.snapshots()[0].time_millis / 1000)
    files = sql(f"SELECT * FROM lakefmt_files('{uri}') ORDER BY file_path")
    assert sorted((f.path, f.row_count, f.file_size) for f in t.files()) == [
        (r.file_path, r.record_count, r.file_size_in_bytes) for r in files
    ]
    assert sorted(r.partition["dt"] for r in files) == ["a", "a", "b"]
    assert [r.record_count for r in sql(f"SELECT * FROM lakefmt_files('{uri}', 1)")] == [2]

    # a delete by SQL predicate on a data column, then its change feed
    [deleted] = sql(f"SELECT * FROM lakefmt_delete('{uri}', 'id IN (2, 3) AND dt = ''a''')")
    assert (deleted.snapshot_id, deleted.deleted_rows, deleted.remaining_rows) == (4, 2, 2)
    assert _ids(t) == [1, 4]
    assert t.history(limit=1)[0]["operation_parameters"]["predicate"] == "id IN (2, 3) AND dt = 'a'"
    [nothing] = sql(f"SELECT * FROM lakefmt_delete('{uri}', 'id > 100')")
    assert (nothing.snapshot_id, nothing.deleted_rows, nothing.remaining_rows) == (None, 0, 2)
    changes = sql(f"SELECT id, _change_type, _commit_snapshot FROM lakefmt_table_changes('{uri}', 3) ORDER BY id")
    assert [tuple(r) for r in changes] == [(2, "delete", 4), (3, "delete", 4)]
    feed = t.changes(0, 2).to_pylist()
    assert [(r.id, r.dt, r._change_type) for r in sql(f"SELECT * FROM lakefmt_table_changes('{uri}', 0, 2)")] == [
        (c["id"], c["dt"], c["_change_type"]) for c in feed
    ]

    # restore undoes the delete; compaction merges partition a's two files; expiration drops the oldest snapshots
    [restored] = sql(f"SELECT * FROM lakefmt_restore('{uri}', 3)")
    assert (restored.snapshot_id, restored.restored_snapshot_id, restored.rows_added) == (5, 3, 3)
    assert _ids(t) == [1, 2, 3, 4]
    [compacted] = sql(f"SELECT * FROM lakefmt_compact('{uri}', min_files => 2)")
    assert (compacted.snapshot_id, compacted.rewritten_files, compacted.written_files) == (6, 2, 1)
    assert t.latest_snapshot().commit_kind is lakefmt.CommitKind.COMPACT  # type: ignore[union-attr]
    assert _ids(t) == [1, 2, 3, 4]
    [dry] = sql(f"SELECT * FROM lakefmt_expire('{uri}', retain_max => 2, dry_run => true)")
    assert (dry.dry_run, dry.expired_snapshots) == (True, 4) and len(t.snapshots()) == 6
    [expired] = sql(f"SELECT * FROM lakefmt_expire('{uri}', NULL, 1, 2)")
    assert (expired.expired_snapshots, expired.earliest_snapshot, expired.latest_snapshot) == (4, 5, 6)
    assert [s.id for s in t.snapshots()] == [5, 6] and _ids(t) == [1, 2, 3, 4]

    # the history of what is left: the restore (rows removed and added again) and the compaction (the three rows
    # of partition a rewritten: in the files it removed and in the one it added), as Table.history() counts them
    hist = sql(f"SELECT * FROM lakefmt_history('{uri}') ORDER BY version")
    library = list(reversed(t.history()))
    assert [h.operation for h in hist] == ["RESTORE", "COMPACT"]
    assert [
        (h.version, h.operation, h.operation_parameters, h.rows_added, h.rows_removed, h.files_added,
         h.files_removed, h.commit_user, h.commit_identifier) for h in hist
    ] == [
        (r["version"], r["operation"], r["operation_parameters"], r["rows_added"], r["rows_removed"],
         r["files_added"], r["files_removed"], r["commit_user"], r["commit_identifier"]) for r in library
    ]
    assert hist[1].rows_added == hist[1].rows_removed and hist[1].files_removed == 2  # a compaction moves rows
    assert hist[0].timestamp == datetime.datetime.fromtimestamp(library[0]["timestamp"] / 1000)
    assert hist[0].parameters["lakefmt.restored-snapshot"] == "3"
    assert [(h.version, h.operation, h.rows_added, h.rows_removed) for h in hist] == [
        (5, "RESTORE", 3, 1), (6, "COMPACT", 3, 3)
    ]
    assert hist[0].operation_parameters["snapshot"] == "3"


def _error(spark: Any, text: str) -> str:
    with pytest.raises(Exception) as exc:
        spark.sql(text).collect()
    return str(exc.value)


def test_a_bad_call_is_one_clear_line(spark: Any, sql: Any, tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "ev"), SCHEMA)
    _append(t, [1], "a")
    missing = tmp_path / "missing"
    cases = {
        f"SELECT * FROM lakefmt_history('{missing}')": f"NotATableError: lakefmt_history('{missing}'): ",
        f"SELECT * FROM lakefmt_files('{t.uri}', 9)": f"SnapshotNotFoundError: lakefmt_files('{t.uri}', 9): ",
        f"SELECT * FROM lakefmt_delete('{t.uri}', 'id = ''x''')": "InvalidPredicateError: lakefmt_delete(",
        f"SELECT * FROM lakefmt_restore('{t.uri}', 0)": (
            f"InvalidSnapshotIdError: lakefmt_restore({t.uri!r}, 0): snapshot_id 0 is invalid: snapshot ids start at 1"
        ),
        f"SELECT * FROM lakefmt_table_changes('{missing}', 0)": (
            f"NotATableError: lakefmt_table_changes('{missing}', 0): "
        ),
    }
    for query, expected in cases.items():
        text = _error(spark, query)
        assert expected in text, (query, text)
        assert text.count('File "') == 1, text  # the line that raised it, not a wall of lakefmt's and pyspark's
    assert _ids(t) == [1] and len(t.snapshots()) == 1  # nothing changed


def test_system_tables_are_the_leading_columns_of_table_inspect(spark: Any, sql: Any, tmp_path: Path) -> None:
    """``lakefmt_snapshots``, ``lakefmt_history`` and ``lakefmt_files`` return, row for row, the leading columns of
    ``Table.inspect``'s tables (one implementation, :mod:`lakefmt.read.inspect`), on a key table with a deletion
    vector too."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "k"), schema, primary_key=["id"], options={"bucket": "2"})
    t.upsert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    t.upsert(pa.table({"id": [2], "v": ["z"]}, schema=schema))
    for function, arrow, key in (
        ("lakefmt_snapshots", t.inspect.snapshots(), "snapshot_id"),
        ("lakefmt_history", t.inspect.history(), "version"),
        ("lakefmt_files", t.inspect.files(), "file_path"),
    ):
        rows = sql(f"SELECT * FROM {function}('{t.uri}') ORDER BY {key}")
        names = list(rows[0].asDict()) if rows else []
        assert names == arrow.column_names[: len(names)] and len(names) >= 6, function
        expected = sorted(arrow.select(names).to_pylist(), key=lambda r: r[key])
        assert [_plain(r.asDict()) for r in rows] == [_plain(r) for r in expected], function
    assert any(r.deleted_record_count for r in sql(f"SELECT * FROM lakefmt_files('{t.uri}')"))


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with maps as dicts and times as epoch milliseconds (Spark's are naive local times)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, list):
            v = dict(v)
        elif isinstance(v, datetime.datetime):
            v = round((v if v.tzinfo else v.astimezone()).timestamp() * 1000)
        out[k] = v
    return out
