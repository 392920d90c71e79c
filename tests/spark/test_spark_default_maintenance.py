"""A table the streaming sink creates, with default options, does not pile up small files: each micro-batch's
commit is followed by the automatic compaction (on by default) and the expiration check."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakefmt
from lakefmt.options import TableOptions

BATCHES = 6


def test_a_stream_with_default_options_stays_within_the_bounds(spark: Any, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for i in range(BATCHES):  # one micro-batch each, every one adding a small file to both partitions
        ids = list(range(10 * i, 10 * i + 10))
        pq.write_table(pa.table({"id": ids, "dt": ["a" if j % 2 else "b" for j in ids]}), inbox / f"p-{i:02}.parquet")
    uri = str(tmp_path / "dst")
    query = (
        spark.readStream.schema("id long, dt string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(inbox))
        .writeStream.format("lakefmt")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .option("createTable", "true")
        .option("partitionBy", "dt")
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination(300)
    assert query.exception() is None
    t = lakefmt.open_table(uri)
    assert t.options == {}  # created by the sink with no option: the defaults apply
    defaults = TableOptions()
    snaps = t.snapshots()
    kinds = Counter(s.commit_kind for s in snaps)
    assert kinds[lakefmt.CommitKind.APPEND] == BATCHES and kinds[lakefmt.CommitKind.COMPACT] >= 1
    per_part = Counter(f.partition["dt"] for f in t.files())
    assert set(per_part) == {"a", "b"}
    # BATCHES files per partition without compaction; the tiers keep fewer than compaction.min.file-num + 2
    assert max(per_part.values()) < min(BATCHES, defaults.compaction_max_file_num, defaults.compaction_min_file_num + 2)
    # every snapshot is younger than snapshot.time-retained: all are kept, and no more than the commits made
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1)) and len(snaps) <= 2 * BATCHES
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(10 * BATCHES))
    report = t.expire_snapshots(dry_run=True)
    assert report.expired_snapshots == [] and "none older than snapshot.time-retained=1h" in (report.kept_reason or "")
