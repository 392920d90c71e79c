"""TableWriter's durability on local disk: with ``write.fsync`` a large file is synced in the background while
it is written (every ``write.sync-ahead-bytes``), and every file is synced once more after it is closed, before it
can be listed in a manifest."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakefmt
from lakefmt.io import LocalFileIO
from lakefmt.meta.store import MetaStore

SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.string())])
SMALL_SYNC_AHEAD = 64 << 10  # write.sync-ahead-bytes: several background syncs per file of these tests


class RecordingIO(LocalFileIO):
    """Local disk that records each sync: the file, its size on disk then, whether it was closed, the thread."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.syncs: list[tuple[str, int, str]] = []
        self.fail_background = False

    def sync(self, rel: str) -> None:
        thread = threading.current_thread().name
        if self.fail_background and thread.startswith("lakefmt-sync"):
            raise OSError(5, "injected EIO in a background sync")
        self.syncs.append((rel, os.path.getsize(self.full_path(rel)), thread))
        super().sync(rel)


def rows(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "payload": pa.array([f"row-{i:08d}-" + "x" * 40 for i in range(start, start + n)])})


def table_on(tmp_path: Path, options: dict[str, str]) -> tuple[lakefmt.Table, RecordingIO]:
    uri = str(tmp_path / "t")
    defaults = {"write.row-group-rows": "10000", "write.sync-ahead-bytes": str(SMALL_SYNC_AHEAD)}
    lakefmt.create_table(uri, SCHEMA, options={**defaults, **options})
    io = RecordingIO(uri)
    return lakefmt.Table(io, MetaStore(io)), io


def test_large_file_is_synced_while_written_and_after_close(tmp_path: Path) -> None:
    table, io = table_on(tmp_path, {})
    with table.new_writer() as w:
        for i in range(10):
            w.write(rows(10_000, i * 10_000))
        message = w.prepare_commit()
    data_syncs = [s for s in io.syncs if s[0].endswith(".parquet")]
    (path,) = {s[0] for s in data_syncs}
    final_size = os.path.getsize(io.full_path(path))
    background = [s for s in data_syncs if s[2].startswith("lakefmt-sync")]
    assert background, "a file of several row groups over the threshold was never synced ahead"
    assert len(background) <= final_size // SMALL_SYNC_AHEAD  # at most one per threshold's worth of bytes
    # the last sync is the one after close, on the caller's thread, of the whole file
    assert data_syncs[-1][2] == threading.current_thread().name and data_syncs[-1][1] == final_size
    table.new_committer("w").commit(message, 0)
    assert table.scan().count() == 100_000
    assert pq.ParquetFile(io.full_path(path)).metadata.num_row_groups == 10


def test_sync_ahead_off_syncs_each_file_once_at_close(tmp_path: Path) -> None:
    table, io = table_on(tmp_path, {"write.sync-ahead-bytes": "0"})
    with table.new_writer() as w:
        for i in range(10):
            w.write(rows(10_000, i * 10_000))
        w.prepare_commit()
    data_syncs = [s for s in io.syncs if s[0].endswith(".parquet")]
    assert len(data_syncs) == 1 and not data_syncs[0][2].startswith("lakefmt-sync")
    assert data_syncs[0][1] == os.path.getsize(io.full_path(data_syncs[0][0]))


def test_small_files_are_synced_once(tmp_path: Path) -> None:
    table, io = table_on(tmp_path, {})
    with table.new_writer() as w:
        w.write(rows(1_000))
        w.prepare_commit()
    data_syncs = [s for s in io.syncs if s[0].endswith(".parquet")]
    assert len(data_syncs) == 1 and not data_syncs[0][2].startswith("lakefmt-sync")


def test_no_sync_at_all_without_fsync(tmp_path: Path) -> None:
    table, io = table_on(tmp_path, {"write.fsync": "false"})
    with table.new_writer() as w:
        for i in range(10):
            w.write(rows(10_000, i * 10_000))
        w.prepare_commit()
    assert io.syncs == []
    assert not any(t.name.startswith("lakefmt-sync") for t in threading.enumerate())


def test_a_failed_background_sync_fails_the_writer_and_commits_nothing(tmp_path: Path) -> None:
    table, io = table_on(tmp_path, {})
    io.fail_background = True
    with pytest.raises(OSError, match="injected EIO"), table.new_writer() as w:
        for i in range(10):
            w.write(rows(10_000, i * 10_000))
        w.prepare_commit()
    assert table.latest_snapshot() is None
    assert not list((tmp_path / "t").rglob("*.parquet")), "the aborted writer left its data file behind"
    assert not any(t.name.startswith("lakefmt-sync") for t in threading.enumerate())


def test_an_empty_batch_that_needs_a_cast_is_accepted(tmp_path: Path) -> None:
    """An empty float64 batch (or one with an empty chunk) into a float32 column: a cast may drop empty chunks,
    which the rounding check must not trip over (it raised a bare ValueError)."""
    import lakefmt

    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("x", pa.float32())]))
    assert t.append(pa.table({"x": pa.array([], pa.float64())})) is None
    t.append(pa.table({"x": pa.chunked_array([[1.5], [], [2.5]], pa.float64())}))
    assert t.to_arrow().column("x").to_pylist() == [1.5, 2.5]
