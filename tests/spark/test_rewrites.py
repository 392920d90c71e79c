"""Rewrites from PySpark (issue 15): ``pyspark_lakefmt.delete(spark, uri, "<SQL predicate>")`` plans on the driver,
rewrites the files in Spark tasks and commits once; a bad predicate is refused before any task runs."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark_lakefmt
import pytest
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark_lakefmt.source import LakefmtDataSource
from pyspark_lakefmt.writer import LakefmtCommitMessage

import lakefmt
from lakefmt.rewrite.delete import plan_delete
from lakefmt.spec import CommitKind
from lakefmt.spec.sql.predicate import bind_predicate, parse_predicate

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("dt", pa.string())])
DAYS = ["2025-12-30", "2025-12-31", "2026-01-01"]


def _table(path: Path) -> lakefmt.Table:
    t = lakefmt.create_table(str(path), SCHEMA, partition_by=["dt"])
    for start in (0, 10):
        ids = list(range(start, start + 4))
        for dt in DAYS:
            t.append(pa.table({"id": ids, "x": [None if i % 4 == 1 else float(i) for i in ids], "dt": [dt] * 4}))
    return t


def _rows(t: lakefmt.Table) -> list[tuple[Any, ...]]:
    return sorted((r["dt"], r["id"]) for r in t.to_arrow().to_pylist())


def _jobs(spark: Any, group: str) -> list[Any]:
    tracker = spark.sparkContext.statusTracker()
    return [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]


def test_delete_with_a_sql_predicate_rewrites_in_spark_tasks(spark: Any, tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    before = _rows(t)
    group = f"delete-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "lakefmt delete test")
    try:
        snap = pyspark_lakefmt.delete(spark, t.uri, "dt < '2026-01-01' AND x >= 2")
        assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
        assert snap.properties == {
            "lakefmt.operation": "delete", "lakefmt.operation.predicate": "dt < '2026-01-01' AND x >= 2"
        }
        # x >= 2 is true for ids 2, 3, 10, 11 and 12; null for ids 1 and 13 (x is null), which stay, as in SQL
        gone = {(dt, i) for dt in DAYS[:2] for i in (2, 3, 10, 11, 12)}
        assert _rows(t) == sorted(set(before) - gone)
        jobs = _jobs(spark, group)
        assert len(jobs) == 1
        stages = [spark.sparkContext.statusTracker().getStageInfo(s) for s in jobs[0].stageIds]
        assert sum(s.numTasks for s in stages) == 1  # four small files to rewrite: one task, so few new files
        assert sorted(f.partition["dt"] for f in t.files()) == [DAYS[0], DAYS[1], DAYS[2], DAYS[2]]

        # a whole partition goes by its metadata: no Spark job; nothing matching: no snapshot and no job
        assert pyspark_lakefmt.delete(spark, t.uri, "dt = '2025-12-30'") is not None
        assert pyspark_lakefmt.delete(spark, t.uri, "x > 100 OR dt = '1999-01-01'") is None
        assert len(_jobs(spark, group)) == 1
    finally:
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
    assert {dt for dt, _ in _rows(t)} == {"2025-12-31", "2026-01-01"}


@pytest.mark.parametrize(
    ("predicate", "match"),
    [
        ("nope = 1", "no column 'nope'"),
        ("dt < 5", "quote the value"),
        ("x = 'a'", "cannot be compared with column x"),
        ("id >", "expected a value"),
    ],
)
def test_delete_refuses_a_bad_predicate_before_any_task(
    spark: Any, tmp_path: Path, predicate: str, match: str
) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1], "x": [1.0], "dt": ["2026-01-01"]}))
    latest = t.latest_snapshot()
    with pytest.raises(lakefmt.InvalidPredicateError, match=match):
        pyspark_lakefmt.delete(spark, t.uri, predicate)
    assert t.latest_snapshot() == latest


def _small_files(path: Path, days: int = 2, appends: int = 4) -> lakefmt.Table:
    t = lakefmt.create_table(str(path), SCHEMA, partition_by=["dt"])
    for k in range(appends):
        ids = list(range(k * 10, k * 10 + 3))
        t.append(pa.concat_tables(
            pa.table({"id": ids, "x": [float(i) for i in ids], "dt": [dt] * 3}, schema=SCHEMA) for dt in DAYS[:days]
        ))
    return t


def test_compact_rewrites_groups_in_spark_tasks_and_commits_once(spark: Any, tmp_path: Path) -> None:
    t = _small_files(tmp_path / "t")
    before = _rows(t)
    group = f"compact-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "lakefmt compact test")
    try:
        dry = pyspark_lakefmt.compact(spark, t.uri, min_files=2, dry_run=True)
        assert dry.dry_run and dry.snapshot is None and dry.rewritten_files == 8 and _jobs(spark, group) == []
        report = pyspark_lakefmt.compact(spark, t.uri, min_files=2, sort_by=["id"])
        jobs = _jobs(spark, group)
    finally:
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
    assert report.snapshot is not None and report.snapshot.commit_kind is CommitKind.COMPACT
    assert [s.commit_kind for s in t.snapshots()].count(CommitKind.COMPACT) == 1
    assert (report.files_before, report.files_after, report.rewritten_files) == (8, 2, 8)
    assert _rows(t) == before and len(t.files()) == 2
    assert len(jobs) == 1  # one job, a task per group (one group per partition)
    stages = [spark.sparkContext.statusTracker().getStageInfo(s) for s in jobs[0].stageIds]
    assert sum(s.numTasks for s in stages) == 2
    for f in t.files():  # sorted by id within each new file
        ids = pq.read_table(f.full_path).column("id").to_pylist()
        assert ids == sorted(ids)


def test_write_only_writers_never_compact_automatically(tmp_path: Path) -> None:
    """A table with compaction.auto: commits of the sinks built with writeOnly (or Paimon's write-only; Spark hands
    the keys over lower-cased) leave their small files; one without it compacts the partition after its commit.
    The sinks are driven as Spark's driver side drives them (``writer``/``streamWriter``, then ``commit`` with
    the tasks' messages), without a Spark job."""
    t = lakefmt.create_table(
        str(tmp_path / "t"), SCHEMA, partition_by=["dt"],
        options={"compaction.auto": "true", "compaction.min.file-num": "2"},
    )
    struct = from_arrow_schema(SCHEMA)

    def message(start: int) -> LakefmtCommitMessage:
        with t.new_writer() as w:
            w.write(pa.table({"id": [start], "x": [1.0], "dt": ["2026-01-01"]}, schema=SCHEMA))
            return LakefmtCommitMessage(w.prepare_commit())

    batch = LakefmtDataSource({"path": t.uri, "writeonly": "true"}).writer(struct, False)
    batch.commit([message(0)])
    stream = LakefmtDataSource({"path": t.uri, "commituser": "s", "write-only": "true"}).streamWriter(struct, False)
    stream.commit([message(1)], 0)  # two small files: an automatic compaction would merge them here
    assert [s.commit_kind for s in t.snapshots()] == [CommitKind.APPEND] * 2 and len(t.files()) == 2
    LakefmtDataSource({"path": t.uri}).writer(struct, False).commit([message(2)])
    kinds = [s.commit_kind for s in t.snapshots()]
    assert kinds == [CommitKind.APPEND] * 3 + [CommitKind.COMPACT] and len(t.files()) == 1
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [0, 1, 2]


