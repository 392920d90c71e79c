"""Where a change range starts: lakefmt's spellings start after a snapshot, Delta's at one (issue 36).

``Table.changes(a, b)``, ``from_snapshot=``, ``from_timestamp=`` and ``lakefmt changes --from`` read the changes
after ``a``; ``starting_version=`` / ``starting_timestamp=`` (delta-rs' ``load_cdf``) and ``lakefmt changes
--starting-version`` read from ``a`` on, version 0 being the table's creation. Ends are inclusive everywhere. A
range named twice, a bad id and an unknown keyword are errors naming lakefmt's keywords."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.errors import InvalidOptionError, InvalidSnapshotIdError

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])


@pytest.fixture
def table(tmp_path: Path) -> lakefmt.Table:
    """Four snapshots, one key each, committed at distinct milliseconds."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={"compaction.auto": "false"})
    for k in range(1, 5):
        t.upsert(pa.table({"k": [k], "v": [k * 10]}, schema=SCHEMA))
        time.sleep(0.003)
    return t


def _snaps(feed: pa.Table) -> list[int]:
    return feed.column("_commit_snapshot").to_pylist()


def test_starting_version_is_inclusive_and_from_snapshot_exclusive(table: lakefmt.Table) -> None:
    assert _snaps(table.changes()) == _snaps(table.changes(starting_version=0)) == [1, 2, 3, 4]
    for v in range(1, 5):
        assert _snaps(table.changes(starting_version=v)) == list(range(v, 5)), f"starting_version={v}"
        assert _snaps(table.changes(v)) == list(range(v + 1, 5)), f"changes({v})"
        assert table.changes(starting_version=v).equals(table.changes(from_snapshot=v - 1))
    assert _snaps(table.changes(starting_version=2, ending_version=3)) == [2, 3]
    assert _snaps(table.changes(1, ending_version=3)) == [2, 3]
    assert _snaps(table.changes(starting_version=5)) == []  # one past the latest: nothing yet
    assert _snaps(table.changes(starting_version=0, ending_version=0)) == []  # the creation changed no row


def test_starting_timestamp_is_inclusive_and_from_timestamp_exclusive(table: lakefmt.Table) -> None:
    second = table.snapshot(2).time_millis
    assert _snaps(table.changes(starting_timestamp=second)) == [2, 3, 4]
    assert _snaps(table.changes(from_timestamp=second)) == [3, 4]
    assert _snaps(table.changes(starting_timestamp=0, ending_timestamp=second)) == [1, 2]
    assert _snaps(table.changes(starting_timestamp=table.snapshot(4).time_millis + 1)) == []


def test_a_range_named_twice_or_a_bad_version_is_refused(table: lakefmt.Table) -> None:
    with pytest.raises(InvalidOptionError, match="start is named 2 times \\(from_snapshot, starting_version\\)"):
        table.changes(1, starting_version=2)
    with pytest.raises(InvalidOptionError, match="end is named 2 times \\(to_snapshot, ending_version\\)"):
        table.changes(to_snapshot=2, ending_version=2)
    with pytest.raises(InvalidSnapshotIdError, match="starting_version -1 is invalid"):
        table.changes(starting_version=-1)
    with pytest.raises(TypeError, match="starting_version must be a whole number"):
        table.changes(starting_version="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="starts starting_version 7 and ends at snapshot 4"):
        table.changes(starting_version=7)
    with pytest.raises(TypeError, match=r"changes\(\) got an unexpected keyword argument 'startingVersion'"):
        table.changes(startingVersion=1)  # type: ignore[call-arg]


def _cli(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0, capsys.readouterr().err
    return str(capsys.readouterr().out)


def test_cli_from_is_exclusive_and_starting_version_inclusive(table: lakefmt.Table, capsys: Any) -> None:
    def snaps(*argv: str) -> list[int]:
        return [r["_commit_snapshot"] for r in json.loads(_cli(capsys, "changes", table.uri, "--json", *argv))]

    assert snaps("--from", "0") == snaps("--starting-version", "0") == snaps("--starting-version", "1") == [1, 2, 3, 4]
    assert snaps("--from", "2") == [3, 4]
    assert snaps("--starting-version", "2") == [2, 3, 4]
    assert snaps("--starting-version", "2", "--ending-version", "3") == snaps("--from", "1", "--to", "3") == [2, 3]
    capsys.readouterr()
    assert main(["changes", table.uri]) == 2
    assert "one of --from N (after N) or --starting-version N" in capsys.readouterr().err
    assert main(["changes", table.uri, "--from", "1", "--starting-version", "1"]) == 2
    assert main(["changes", table.uri, "--from", "1", "--to", "2", "--ending-version", "2"]) == 2
    assert "one of --to M or --ending-version M" in capsys.readouterr().err
