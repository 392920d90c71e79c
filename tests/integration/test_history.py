"""``Table.history()`` and ``lakefmt history``: every write path records what it did (one vocabulary,
:mod:`lakefmt.spec.operations`), with its parameters and the rows and files it added and removed; snapshots written
before operations were recorded read as their kind implies."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.errors import InvalidOptionError
from lakefmt.spec import operations
from lakefmt.spec.operations import Operation, operation_of

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _ops(t: lakefmt.Table) -> list[tuple[str, dict[str, str]]]:
    return [(h["operation"], h["operation_parameters"]) for h in t.history()]


def test_every_write_path_records_its_operation(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, ["dt"], {"compaction.auto": "false"})
    assert t.history() == [] and t.version() is None
    t.append(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"]}, schema=SCHEMA))
    t.overwrite(pa.table({"id": [4], "dt": ["a"]}, schema=SCHEMA), partition={"dt": "a"})
    t.overwrite(pa.table({"id": [5], "dt": ["b"]}, schema=SCHEMA), where="dt = 'b'")
    t.append(pa.table({"id": [6, 7], "dt": ["b", "b"]}, schema=SCHEMA))
    t.delete("id > 6")
    with t.update_schema() as u:
        u.add_column("x", pa.int32())
    t.compact(min_files=2)
    t.restore(1)
    history = t.history()
    assert _ops(t) == [
        ("RESTORE", {"snapshot": "1"}),
        ("COMPACT", {}),
        ("SCHEMA CHANGE", {}),
        ("DELETE", {"predicate": "id > 6"}),
        ("WRITE", {"mode": "append"}),
        ("OVERWRITE", {"mode": "overwrite", "predicate": "dt = 'b'"}),
        ("OVERWRITE", {"mode": "overwrite", "partition": '{"dt":"a"}'}),
        ("WRITE", {"mode": "append"}),
    ]
    assert [h["version"] for h in history] == list(range(8, 0, -1)) and t.version() == 8
    counts = [(h["rows_added"], h["rows_removed"], h["files_added"], h["files_removed"]) for h in history]
    # the delete rewrote the file of ids 6 and 7 without 7: its rows count on both sides, as the files do
    assert counts[3:] == [(1, 2, 1, 1), (2, 0, 1, 0), (1, 1, 1, 1), (1, 2, 1, 1), (3, 0, 2, 0)]
    assert counts[1] == (2, 2, 1, 2) and counts[2] == (0, 0, 0, 0)  # a compaction changes no row
    first = history[-1]
    assert first["commit_identifier"] == 0 and first["commit_user"].startswith("oneoff-")
    assert history[0]["timestamp"] == t.latest_snapshot().time_millis  # type: ignore[union-attr]
    assert [h["version"] for h in t.history(limit=3)] == [8, 7, 6]
    with pytest.raises(InvalidOptionError, match="limit must be a positive integer"):
        t.history(limit=0)


def test_key_tables_and_committers_record_theirs(tmp_path: Any) -> None:
    k = lakefmt.create_table(str(tmp_path / "k"), SCHEMA, primary_key=["id"])
    k.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=SCHEMA))
    k.upsert(pa.table({"id": [2, 3], "dt": ["B", "c"]}, schema=SCHEMA))
    k.delete_keys(pa.table({"id": [1]}))
    k.delete("dt = 'c'")
    assert [op for op, _ in _ops(k)] == ["DELETE", "DELETE", "UPSERT", "UPSERT"]
    assert _ops(k)[0][1] == {"predicate": "dt = 'c'"}
    upsert = k.history()[2]
    assert (upsert["rows_added"], upsert["rows_removed"]) == (2, 1)  # the old row of key 2 is marked deleted

    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, ["dt"])
    committer = t.new_committer("stream-1")
    w = t.new_writer()
    w.write(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    committer.commit([w.prepare_commit()], identifier=7)
    w = t.new_writer()
    w.write(pa.table({"id": [2], "dt": ["a"]}, schema=SCHEMA))
    committer.overwrite([w.prepare_commit()], identifier=8, dynamic=True)
    w = t.new_writer()
    w.write(pa.table({"id": [3], "dt": ["z"]}, schema=SCHEMA))
    committer.commit([w.prepare_commit()], identifier=9, properties={operations.OPERATION_PROPERTY: operations.MERGE})
    assert [(h["operation"], h["commit_user"], h["commit_identifier"]) for h in t.history()] == [
        ("MERGE", "stream-1", 9), ("OVERWRITE", "stream-1", 8), ("WRITE", "stream-1", 7),
    ]
    assert t.history()[1]["operation_parameters"] == {"mode": "dynamic"}


def test_snapshots_without_the_property_read_as_their_kind(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    snap = t.latest_snapshot()
    assert snap is not None
    old = dataclasses.replace(snap, properties={})  # as written before operations were recorded
    assert old.operation is Operation.WRITE and old.operation_parameters == {}
    kinds = {"APPEND": Operation.WRITE, "OVERWRITE": Operation.OVERWRITE, "COMPACT": Operation.COMPACT}
    for kind, op in kinds.items():
        assert operation_of({}, kind) is op
        assert operation_of({"lakefmt.operation": "something-newer"}, kind) is op
    words = {"merge": "MERGE", "upgrade": "UPGRADE", "schema-change": "SCHEMA CHANGE", "restore": "RESTORE"}
    assert {t: operation_of({"lakefmt.operation": t}, "APPEND").value for t in words} == words


def test_cli_history_and_snapshots_show_the_operation(tmp_path: Any, capsys: Any) -> None:
    t = lakefmt.write_table(str(tmp_path / "t"), pa.table({"id": [1, 2, 3], "dt": ["a", "b", "c"]}))
    t.delete("id = 2")
    assert main(["history", t.uri, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(h["version"], h["operation"], h["operation_parameters"]) for h in out] == [
        (2, "DELETE", {"predicate": "id = 2"}), (1, "WRITE", {"mode": "append"}),
    ]
    assert out[0]["time"].startswith("20") and (out[0]["rows_added"], out[0]["rows_removed"]) == (2, 3)
    assert main(["history", t.uri, "--limit", "1"]) == 0
    text = capsys.readouterr().out
    assert "DELETE" in text and "predicate=id = 2" in text and "WRITE" not in text
    assert main(["snapshots", t.uri, "--json"]) == 0
    assert [s["operation"] for s in json.loads(capsys.readouterr().out)] == ["WRITE", "DELETE"]
    assert main(["snapshots", t.uri]) == 0
    assert "operation" in capsys.readouterr().out
