"""Maintenance while a writer commits continuously: expire and orphan-clean run again and again (orphan-clean
with a small age threshold, so files of the commit in flight are young) while a writer appends, overwrites a
partition now and then, and sometimes abandons a write (garbage for orphan-clean). Afterwards no committed
row is lost (checked against the writer's own record of what each of its snapshots holds), every retained
snapshot reads exactly its rows, expired ones raise SnapshotNotFoundError, and a last orphan-clean leaves
exactly the referenced files.

On local disk the writer is a separate process; on S3 (moto) a thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import SnapshotNotFoundError
from lakefmt.maintenance import referenced_files
from lakefmt.metastore import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
PARTS = ("p0", "p1", "p2")


def write_until(
    uri: str, storage_options: dict[str, Any], stop: Callable[[], bool], out: Callable[[str], None], pause: float
) -> None:
    """The writer: commit until ``stop()``, ``pause`` seconds apart; after each commit, report
    ``{"snapshot": id, "ids": [...]}`` (the rows that snapshot holds, by the writer's own bookkeeping). Every
    4th round also abandons a write."""
    t = lakefmt.open_table(uri, storage_options)
    live: dict[int, str] = {}  # id -> partition, as the writer believes the table holds
    i = 0
    while not stop():
        ids = list(range(i * 10, i * 10 + 10))
        dt = PARTS[i % len(PARTS)]
        batch = pa.table({"id": ids, "dt": [dt] * len(ids)}, schema=SCHEMA)
        if i % 5 == 4:
            snap = t.overwrite(batch, partition={"dt": dt})
            live = {k: v for k, v in live.items() if v != dt}
        else:
            snap = t.append(batch)
        assert snap is not None
        live.update(dict.fromkeys(ids, dt))
        out(json.dumps({"snapshot": snap.id, "ids": sorted(live)}))
        if i % 4 == 3:  # a task whose commit never happens: its files are garbage
            writer = t.new_writer()
            with writer:
                writer.write(pa.table({"id": [-1], "dt": ["p0"]}, schema=SCHEMA))
                writer.prepare_commit()
        i += 1
        time.sleep(pause)


def _process_writer_main() -> None:
    """Entry point of the writer process: argv = uri, record file, stop file."""
    uri, record, stop_file = sys.argv[1:4]
    with open(record, "a", encoding="utf-8") as f:

        def out(line: str) -> None:
            f.write(line + "\n")
            f.flush()

        write_until(uri, {}, lambda: os.path.exists(stop_file), out, pause=0.02)


def _ids(t: lakefmt.Table, snapshot_id: int) -> list[int]:
    return sorted(t.to_arrow(snapshot_id=snapshot_id).column("id").to_pylist())


class _Record:
    """What the writer says each of its snapshots holds."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)

    def snapshots(self) -> dict[int, list[int]]:
        with self.lock:
            lines = list(self.lines)
        out = {}
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue  # a line the writer process is still writing
            out[int(d["snapshot"])] = list(d["ids"])
        return out


def _check_retained(t: lakefmt.Table, record: dict[int, list[int]], earliest_only: bool = False) -> int:
    """Every retained snapshot the writer has reported (or only the earliest) reads exactly its rows. Safe
    while the writer commits (it never removes anything); called between maintenance runs."""
    checked = 0
    snaps = t.snapshots()
    for snap in snaps[:1] if earliest_only else snaps:
        if snap.id in record:
            assert _ids(t, snap.id) == record[snap.id], f"snapshot {snap.id} lost or gained rows"
            checked += 1
    return checked


def _run(
    store: Any, start_writer: Callable[[str, _Record], Callable[[], None]], seconds: float, threshold_s: float
) -> None:
    t = lakefmt.create_table(store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options)
    record = _Record()
    stop_writer = start_writer(t.uri, record)
    expired: list[int] = []
    orphans = 0
    checked = 0
    rounds = 0
    policies: list[dict[str, Any]] = [
        {"retain_max": 3},
        {"retain_min": 2, "older_than": threshold_s / 2},
        {"retain_max": 1},
        {"retain_min": 4, "older_than": 0},
    ]
    try:
        start = time.monotonic()
        while not record.snapshots():  # the clock starts at the writer's first commit
            assert time.monotonic() - start < 60, "the writer never committed"
            time.sleep(0.05)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            policy = policies[rounds % len(policies)]
            expired += t.expire_snapshots(**policy).expired_snapshots
            checked += _check_retained(t, record.snapshots(), earliest_only=True)
            orphans += t.remove_orphan_files(older_than=threshold_s).total_files
            checked += _check_retained(t, record.snapshots())
            rounds += 1
            time.sleep(0.05)
    finally:
        stop_writer()

    final = record.snapshots()
    assert len(final) >= 8, "the writer hardly committed: the test proves nothing"
    assert checked > 0
    expired += t.expire_snapshots(retain_max=3).expired_snapshots
    assert len(set(expired)) == len(expired), "a snapshot was expired twice"
    # nothing committed is lost: the latest holds exactly what the writer last committed
    last = max(final)
    latest = t.latest_snapshot()
    assert latest is not None and latest.id == last
    assert _ids(t, last) == final[last]
    # every snapshot the writer made is either retained and reads exactly as it did, or expired
    retained = {s.id for s in t.snapshots()}
    assert retained == set(range(min(retained), last + 1))
    assert set(final) == retained | set(expired)
    for sid, ids in final.items():
        if sid in retained:
            assert _ids(t, sid) == ids
        else:
            with pytest.raises(SnapshotNotFoundError):
                t.scan(snapshot_id=sid)
    # with the writer stopped nothing is in flight: orphan-clean returns the store to exactly the referenced files
    orphans += t.remove_orphan_files(older_than=0).total_files
    assert orphans, "orphan-clean never found the abandoned writes"
    files = {f.path for f in t.io.walk()}
    refs = referenced_files(MetaStore(t.io))
    assert files - refs == set()
    assert refs - files <= {layout.LATEST, layout.EARLIEST}
    assert _ids(t, last) == final[last]


def test_maintenance_while_a_writer_process_commits(local_store: Any, tmp_path: Path) -> None:
    def start(uri: str, record: _Record) -> Callable[[], None]:
        record_file = tmp_path / "record.jsonl"
        stop_file = tmp_path / "stop"
        code = (
            "import sys; sys.path.insert(0, sys.argv.pop(1)); "
            "import test_maintenance_concurrent as m; m._process_writer_main()"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(Path(__file__).parent), uri, str(record_file), str(stop_file)],
            stderr=subprocess.PIPE,
        )

        def follow() -> None:  # the maintenance loop checks snapshots against the record as it grows
            while proc.poll() is None:
                read_record()
                time.sleep(0.05)

        def read_record() -> None:
            if record_file.exists():
                lines = record_file.read_text(encoding="utf-8").splitlines()
                with record.lock:
                    record.lines = lines  # a partial last line is skipped by _Record.snapshots

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()

        def stop_all() -> None:
            stop_file.touch()
            _, err = proc.communicate(timeout=60)
            follower.join(timeout=60)
            assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
            read_record()

        return stop_all

    _run(local_store, start, seconds=4.0, threshold_s=1.0)


def test_maintenance_while_a_writer_thread_commits_s3(s3_store: Any) -> None:
    def start(uri: str, record: _Record) -> Callable[[], None]:
        done = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                write_until(uri, s3_store.storage_options, done.is_set, record.add, pause=0.1)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()

        def stop() -> None:
            done.set()
            thread.join(timeout=60)
            assert not thread.is_alive()
            if errors:
                raise errors[0]

        return stop

    # S3 modification times have a resolution of one second, so the threshold is wider than on local disk
    _run(s3_store, start, seconds=4.5, threshold_s=2.0)
