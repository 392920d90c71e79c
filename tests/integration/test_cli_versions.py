"""``lakefmt tag create|list|delete`` and ``lakefmt restore``, run in-process (``lakefmt.cli.main``): text and
``--json`` output, a dry run that speaks in the conditional and changes nothing, one-line errors."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from helpers import file_listing, sorted_ids

import lakefmt
from lakefmt.cli import main

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def table(tmp_path: Any) -> lakefmt.Table:
    t = lakefmt.create_table(str(tmp_path / "events"), SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1, 2, 3], "dt": ["2026-11-29", "2026-11-30", "2026-11-30"]}, schema=SCHEMA))
    t.append(pa.table({"id": [4], "dt": ["2026-11-30"]}, schema=SCHEMA))
    t.overwrite(pa.table({"id": [5, 6], "dt": ["2026-12-01", "2026-12-01"]}, schema=SCHEMA))
    return t


def test_tag_commands(table: lakefmt.Table, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tag", "create", table.uri, "month-end", "--snapshot", "2", "--retain", "400d")
    assert code == 0 and out.startswith("created tag 'month-end' for snapshot 2") and "4 rows" in out
    assert run(capsys, "tag", "create", table.uri, "latest")[0] == 0
    code, out, _ = run(capsys, "tag", "list", table.uri)
    lines = out.splitlines()
    assert lines[0].split() == ["tag", "snapshot", "committed", "created", "retain", "expires", "rows"]
    assert lines[1].split()[:2] == ["latest", "3"] and "forever" in lines[1] and "never" in lines[1]
    assert lines[2].split()[:2] == ["month-end", "2"] and " 400d " in lines[2]
    code, out, _ = run(capsys, "tag", "list", table.uri, "--json")
    rows = json.loads(out)
    assert [(r["tag"], r["snapshot_id"], r["retain_millis"], r["expired"]) for r in rows] == [
        ("latest", 3, None, False),
        ("month-end", 2, 400 * 86_400_000, False),
    ]
    assert rows[1]["created"].endswith("+00:00") and rows[1]["expires"] is not None
    code, _, err = run(capsys, "tag", "create", table.uri, "month-end")
    assert code == 1 and err.count("\n") == 1 and "already has a tag 'month-end'" in err
    code, _, err = run(capsys, "tag", "create", table.uri, "../x")
    assert code == 2 and "tag name '../x' is invalid" in err
    assert run(capsys, "tag", table.uri)[0] == 2  # no action
    code, out, _ = run(capsys, "tag", "delete", table.uri, "latest")
    assert code == 0 and out.startswith("deleted tag 'latest' (snapshot 3)")
    code, _, err = run(capsys, "tag", "delete", table.uri, "latest")
    assert code == 1 and "has no tag 'latest' (its tags: 'month-end')" in err
    assert [t.name for t in table.tags()] == ["month-end"]


def test_restore_command(table: lakefmt.Table, capsys: pytest.CaptureFixture[str]) -> None:
    table.create_tag("month-end", 2)
    before = file_listing(table.io)
    code, out, _ = run(capsys, "restore", table.uri, "--tag", "month-end", "--dry-run")
    assert code == 0 and file_listing(table.io) == before
    lines = out.splitlines()
    assert lines[0].startswith("would restore snapshot 2 (tag 'month-end')") and lines[0].endswith(
        "2 rows now, 4 rows after"
    )
    assert lines[1] == "would remove 1 file (2 rows):" and lines[2].startswith("  dt=2026-12-01/")
    assert lines[3] == "would add again 3 files (4 rows):" and len(lines) == 7
    code, out, _ = run(capsys, "restore", table.uri, "--tag", "month-end")
    assert code == 0 and out.startswith("restored snapshot 2 (tag 'month-end')") and ", as snapshot 4: " in out
    assert "removed 1 file (2 rows):" in out and "added again 3 files (4 rows):" in out
    assert sorted_ids(table) == [1, 2, 3, 4]
    code, out, _ = run(capsys, "restore", table.uri, "--snapshot", "3", "--json")
    summary = json.loads(out)
    assert (summary["snapshot"], summary["target_snapshot"], summary["rows_removed"], summary["rows_added"]) == (
        5,
        3,
        4,
        2,
    )
    assert summary["target_time"].endswith("+00:00") and [f["rows"] for f in summary["files_added"]] == [2]
    code, out, _ = run(capsys, "restore", table.uri, "--as-of", str(table.snapshot(3).time_millis))
    assert code == 0 and out == "the table already holds exactly the files of snapshot 3: nothing to restore\n"
    for bad in (["--snapshot", "1", "--tag", "month-end"], [], ["--as-of", "yesterday"]):
        code, _, err = run(capsys, "restore", table.uri, *bad)
        assert code == 2 and err.count("\n") == 1, err
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5]
