"""Maintenance while writers commit continuously: expire and orphan-clean run again and again (orphan-clean
with a small age threshold, so files of the commits in flight are young) while two writers race commits on
the same table, each appending, overwriting one of its partitions now and then, and sometimes abandoning a
write (garbage for orphan-clean). Afterwards no committed row is lost (checked against the writers' own record
of what each of their snapshots holds), every retained snapshot reads exactly its rows, expired ones raise
SnapshotNotFoundError, and a last orphan-clean leaves exactly the referenced files.

Each writer owns its partitions, so it knows what they hold after each of its commits; a snapshot's rows are
then the union, over the writers, of what each one's latest commit at or before it left (a snapshot can be
checked once every snapshot up to it has been reported). On local disk the writers are separate processes;
on S3 (moto) threads."""

from __future__ import annotations

import functools
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
from helpers import create_table_in, sorted_ids

import lakefmt
from lakefmt.errors import SnapshotNotFoundError
from lakefmt.maintenance import referenced_files
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
WRITERS = 2
HERE = Path(__file__).resolve().parent


def write_until(
    uri: str,
    storage_options: dict[str, Any],
    writer: int,
    stop: Callable[[], bool],
    out: Callable[[str], None],
    pause: float,
) -> None:
    """Writer ``writer``: commit until ``stop()``, ``pause`` seconds apart, to its own partitions; after each
    commit, report ``{"writer": w, "snapshot": id, "ids": [...]}`` (the rows its partitions hold in that
    snapshot, by its own bookkeeping). Every 4th round also abandons a write."""
    t = lakefmt.open_table(uri, storage_options)
    parts = tuple(f"w{writer}-p{p}" for p in range(3))
    live: dict[int, str] = {}  # id -> partition, as the writer believes its partitions hold
    i = 0
    while not stop():
        ids = list(range(writer * 10_000_000 + i * 10, writer * 10_000_000 + i * 10 + 10))
        dt = parts[i % len(parts)]
        batch = pa.table({"id": ids, "dt": [dt] * len(ids)}, schema=SCHEMA)
        if i % 5 == 4:
            snap = t.overwrite(batch, partition={"dt": dt})
            live = {k: v for k, v in live.items() if v != dt}
        else:
            snap = t.append(batch)
        assert snap is not None
        live.update(dict.fromkeys(ids, dt))
        out(json.dumps({"writer": writer, "snapshot": snap.id, "ids": sorted(live)}))
        if i % 4 == 3:  # a task whose commit never happens: its files are garbage
            with t.new_writer() as abandoned:
                abandoned.write(pa.table({"id": [-1], "dt": [parts[0]]}, schema=SCHEMA))
                abandoned.prepare_commit()
        i += 1
        time.sleep(pause)


def _process_writer_main() -> None:
    """Entry point of a writer process: argv = uri, writer number, record file, stop file."""
    uri, writer, record, stop_file = sys.argv[1:5]
    with open(record, "a", encoding="utf-8") as f:

        def out(line: str) -> None:
            f.write(line + "\n")
            f.flush()

        write_until(uri, {}, int(writer), lambda: os.path.exists(stop_file), out, pause=0.02)


class _Record:
    """What the writers say each of their snapshots holds (lines per writer, replaced as they grow)."""

    def __init__(self) -> None:
        self.lines: dict[int, list[str]] = {}
        self.lock = threading.Lock()

    def add(self, writer: int, line: str) -> None:
        with self.lock:
            self.lines.setdefault(writer, []).append(line)

    def replace(self, writer: int, lines: list[str]) -> None:
        with self.lock:
            self.lines[writer] = lines

    def commits_by_writer(self) -> dict[int, int]:
        with self.lock:
            return {w: len(lines) for w, lines in self.lines.items()}

    def snapshots(self) -> dict[int, list[int]]:
        """The rows of every snapshot 1..k, where k is the last snapshot before the first one no writer has
        reported yet: the union of what each writer's latest commit at or before it left."""
        with self.lock:
            lines = [line for per_writer in self.lines.values() for line in per_writer]
        by_snapshot: dict[int, tuple[int, list[int]]] = {}
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue  # a line a writer process is still writing
            sid = int(d["snapshot"])
            assert sid not in by_snapshot, f"snapshot {sid} reported by two commits"
            by_snapshot[sid] = (int(d["writer"]), list(d["ids"]))
        out: dict[int, list[int]] = {}
        holds: dict[int, list[int]] = {}  # writer -> its rows as of the snapshot being built
        sid = 1
        while sid in by_snapshot:
            writer, ids = by_snapshot[sid]
            holds[writer] = ids
            out[sid] = sorted(i for rows in holds.values() for i in rows)
            sid += 1
        return out


def _check_retained(t: lakefmt.Table, record: dict[int, list[int]], which: str = "all") -> int:
    """Every retained snapshot the writers have reported ("all"), or the earliest and the latest of them
    ("ends"), or only the earliest ("earliest") reads exactly its rows. Safe while the writers commit (they never
    remove anything); called between maintenance runs."""
    checked = 0
    snaps = [s for s in t.snapshots() if s.id in record]
    if which == "earliest":
        snaps = snaps[:1]
    elif which == "ends":
        snaps = [*snaps[:1], *snaps[1:][-1:]]
    for snap in snaps:
        assert sorted_ids(t, snap.id) == record[snap.id], f"snapshot {snap.id} lost or gained rows"
        checked += 1
    return checked


