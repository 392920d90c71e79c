"""Maintenance with default options: a table nobody configured compacts as it is written and expires snapshots
older than snapshot.time-retained (1h) beyond snapshot.num-retained.min (10), never what a consumer or a tag
needs; ``expire`` with no argument applies the same rules and says why it kept what it kept."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.maintenance.retention import SLACK_SHARE, resolve_retention
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


class _Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def _rows(i: int) -> pa.Table:
    return pa.table({"id": [2 * i, 2 * i + 1], "dt": ["a", "b"]}, schema=SCHEMA)


def _fake_clock_table(uri: str, start_ms: int) -> tuple[lakefmt.Table, _Clock]:
    created = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])  # no options: every default
    assert created.options == {}
    clock = _Clock(start_ms)
    return lakefmt.Table(created.io, MetaStore(created.io), clock=clock.time), clock


def test_a_loop_of_small_appends_stays_bounded(tmp_path: Any) -> None:
    """60 small appends, 3 minutes apart, to two partitions: the files per partition stay under
    compaction.max.file-num, the snapshots to the last hour (at least 10), and storage holds only what the
    retained snapshots reference."""
    t, clock = _fake_clock_table(str(tmp_path / "t"), int(time.time() * 1000) - 4 * HOUR_MS)
    defaults = TableOptions()
    most_files = most_snapshots = 0
    for i in range(60):
        t.append(_rows(i))
        per_part = Counter(f.partition["dt"] for f in t.files())
        snaps = t.snapshots()
        most_files = max(most_files, *per_part.values())
        most_snapshots = max(most_snapshots, len(snaps))
        # beyond the newest 10, none is older than the hour (and the tenth of it the automatic run waits)
        horizon = clock.ms - defaults.snapshot_time_retained_ms - SLACK_SHARE * defaults.snapshot_time_retained_ms
        assert all(s.time_millis >= horizon for s in snaps[: -defaults.snapshot_retained_min]), i
        clock.ms += 3 * MINUTE_MS
    assert most_files <= defaults.compaction_max_file_num and most_files < 15  # 60 without compaction
    assert most_snapshots <= 45  # 22 appends in 66 minutes and their compactions, of 60 appends and ~20 compactions
    snaps = t.snapshots()
    assert snaps[0].id > 40 and lakefmt.CommitKind.COMPACT in {s.commit_kind for s in snaps}
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(120))
    # what the expired snapshots alone referenced is gone: nothing is left for orphan-clean
    assert t.remove_orphan_files(older_than=0, dry_run=True).total_files == 0


def test_default_expiration_keeps_what_consumers_and_tags_need(tmp_path: Any) -> None:
    t, clock = _fake_clock_table(str(tmp_path / "t"), int(time.time() * 1000) - 4 * HOUR_MS)
    for i in range(3):
        t.append(_rows(i))
        clock.ms += 5 * MINUTE_MS
    t.set_consumer("slow", 2)
    t.create_tag("early", 1)
    for i in range(3, 40):
        t.append(_rows(i))
        clock.ms += 5 * MINUTE_MS
    assert t.snapshots()[0].id == 2  # snapshot 1 is long past the hour; the consumer holds 2 on
    assert sorted(t.scan(tag="early").to_arrow().column("id").to_pylist()) == [0, 1]
    report = t.expire_snapshots(dry_run=True)
    assert report.expired_snapshots == [] and "consumer 'slow' holds" in (report.kept_reason or "")
    t.delete_consumer("slow")
    clock.ms += 10 * MINUTE_MS  # past the pause after the automatic runs that found nothing to expire
    t.append(_rows(40))
    snaps = t.snapshots()
    assert len(snaps) >= 10 and all(s.time_millis >= clock.ms - HOUR_MS for s in snaps)
    assert sorted(t.scan(tag="early").to_arrow().column("id").to_pylist()) == [0, 1]  # the tag still reads
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(82))


def test_write_only_neither_compacts_nor_expires(tmp_path: Any) -> None:
    created = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": "true"})
    clock = _Clock(int(time.time() * 1000) - 4 * HOUR_MS)
    t = lakefmt.Table(created.io, MetaStore(created.io), clock=clock.time)
    for i in range(14):
        t.append(_rows(i))
        clock.ms += 30 * MINUTE_MS
    assert [s.commit_kind for s in t.snapshots()] == [lakefmt.CommitKind.APPEND] * 14
    report = t.expire_snapshots()  # the dedicated job: the table's rules (defaults) apply
    assert report.expired_snapshots == [1, 2, 3, 4]
    assert report.kept_reason == (
        "kept 10 snapshots (5..14): at least snapshot.num-retained.min=10 (default); "
        "8 older than snapshot.time-retained=1h (default)"
    )


def test_rules_come_from_arguments_then_options_then_defaults() -> None:
    r = resolve_retention({})
    assert (r.retain_min.value, r.retain_max.value, r.older_than.value) == (10, None, HOUR_MS)
    assert {r.retain_min.source, r.retain_max.source, r.older_than.source} == {"default"}
    r = resolve_retention({"snapshot.num-retained.min": "3", "snapshot.time-retained": "2d"}, retain_max=20)
    assert (r.retain_min.value, r.retain_min.source) == (3, "option")
    assert (r.retain_max.value, r.retain_max.source) == (20, "argument")
    assert (r.older_than.value, r.older_than.source) == (2 * 24 * HOUR_MS, "option")
    r = resolve_retention({}, retain_max=2)  # at most 2 asked for: the default minimum of 10 yields
    assert (r.retain_min.value, r.retain_max.value) == (2, 2)
    assert r.retain_min.source == "argument"  # the report says where the lowered minimum came from
    r = resolve_retention({"snapshot.num-retained.min": "5"}, retain_max=2)  # below the table's own minimum too
    assert (r.retain_min.value, r.retain_min.source, r.retain_max.value) == (2, "argument", 2)
    with pytest.raises(lakefmt.InvalidOptionError, match="retain_min"):
        resolve_retention({}, retain_min=5, retain_max=2)
    with pytest.raises(lakefmt.InvalidOptionError, match="retain_min"):
        resolve_retention({}, retain_min=0)
    # a table whose options predate the check sets a maximum below the default minimum: the maximum wins (its
    # automatic expiration would otherwise stop without a word)
    r = resolve_retention({"snapshot.num-retained.max": "4"})
    assert (r.retain_min.value, r.retain_min.source, r.retain_max.value) == (4, "option", 4)
    with pytest.raises(lakefmt.InvalidOptionError, match=r"snapshot\.num-retained\.min \(5\).*set both"):
        resolve_retention({"snapshot.num-retained.max": "4", "snapshot.num-retained.min": "5"})


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "lakefmt.cli", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_expire_with_no_argument_reports_what_it_kept_and_why(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t, _ = _fake_clock_table(uri, int(time.time() * 1000) - 2 * HOUR_MS)  # written two hours ago
    for i in range(12):
        t.append(_rows(i))
    ids = [s.id for s in t.snapshots()]
    assert len(ids) > 12  # automatic compactions among the appends; nothing expired (no hour passed for them)
    expected = ids[:-10]
    reason = (
        f"kept 10 snapshots ({ids[-10]}..{ids[-1]}): at least snapshot.num-retained.min=10 (default); "
        "10 older than snapshot.time-retained=1h (default)"
    )
    plan = json.loads(_cli("expire", uri, "--dry-run", "--json").stdout)
    assert plan["expired_snapshots"] == expected and plan["kept_reason"] == reason
    assert plan["retention"]["retain_min"] == {
        "option": "snapshot.num-retained.min", "value": 10, "shown": "10", "source": "default"
    }
    assert plan["retention"]["older_than_ms"]["value"] == HOUR_MS
    assert [s.id for s in t.snapshots()] == ids  # a dry run
    text = _cli("expire", uri).stdout
    assert f"expired snapshots {expected[0]}..{expected[-1]} ({len(expected)})" in text and reason in text
    assert [s.id for s in t.snapshots()] == ids[-10:]
    again = lakefmt.open_table(uri).expire_snapshots()
    assert again.expired_snapshots == [] and again.kept_reason == reason
    young = lakefmt.create_table(str(tmp_path / "young"), SCHEMA)
    young.append(_rows(0))
    assert "kept 1 snapshot (1..1): at least snapshot.num-retained.min=10 (default); none older than " \
        "snapshot.time-retained=1h (default)" in _cli("expire", young.uri).stdout