def test_a_long_in_list_still_rules_files_out_by_min_max(tmp_path: Path) -> None:
    """pyarrow's simplifier prunes with an IN list of up to about 50 values; a delete's SQL IN list of more is
    bound with its least and greatest value beside it, the same rows (nulls included), so files outside that
    range are not read."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"compaction.auto": "false"})  # five files
    for k in range(5):
        t.append(pa.table({"id": [k * 100 + i for i in range(10)], "x": [1.0] * 9 + [None], "dt": ["d"] * 10}))
    ids = list(range(150, 254))  # 104 values; of the files' ids (k * 100 + 0..9) only 200..209 are in range
    sql = f"id IN ({', '.join(map(str, ids))})"
    flt = pyspark_lakefmt.rewrites.delete_filter(t, sql)
    assert plan_delete(t, flt).candidates.num_rows == 1  # only the file of ids 200..209 may match
    plain = pc.field("id").isin(ids)
    assert plan_delete(t, plain).candidates.num_rows == 5  # what pruning does without the range
    for text in (sql, f"NOT ({sql})", f"NOT ({sql}) OR x IS NULL"):
        got = t.to_arrow().filter(pyspark_lakefmt.rewrites.delete_filter(t, text))
        want = t.to_arrow().filter(bind_predicate(parse_predicate(text), t.schema(), text))
        assert got.equals(want), text