def _run(
    store: Any,
    start_writer: Callable[[str, _Record], Callable[[], None]],
    seconds: float,
    threshold_s: float,
    check: str = "all",
) -> None:
    """Run the maintenance loop for ``seconds`` beside the writers ``start_writer`` starts, checking the
    retained snapshots (``check``: all, or the earliest and latest) after each expire and orphan-clean; then
    stop the writers and check everything."""
    # every snapshot is a writer's commit, as the record assumes: no automatic compaction
    t = create_table_in(store, SCHEMA, partition_by=["dt"], options={"compaction.auto": "false"})
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
        while not record.snapshots():  # the clock starts at the writers' first commit
            assert time.monotonic() - start < 60, "the writers never committed"
            time.sleep(0.05)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            policy = policies[rounds % len(policies)]
            expired += t.expire_snapshots(**policy).expired_snapshots
            checked += _check_retained(t, record.snapshots(), "earliest")
            orphans += t.remove_orphan_files(older_than=threshold_s).total_files
            checked += _check_retained(t, record.snapshots(), check)
            rounds += 1
            time.sleep(0.05)
    finally:
        stop_writer()

    final = record.snapshots()
    commits = record.commits_by_writer()
    assert sorted(commits) == list(range(WRITERS)) and min(commits.values()) >= 4, f"commits by writer: {commits}"
    assert len(final) == sum(commits.values()), "a snapshot some writer made was never reported"
    assert checked > 0
    expired += t.expire_snapshots(retain_max=3).expired_snapshots
    assert len(set(expired)) == len(expired), "a snapshot was expired twice"
    # nothing committed is lost: the latest holds exactly what the writers last committed
    last = max(final)
    latest = t.latest_snapshot()
    assert latest is not None and latest.id == last
    assert sorted_ids(t, last) == final[last]
    # every snapshot the writers made is either retained and reads exactly as it did, or expired
    retained = {s.id for s in t.snapshots()}
    assert retained == set(range(min(retained), last + 1))
    assert set(final) == retained | set(expired)
    for sid, ids in final.items():
        if sid in retained:
            assert sorted_ids(t, sid) == ids
        else:
            with pytest.raises(SnapshotNotFoundError):
                t.scan(snapshot_id=sid)
    # with the writers stopped nothing is in flight: orphan-clean returns the store to exactly the referenced files
    orphans += t.remove_orphan_files(older_than=0).total_files
    assert orphans, "orphan-clean never found the abandoned writes"
    files = {f.path for f in t.io.walk()}
    refs = referenced_files(MetaStore(t.io))
    assert files - refs == set()
    assert refs - files <= {layout.LATEST, layout.EARLIEST}
    assert sorted_ids(t, last) == final[last]


def test_maintenance_while_writer_processes_commit(local_store: Any, tmp_path: Path) -> None:
    def start(uri: str, record: _Record) -> Callable[[], None]:
        stop_file = tmp_path / "stop"
        code = (  # this folder and tests/ (for helpers) on the path
            "import sys; sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]; "
            "import test_maintenance_concurrent as m; m._process_writer_main()"
        )
        record_files = [tmp_path / f"record-{w}.jsonl" for w in range(WRITERS)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(HERE), str(HERE.parent), uri, str(w), str(f), str(stop_file)],
                stderr=subprocess.PIPE,
            )
            for w, f in enumerate(record_files)
        ]

        def read_record() -> None:
            for w, f in enumerate(record_files):
                if f.exists():
                    # a partial last line is skipped by _Record.snapshots
                    record.replace(w, f.read_text(encoding="utf-8").splitlines())

        def follow() -> None:  # the maintenance loop checks snapshots against the record as it grows
            while any(p.poll() is None for p in procs):
                read_record()
                time.sleep(0.05)

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()

        def stop_all() -> None:
            stop_file.touch()
            errors = [p.communicate(timeout=60)[1] for p in procs]
            follower.join(timeout=60)
            for p, err in zip(procs, errors, strict=True):
                assert p.returncode == 0, err.decode(errors="replace")[-3000:]
            read_record()

        return stop_all

    # the threshold is well above a commit's duration (a commit in flight is never older than it), even on a
    # busy 2-core machine where a writer can stall for a good fraction of a second
    _run(local_store, start, seconds=5.0, threshold_s=2.0)


def test_maintenance_while_writer_threads_commit_s3(s3_store: Any) -> None:
    def start(uri: str, record: _Record) -> Callable[[], None]:
        done = threading.Event()
        errors: list[BaseException] = []

        def run(writer: int) -> None:
            try:
                out = functools.partial(record.add, writer)
                write_until(uri, s3_store.storage_options, writer, done.is_set, out, pause=0.2)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in range(WRITERS)]
        for thread in threads:
            thread.start()

        def stop() -> None:
            done.set()
            for thread in threads:
                thread.join(timeout=60)
                assert not thread.is_alive()
            if errors:
                raise errors[0]

        return stop

    # S3 modification times have a resolution of one second, so the threshold is wider than on local disk; a
    # scan reads every data file through moto (~100 requests/s here), so the loop checks the earliest and the
    # latest retained snapshot, and every one at the end
    _run(s3_store, start, seconds=4.0, threshold_s=3.0, check="ends")
