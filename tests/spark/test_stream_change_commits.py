"""The plain stream (``readStream.format("lakefmt")``, no change feed) at commits that delete or replace rows: one
rule, decided by what a commit did to rows and not by its kind. Every way a key table's rows are deleted or
replaced (a row-kind delete through ``append``, ``upsert``, the Spark batch writer and the streaming sink;
``apply_key_changes``; an upsert replacing a row; ``delete_keys``; a delete by filter; MERGE; an overwrite) stops
the stream with an error naming ``skipChangeCommits`` and ``readChangeFeed``, and with ``skipChangeCommits`` the
stream skips it and goes on with the appends after it; a pure append and an upsert of new keys are read.

One table holds every kind of commit, each followed by an append; the stream reader is driven directly at each of
them (the calls Spark's driver-side worker makes), and two real queries run over the whole history: one that stops
at the first change, and the same checkpoint with ``skipChangeCommits``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import stream_until_caught_up as stream
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark_lakefmt.options import TableRef
from pyspark_lakefmt.stream_reader import PENDING, KindRule, StreamReader, snapshot_rule

import lakefmt
from lakefmt.rewrite.keys.upsert import apply_key_changes

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("op", pa.string())])
DDL = "id long, v string, op string"


def rows(ids: list[int] | range, op: str = "+I", v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [v] * len(ids), "op": [op] * len(ids)}, schema=SCHEMA)


def last_write(table: lakefmt.Table) -> int:
    """The latest snapshot that is not a compaction (a key table compacts after commits)."""
    return max(s.id for s in table.snapshots() if s.commit_kind is not lakefmt.CommitKind.COMPACT)


def history(spark: Any, tmp_path: Path) -> tuple[lakefmt.Table, dict[str, int], list[int]]:
    """A key table with ``rowkind.field`` whose history holds a pure append (ids 1..20), an upsert of new keys (21,
    22), then each kind of commit that deletes or replaces rows, each followed by an append of a new key. Returns
    the table, the snapshot of each change, and the ids appended after them."""
    t = lakefmt.create_table(
        str(tmp_path / "bronze"), SCHEMA, primary_key=["id"], options={"bucket": "1", "rowkind.field": "op"}
    )
    t.append(rows(range(1, 21)))
    t.upsert(rows([21, 22]))
    changes: dict[str, int] = {}
    later: list[int] = []

    def changed(name: str) -> None:
        changes[name] = last_write(t)
        later.append(100 + len(changes))
        t.append(rows([later[-1]]))

    t.append(rows([1], op="-D"))
    changed("row-kind delete through append")
    t.upsert(rows([2], op="-D"))
    changed("row-kind delete through upsert")
    spark.createDataFrame([(3, "x", "-D")], DDL).write.format(FMT).mode("append").save(t.uri)
    changed("row-kind delete through the Spark batch writer")
    source = tmp_path / "changes"
    source.mkdir()
    pq.write_table(rows([4], op="-D"), source / "part-0.parquet")
    query = (
        spark.readStream.schema(DDL)
        .parquet(str(source))
        .writeStream.format(FMT)
        .option("checkpointLocation", str(tmp_path / "ck-sink"))
        .trigger(availableNow=True)
        .start(t.uri)
    )
    query.awaitTermination()
    changed("row-kind delete through the streaming sink")
    apply_key_changes(t, rows([23]), rows([5]))
    changed("apply_key_changes")
    t.upsert(rows([6], v="new"))
    changed("upsert replacing a row")
    t.delete_keys(pa.table({"id": [7]}))
    changed("delete_keys")
    t.delete("id = 8")
    changed("delete by filter")
    t.merge(
        rows([9], v="merged"), "t.id = s.id", source_alias="s", target_alias="t"
    ).when_matched_update_all().execute()
    changed("MERGE")
    t.overwrite(rows([200, 201]))
    changed("overwrite")
    assert sorted(t.to_arrow().column("id").to_pylist()) == [later[-1], 200, 201]
    return t, changes, later


def reader(table: lakefmt.Table, **options: object) -> StreamReader:
    return StreamReader(TableRef(table.uri), {k.lower(): str(v) for k, v in options.items()})


def drained(r: StreamReader) -> list[int]:
    """The ids of every micro-batch until the stream is caught up, as Spark runs them."""
    ids: list[int] = []
    start = dict(PENDING)
    while (end := r.latestOffset(start, ReadAllAvailable())) is not start:
        for part in r.partitions(start, end):
            ids += [i for b in r.read(part) for i in b.column("id").to_pylist()]
        r.commit(end)
        start = end
    return sorted(ids)


def test_the_rule() -> None:
    assert snapshot_rule(lakefmt.CommitKind.COMPACT, False) is KindRule.SKIP
    for kind in (lakefmt.CommitKind.APPEND, lakefmt.CommitKind.OVERWRITE):
        assert snapshot_rule(kind, False) is KindRule.READ  # only added rows, whatever the kind
        assert snapshot_rule(kind, True) is KindRule.CHANGE


def test_plain_stream_stops_at_every_commit_that_deletes_or_replaces_rows(spark: Any, tmp_path: Path) -> None:
    table, changes, later = history(spark, tmp_path)
    first = list(range(1, 23))  # the pure append and the upsert of new keys

    # each change stops a stream that reaches it, naming the snapshot and both ways on
    for name, sid in changes.items():
        snap = table.snapshot(sid)
        assert snap.removes_rows is True, name
        pattern = rf"snapshot {sid} \({snap.operation.value}, kind {snap.commit_kind.value}\) deleted or replaced"
        with pytest.raises(lakefmt.LakefmtError, match=pattern) as info:
            reader(table, startingSnapshot=sid).latestOffset(PENDING, ReadAllAvailable())
        assert "skipChangeCommits" in str(info.value) and "readChangeFeed" in str(info.value), name
    # skipped, the stream goes on with the appends after it
    for i, (name, sid) in enumerate(changes.items()):
        assert drained(reader(table, startingSnapshot=sid, skipChangeCommits="true")) == later[i:], name

    # real queries: the first one reads what came before the first change, then stops at it; restarted from its
    # checkpoint with skipChangeCommits, it skips every change and reads every append after them, each once
    silver, checkpoint = str(tmp_path / "silver"), tmp_path / "ck"
    first_change = min(changes.values())  # the row-kind delete through append: kind APPEND
    with pytest.raises(Exception, match=rf"snapshot {first_change} \(UPSERT, kind APPEND\) deleted or replaced"):
        stream(spark, table.uri, silver, checkpoint, startingSnapshot=1)
    assert sorted(lakefmt.open_table(silver).to_arrow().column("id").to_pylist()) == first
    stream(spark, table.uri, silver, checkpoint, startingSnapshot=1, skipChangeCommits="true")
    assert sorted(lakefmt.open_table(silver).to_arrow().column("id").to_pylist()) == first + later


KEYS = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])


def _restored_vector(tmp_path: Path) -> lakefmt.Table:
    """A key table whose snapshot 4 is a restore that ADDs back the deletion-vector file of snapshot 2 (k=1
    deleted), then an append of k=3 (snapshot 5)."""
    t = lakefmt.create_table(str(tmp_path / "r"), KEYS, primary_key=["k"], options={"compaction.auto": "false"})
    t.upsert(pa.table({"k": [1, 2], "v": [10, 20]}, schema=KEYS))
    t.delete_keys(pa.table({"k": [1]}))
    t.restore(snapshot_id=1)
    t.restore(snapshot_id=2)
    t.append(pa.table({"k": [3], "v": [30]}, schema=KEYS))
    return t


def test_a_restore_adding_a_vector_again_stops_the_stream_naming_both_ways(tmp_path: Path) -> None:
    """Found: a restore that only ADDs a deletion-vector file back recorded ``removesRows=false``; the stream read
    it as an append and failed with a misleading ``DeletionVectorsError`` about a compaction, naming neither way on,
    even with ``skipChangeCommits``. Now it is a change: the error names both, and skipping goes on to k=3."""
    t = _restored_vector(tmp_path)
    with pytest.raises(lakefmt.LakefmtError, match=r"snapshot 4 \(RESTORE.*skipChangeCommits.*readChangeFeed"):
        reader(t, startingSnapshot=4).latestOffset(PENDING, ReadAllAvailable())
    r = reader(t, startingSnapshot=4, skipChangeCommits="true")
    start = dict(PENDING)
    got: list[int] = []
    while (end := r.latestOffset(start, ReadAllAvailable())) is not start:
        got += [k for part in r.partitions(start, end) for b in r.read(part) for k in b.column("k").to_pylist()]
        r.commit(end)
        start = end
    assert got == [3]


def test_a_hand_edited_removes_rows_false_is_refused_by_the_stream(tmp_path: Path) -> None:
    """Found: a hand-edited ``removesRows=false`` on a snapshot that deleted a file holding rows was trusted: the
    stream emitted the deleted row, and k=2 twice. The stream checks the recorded field against the delta it reads
    anyway: :class:`CorruptMetadataError` naming the snapshot."""
    t = lakefmt.create_table(str(tmp_path / "h"), KEYS, primary_key=["k"], options={"compaction.auto": "false"})
    t.upsert(pa.table({"k": [1, 2], "v": [10, 20]}, schema=KEYS))
    snap = t.overwrite(pa.table({"k": [2], "v": [21]}, schema=KEYS))
    assert snap is not None and snap.removes_rows is True
    path = tmp_path / "h" / "snapshot" / f"snapshot-{snap.id}"
    path.write_bytes(path.read_bytes().replace(b'"removesRows":true', b'"removesRows":false'))
    for options in ({}, {"skipChangeCommits": "true"}):
        with pytest.raises(lakefmt.CorruptMetadataError, match=rf"snapshot {snap.id} records removesRows=false"):
            reader(lakefmt.open_table(t.uri), startingSnapshot=snap.id, **options).latestOffset(
                PENDING, ReadAllAvailable()
            )
