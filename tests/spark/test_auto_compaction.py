"""Automatic compaction behind Spark's streaming sink: the sink commits through ``Table.new_committer``, so a
table with ``compaction.auto`` compacts on the driver after a micro-batch's commit, as ``Table.append`` does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def test_the_streaming_sink_compacts_automatically(spark: Any, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for i in range(3):  # one micro-batch each below (Spark's own file source: no Python source to start)
        ids = list(range(10 * i, 10 * i + 10))
        pq.write_table(pa.table({"id": ids, "dt": ["a" if j % 2 else "b" for j in ids]}), inbox / f"part-{i}.parquet")
    options = {"compaction.auto": "true", "compaction.min.file-num": "2"}
    dst = lakefmt.create_table(str(tmp_path / "dst"), SCHEMA, partition_by=["dt"], options=options)
    query = (
        spark.readStream.schema("id long, dt string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(inbox))
        .writeStream.format("lakefmt")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(dst.uri)
    )
    query.awaitTermination(300)
    assert query.exception() is None
    kinds = [s.commit_kind for s in dst.snapshots()]
    assert kinds.count(lakefmt.CommitKind.APPEND) == 3 and lakefmt.CommitKind.COMPACT in kinds
    assert kinds.index(lakefmt.CommitKind.COMPACT) == 2  # right after the second micro-batch's commit
    assert sorted(dst.to_arrow().column("id").to_pylist()) == list(range(30))
    assert max(Counter(f.partition["dt"] for f in dst.files()).values()) < 3  # 3 without compaction
