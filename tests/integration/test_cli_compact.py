"""``lakefmt compact`` end to end: the real command in subprocesses (run in parallel), on local disk and S3."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from helpers import create_table_in, file_listing

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
Result = subprocess.CompletedProcess[str]


def cli_many(commands: Sequence[Sequence[str]]) -> list[Result]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lakefmt.cli", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for cmd in commands
    ]
    out = []
    for cmd, p in zip(commands, procs, strict=True):
        stdout, stderr = p.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(list(cmd), p.returncode, stdout, stderr))
    return out


def small_files(store: Any, appends: int = 6) -> lakefmt.Table:
    # compaction on demand: the small files stay until a test compacts them
    options = {"write.fsync": "false", "compaction.auto": "false"}
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options=options)
    for i in range(appends):
        t.append(pa.table({"id": [2 * i, 2 * i + 1], "dt": ["a", "b"]}, schema=SCHEMA))
    return t


def opts(store: Any) -> list[str]:
    return [arg for k, v in store.storage_options.items() for arg in ("-o", f"{k}={v}")]


def test_compact_dry_run_then_compact(local_store: Any) -> None:
    t = small_files(local_store)
    listing = file_listing(t.io)
    dry, bad_partition, bad_size, bad_sort, bad_min, bad_pair = cli_many(
        [
            ["compact", t.uri, "--dry-run"],
            ["compact", t.uri, "--partition", "dt=zz"],
            ["compact", t.uri, "--target-file-size", "0"],
            ["compact", t.uri, "--sort-by", "id,nope"],
            ["compact", t.uri, "--min-files", "0"],
            ["compact", t.uri, "--partition", "dt"],
        ]
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would compact 12 files (") and "in 2 partitions: dt=a, dt=b" in dry.stdout
    assert bad_partition.returncode == 1 and "no live file in partition dt=zz" in bad_partition.stderr
    assert bad_size.returncode == 2 and "--target-file-size: must be at least 1 byte" in bad_size.stderr
    assert bad_sort.returncode == 1 and "cannot sort by unknown column(s) 'nope'" in bad_sort.stderr
    assert bad_min.returncode == 2 and "--min-files: must be at least 1" in bad_min.stderr
    assert bad_pair.returncode == 2 and "is not a partition: write key=value" in bad_pair.stderr
    for r in (bad_partition, bad_size, bad_sort, bad_min, bad_pair):
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1  # one line, no traceback
    assert file_listing(t.io) == listing  # nothing written by any of them

    (done,) = cli_many([["compact", t.uri, "--partition", "dt=a", "--sort-by", "id"]])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("compacted 6 files (") and "into 1 file (" in done.stdout
    assert "in 1 partition: snapshot 7 (COMPACT)" in done.stdout
    assert "live files in the partitions asked for: 6 (" in done.stdout
    t = lakefmt.open_table(t.uri)
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(12))
    assert sorted(f.partition["dt"] for f in t.files()) == ["a"] + ["b"] * 6


def test_compact_json_on_s3(s3_store: Any) -> None:
    t = small_files(s3_store, appends=5)
    first, second = cli_many([["compact", t.uri, "--json", *opts(s3_store)]]) + cli_many(
        [["compact", t.uri, "--json", "--min-files", "2", *opts(s3_store)]]
    )
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    report = json.loads(first.stdout)
    assert report["operation"] == "compact" and report["snapshot"] == 6 and report["dry_run"] is False
    assert (report["files_before"], report["rewritten_files"], report["written_files"], report["files_after"]) == (
        10,
        10,
        2,
        2,
    )
    assert report["bytes_after"] == report["bytes_before"] - report["rewritten_bytes"] + report["written_bytes"]
    assert sorted(p["dt"] for p in report["partitions"]) == ["a", "b"] and report["given_up"] == []
    assert json.loads(second.stdout)["snapshot"] is None  # one file per partition: nothing to merge
    assert lakefmt.open_table(t.uri, storage_options=s3_store.storage_options).latest_snapshot().id == 6  # type: ignore[union-attr]
