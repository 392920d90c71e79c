"""The streaming source: ``spark.readStream.format("lakefmt").load(uri)``.

Most cases drive the stream reader the way Spark's driver-side worker does (``initialOffset``, ``latestOffset``,
``partitions``, ``read``, ``commit``), which is fast and lets every offset be checked; a few run real Structured
Streaming queries on the shared ``local[2]`` session: the first micro-batches, a restart from the checkpoint with
commits in between, admission control under ``Trigger.AvailableNow``, and errors reaching the user.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import stream_until_caught_up as stream
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxFiles, ReadMaxRows
from pyspark_lakefmt.options import TableRef
from pyspark_lakefmt.stream_reader import PENDING, StreamReader, plan_read_tasks

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


# -- helpers -------------------------------------------------------------------------------------------------
def new_table(tmp_path: Path, name: str = "t") -> lakefmt.Table:
    return lakefmt.create_table(str(tmp_path / name), SCHEMA, partition_by=["dt"])


def append(table: lakefmt.Table, ids: range | list[int], parts: tuple[str, ...] = ("a", "b")) -> list[int]:
    """One APPEND snapshot: ``ids`` spread over the partitions ``parts`` (one file per partition)."""
    ids = list(ids)
    table.append(pa.table({"id": ids, "dt": [parts[i % len(parts)] for i in ids]}, schema=SCHEMA))
    return ids


def compact(table: lakefmt.Table) -> None:
    """A COMPACT snapshot: the table's compaction, merging every partition's files (two or more) into one."""
    report = table.compact(min_files=2)
    assert report.snapshot is not None and report.snapshot.commit_kind is lakefmt.CommitKind.COMPACT


def reader(table: lakefmt.Table, **options: object) -> StreamReader:
    """The stream reader as Spark builds it (option keys lower-cased, values strings)."""
    return StreamReader(TableRef(table.uri), {k.lower(): str(v) for k, v in options.items()})


def batch(r: StreamReader, start: dict[str, Any], limit: ReadLimit | None = None) -> tuple[dict[str, Any], list[int]]:
    """One micro-batch as Spark plans it: its end offset and the ids it reads (sorted)."""
    end = r.latestOffset(start, limit or ReadAllAvailable())
    return end, read_range(r, start, end)


def read_range(r: StreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
    ids: list[int] = []
    for part in r.partitions(start, end):
        ids += [i for b in r.read(part) for i in b.column("id").to_pylist()]
    return sorted(ids)


def drain(r: StreamReader, start: dict[str, Any], limit: ReadLimit | None = None) -> list[list[int]]:
    """Micro-batches until the stream is caught up (each committed as Spark does); the ids of each that read
    rows (the first micro-batch of a stream that starts with nothing to read is empty: it pins the start)."""
    batches = []
    for _ in range(100):
        end, ids = batch(r, start, limit)
        if end == start:
            return batches
        if ids:
            batches.append(ids)
        r.commit(end)
        start = end
    raise AssertionError("the stream never caught up")


def offset(snapshot: int, index: int = 0, initial: bool = False) -> dict[str, Any]:
    return {"snapshot": snapshot, "index": index, "initial": initial}


def position(offset: dict[str, Any]) -> dict[str, Any]:
    """An offset without the nonce that identifies the table (``verify``), for comparisons."""
    return {k: v for k, v in offset.items() if k != "verify"}


# -- offsets and units (the reader driven directly) ----------------------------------------------------------
def test_initial_content_then_new_appends(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    first = append(table, range(0, 4)) + append(table, range(4, 6))
    r = reader(table)
    assert r.initialOffset() == PENDING

    end, ids = batch(r, PENDING)  # the table's content at snapshot 2, then each new snapshot
    assert position(end) == {**offset(3), "origin": {"snapshot": 2, "initial": True}}
    assert ids == first
    assert r.latestOffset(end, ReadAllAvailable()) is end  # caught up: the very offset, so Spark plans nothing

    new = append(table, range(6, 9))
    end2, ids = batch(r, end)
    assert (position(end2), ids) == (offset(4), new)

    # Spark replans the first micro-batch (a restart before it committed) from a fresh initialOffset(): the end
    # offset's origin pins it, whatever was committed since
    assert read_range(reader(table), reader(table).initialOffset(), end) == first


def test_empty_table_starts_at_its_first_snapshot(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    r = reader(table)
    end, ids = batch(r, PENDING)
    assert (end, ids) == ({**offset(1), "origin": {"snapshot": 1, "initial": False}}, [])
    assert drain(r, end) == []
    added = append(table, [1, 2])
    assert drain(r, end) == [added]


def test_compact_is_skipped_overwrite_fails_unless_skip_change_commits(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    rows = append(table, range(0, 4))  # 1
    rows += append(table, range(4, 8))  # 2
    compact(table)  # 3: the same rows in new files
    rows += append(table, range(8, 10))  # 4
    table.overwrite(pa.table({"id": [100], "dt": ["a"]}, schema=SCHEMA))  # 5
    after = append(table, range(10, 12))  # 6

    r = reader(table, startingSnapshot=1)
    end, ids = batch(r, PENDING)  # what came before the overwrite, each row once
    assert (end["snapshot"], ids) == (5, rows)
    stops = r"snapshot 5 \(OVERWRITE, kind OVERWRITE\) deleted.*skipChangeCommits.*readChangeFeed"
    with pytest.raises(lakefmt.LakefmtError, match=stops):
        r.latestOffset(end, ReadAllAvailable())

    skipping = reader(table, startingSnapshot=1, skipChangeCommits="true")
    assert drain(skipping, end) == [after]  # the overwrite's row is not read
    with pytest.raises(lakefmt.LakefmtError, match=r"option skipChangeCommits: 'maybe' is not a boolean"):
        reader(table, skipChangeCommits="maybe")


def test_starting_snapshot_and_timestamp(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    s1 = append(table, [1, 2])
    time.sleep(0.01)
    s2 = append(table, [3, 4])
    time.sleep(0.01)
    s3 = append(table, [5, 6])
    t2 = table.snapshot(2).time_millis

    assert drain(reader(table, startingSnapshot=2), PENDING) == [s2 + s3]
    assert drain(reader(table, startingSnapshot=1), PENDING) == [s1 + s2 + s3]
    latest = reader(table, startingSnapshot="LATEST")
    end, ids = batch(latest, PENDING)
    assert (end["snapshot"], ids) == (4, [])
    s4 = append(table, [7, 8])
    assert drain(latest, end) == [s4]

    assert drain(reader(table, startingTimestamp=t2), PENDING) == [s2 + s3 + s4]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t2 // 1000)) + f".{t2 % 1000:03d}Z"
    assert drain(reader(table, startingTimestamp=iso), PENDING) == [s2 + s3 + s4]
    assert drain(reader(table, startingTimestamp=0), PENDING) == [s1 + s2 + s3 + s4]  # before all: the earliest
    assert drain(reader(table, startingTimestamp=t2 + 10**9), PENDING) == []  # after all: new commits only

    bad = {
        "startingTimestamp='yesterday'": (
            {"startingTimestamp": "yesterday"},
            "option startingTimestamp: 'yesterday' is not a snapshot time; use ISO-8601 or epoch milliseconds",
        ),
        "startingSnapshot=0": ({"startingSnapshot": "0"}, "option startingSnapshot: '0' is not a snapshot id"),
        "startingSnapshot=x": ({"startingSnapshot": "x"}, "option startingSnapshot: 'x' is not a snapshot id"),
        "typo": (
            {"maxFilesPerTriger": "1"},
            "unknown option 'maxfilespertriger' for a lakefmt streaming read (did you mean maxFilesPerTrigger?)",
        ),
        "batch option": ({"snapshotId": "1"}, "option snapshotId is not an option of a lakefmt streaming read"),
        "both": ({"startingSnapshot": "1", "startingTimestamp": "0"}, "give one, not both"),
        "maxFilesPerTrigger=0": ({"maxFilesPerTrigger": "0"}, "option maxFilesPerTrigger: '0' is not a positive"),
        "maxBytesPerTrigger=lots": ({"maxBytesPerTrigger": "lots"}, "option maxBytesPerTrigger: 'lots' is not a size"),
        "consumerId": ({"consumerId": "a/b"}, "option consumerId: consumer id 'a/b' is invalid"),
    }
    for case, (options, message) in bad.items():
        with pytest.raises(lakefmt.LakefmtError) as info:
            reader(table, **options)
        assert message in str(info.value), case
    with pytest.raises(lakefmt.LakefmtError, match=r"option startingSnapshot: 9 is after the latest snapshot 4"):
        reader(table, startingSnapshot=9).latestOffset(PENDING, ReadAllAvailable())


def test_admission_control(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    content = append(table, range(0, 6), parts=("a", "b", "c"))  # snapshot 1: three files
    later = append(table, range(6, 8))  # snapshot 2: two files
    sizes = sorted(f.file_size for f in table.files())

    # one file per micro-batch, the initial content (five files) split inside its snapshot: nothing read twice
    # or skipped
    r = reader(table, maxFilesPerTrigger=1)
    assert r.getDefaultReadLimit() == ReadMaxFiles(1)
    ends, start, batches = [], PENDING, []
    while (end := r.latestOffset(start, r.getDefaultReadLimit())) is not start:
        ends.append({k: v for k, v in end.items() if k not in ("origin", "verify")})
        batches.append(read_range(r, start, end))
        start = end
    assert ends == [offset(2, 1, True), offset(2, 2, True), offset(2, 3, True), offset(2, 4, True), offset(3)]
    assert sorted(i for b in batches for i in b) == content + later
    assert sorted(len(b) for b in batches) == [1, 1, 2, 2, 2]  # one file each

    # Trigger.AvailableNow / Trigger.Once pass ReadAllAvailable: the option does not apply
    assert drain(reader(table, maxFilesPerTrigger=1), PENDING, ReadAllAvailable()) == [content + later]
    # without either option, Delta's default of 1000 files
    assert reader(table).getDefaultReadLimit() == ReadMaxFiles(1000)

    # bytes: a soft maximum; a file larger than it is read alone (always progress)
    assert 3 * sizes[0] > 2 * sizes[-1]  # any two files fit in twice the largest, no three do
    r = reader(table, startingSnapshot=1, maxBytesPerTrigger=2 * sizes[-1])
    assert r.getDefaultReadLimit() == ReadMaxBytes(2 * sizes[-1])
    assert [len(b) for b in drain(r, PENDING, r.getDefaultReadLimit())] == [4, 3, 1]  # 2 + 2, 2 + 1, 1 rows
    r = reader(table, startingSnapshot=1, maxBytesPerTrigger="1b")
    assert [len(b) for b in drain(r, PENDING, r.getDefaultReadLimit())] == [2, 2, 2, 1, 1]
    # rows: Spark's ReadMaxRows
    assert [len(b) for b in drain(reader(table, startingSnapshot=1), PENDING, ReadMaxRows(4))] == [4, 4]

    # AvailableNow: the snapshots committed after the query started wait for the next run
    r = reader(table, maxFilesPerTrigger=2)
    r.prepareForTriggerAvailableNow()
    late = append(table, [50, 51])
    assert sorted(i for b in drain(r, PENDING, r.getDefaultReadLimit()) for i in b) == content + later
    assert drain(reader(table, startingSnapshot=3), PENDING) == [late]


def test_read_tasks_spread_a_micro_batch_over_the_cores() -> None:
    def files(*sizes_mb: float) -> list[lakefmt.FileTask]:
        return [
            lakefmt.FileTask(f"f{i:04d}", f"/t/f{i:04d}", int(mb * (1 << 20)), 1, {}) for i, mb in enumerate(sizes_mb)
        ]

    assert plan_read_tasks([], 2) == []
    assert plan_read_tasks(files(12.1, 11.9), 2) == [["f0000"], ["f0001"]]  # one per core, as Spark's file source
    assert plan_read_tasks(files(12, 12, 12, 12), 2) == [["f0000", "f0001"], ["f0002", "f0003"]]
    assert plan_read_tasks(files(1, 1), 1) == [["f0000", "f0001"]]
    # a file larger than the split is a task of its own; order is kept
    assert plan_read_tasks(files(1, 300, 1), 2) == [["f0000"], ["f0001"], ["f0002"]]
    # many small files: tasks of about 128 MB, counting 4 MB to open each file (Spark's openCostInBytes)
    tasks = plan_read_tasks(files(*[0.01] * 1000), 2)
    assert [p for t in tasks for p in t] == [f"f{i:04d}" for i in range(1000)]
    assert {len(t) for t in tasks[:-1]} == {31} and len(tasks) == 33


def test_expired_next_snapshot_fails_unless_fail_on_data_loss_false(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    append(table, [1, 2])
    r = reader(table)
    end, _ = batch(r, PENDING)
    r.commit(end)
    assert end["snapshot"] == 2
    append(table, [3, 4])
    planned = r.latestOffset(end, ReadAllAvailable())  # a micro-batch planned (and checkpointed) ...
    kept = append(table, [5, 6])
    table.expire_snapshots(retain_min=1, retain_max=1)  # ... whose snapshot expires before it runs
    assert [s.id for s in table.snapshots()] == [3]

    message = r"snapshot 2, the next one this stream needs, has expired.*failOnDataLoss"
    with pytest.raises(lakefmt.SnapshotNotFoundError, match=message):
        reader(table).latestOffset(end, ReadAllAvailable())
    with pytest.raises(lakefmt.SnapshotNotFoundError, match=message):
        reader(table).partitions(end, planned)

    with pytest.raises(lakefmt.SnapshotNotFoundError, match=r"snapshot 4, where this stream's checkpoint says"):
        reader(table, failOnDataLoss="false").partitions(offset(3), offset(9))  # a checkpoint ahead of the table

    lossy = reader(table, failOnDataLoss="false")  # jumps to the earliest retained snapshot, and says so
    assert drain(lossy, end) == [kept]
    assert read_range(lossy, end, planned) == []


def test_consumer_records_its_position_and_expiration_keeps_it(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    append(table, [1, 2])
    r = reader(table, consumerId="silver")
    end, _ = batch(r, PENDING)
    assert [(c.consumer_id, c.next_snapshot) for c in table.consumers()] == [("silver", 1)]  # from the start
    r.commit(end)
    assert [c.next_snapshot for c in table.consumers()] == [2]
    waiting = [i for k in range(3) for i in append(table, [10 * k + 3, 10 * k + 4])]  # snapshots 2..4

    table.expire_snapshots(retain_min=1, retain_max=1)
    assert [s.id for s in table.snapshots()] == [2, 3, 4]  # the consumer still needs 2
    assert drain(r, end) == [waiting]
    assert [c.next_snapshot for c in table.consumers()] == [5]
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert [s.id for s in table.snapshots()] == [4]

    # a new stream with the same consumer id and no starting option resumes where the consumer is
    more = append(table, [90, 91])
    assert drain(reader(table, consumerId="silver"), PENDING) == [more]


# -- real streaming queries ----------------------------------------------------------------------------------
def progress(query: Any) -> list[tuple[int, str, int]]:
    """(batch id, end offset, input rows) of each micro-batch this run executed (not the progress events of
    triggers that found nothing new)."""
    events = [(p["batchId"], p["sources"][0]) for p in query.recentProgress]
    return [(b, s["endOffset"], s["numInputRows"]) for b, s in events if s["startOffset"] != s["endOffset"]]


def ids_of(uri: str) -> list[int]:
    return sorted(lakefmt.open_table(uri).to_arrow().column("id").to_pylist())


def test_stream_restarts_from_its_checkpoint(spark: Any, tmp_path: Path) -> None:
    bronze = new_table(tmp_path, "bronze")
    rows = append(bronze, range(0, 6), parts=("a", "b", "c"))  # one snapshot, three files
    silver, checkpoint = str(tmp_path / "silver"), tmp_path / "ck"

    query = stream(spark, bronze.uri, silver, checkpoint, maxFilesPerTrigger=1, consumerId="silver")
    assert [(b, n) for b, _, n in progress(query)] == [(0, 2), (1, 2), (2, 2)]  # one file each
    first = json.loads(progress(query)[0][1])  # as the checkpoint keeps it
    assert position(first) == {"snapshot": 1, "index": 1, "initial": True, "origin": {"snapshot": 1, "initial": True}}
    assert first["verify"] == {"snapshot": 1, "nonce": bronze.snapshot(1).nonce}
    assert ids_of(silver) == rows
    assert [(c.consumer_id, c.next_snapshot) for c in bronze.consumers()] == [("silver", 2)]

    rows += append(bronze, range(6, 8)) + append(bronze, range(8, 12))  # committed while the stream is down
    query = stream(spark, bronze.uri, silver, checkpoint, consumerId="silver")
    assert [(b, position(json.loads(e)), n) for b, e, n in progress(query)] == [(3, offset(4), 6)]
    assert ids_of(silver) == rows  # every row exactly once
    assert [(c.consumer_id, c.next_snapshot) for c in bronze.consumers()] == [("silver", 4)]


def test_stream_errors_reach_the_user(spark: Any, tmp_path: Path) -> None:
    bronze = new_table(tmp_path, "bronze")
    rows = append(bronze, [1, 2])
    bronze.overwrite(pa.table({"id": [100], "dt": ["a"]}, schema=SCHEMA))
    after = append(bronze, [3, 4])
    silver, checkpoint = str(tmp_path / "silver"), tmp_path / "ck"

    with pytest.raises(Exception, match=r"snapshot 2 \(OVERWRITE, kind OVERWRITE\) deleted or replaced rows"):
        stream(spark, bronze.uri, silver, checkpoint, startingSnapshot=1)
    assert ids_of(silver) == rows  # what came before it went through
    stream(spark, bronze.uri, silver, checkpoint, startingSnapshot=1, skipChangeCommits="true")
    assert ids_of(silver) == rows + after

    with pytest.raises(Exception, match=r"option startingTimestamp: 'yesterday' is not a snapshot time"):
        stream(spark, bronze.uri, silver, tmp_path / "ck2", startingTimestamp="yesterday")
