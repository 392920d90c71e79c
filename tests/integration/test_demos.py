"""The two demo scripts' command lines: ``--help`` prints usage and writes nothing, each demo has its own default
table, and the PyArrow demo's exactly-once check holds on a table another writer also wrote to."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

import lakefmt

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "tools" / "demo.py"
STREAM_JOB = REPO / "spark" / "jobs" / "stream_events.py"


def _run(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lakefmt_pyarrow_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


def test_help_prints_usage_and_creates_nothing(tmp_path: Path) -> None:
    """Each demo's ``--help`` prints its usage, names its own default table (not the other's) and writes nothing."""
    defaults = {DEMO: "(default: ./demo-table-pyarrow)", STREAM_JOB: "(default: ./demo-table)"}
    for script, default in defaults.items():
        done = _run(script, "--help", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage:"), done.stdout
        assert "--batches" in done.stdout
        assert default in done.stdout, done.stdout
        assert list(tmp_path.iterdir()) == [], f"{script.name} --help wrote {list(tmp_path.iterdir())}"


def test_bad_batches_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        demo.parse_args([str(tmp_path / "t"), "--batches", "-1"])
    assert exit_info.value.code == 2
    assert "--batches must be >= 0" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_exactly_once_check_ignores_rows_of_other_writers(tmp_path: Path) -> None:
    """Rows with the same ids committed by another commit user (as the Spark demo would) are not this demo's: its
    check counts the rows its own snapshots added, and still finds every event once."""
    path = tmp_path / "shared-table"
    table = lakefmt.create_table(str(path), demo.SCHEMA, partition_by=["dt"])
    foreign = demo.make_rows(0, 0).slice(0, 1000)
    table.new_committer(commit_user="spark-stream-0123456789abcdef").commit(
        [_written(table, foreign)], identifier=0
    )
    done = _run(DEMO, str(path), "--batches", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every event exactly once: True" in done.stdout, done.stdout
    assert f"rows committed by 'demo-stream': {demo.TASKS * demo.ROWS_PER_TASK:,}" in done.stdout
    assert lakefmt.open_table(str(path)).scan().count() == 1000 + demo.TASKS * demo.ROWS_PER_TASK


def _written(table: lakefmt.Table, rows: pa.Table) -> lakefmt.CommitMessage:
    writer = table.new_writer()
    writer.write(rows)
    return writer.prepare_commit()
