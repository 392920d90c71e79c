"""Hostile deletion vectors (issue 36): positions at or past their data file's rows, past ``2**32``, vectors of files
that are not in the snapshot, and vectors naming another data file, built with the project's own encoder and put
in place of a table's deletion-vector file.

A position at or past its file's rows is damage on every read path and before any write builds on it: each is
:class:`CorruptMetadataError` naming the data file (and, where the vector's Puffin file is known, that file), and
a refused write leaves the table as it was (the latest snapshot, and the rows a reader sees once the vector file
is put back). DuckDB's masked read joined on ``file_index << 32 | position`` and never checked a position: a vector
holding ``2**32 + 5`` hid row 5 of the next file, and a position past the rows was accepted silently; upsert and
``delete_keys`` copied such positions into the vectors they wrote."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from helpers import clear_read_caches

import lakefmt
from lakefmt.errors import CorruptMetadataError
from lakefmt.read import masks, polars_vectors
from lakefmt.rewrite.compact.run import compact
from lakefmt.rewrite.keys.planners import key_cache_clear
from lakefmt.spec import deletion_vector as dvm

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])
#: positions of the hostile vector of the first data file (10 rows; row 1, k=1, is deleted by the clean vector)
HOSTILE = {"past": [1, 100], "at the row count": [1, 10], "past 2**32": [1, 2**32 + 5]}


_fresh_caches = pytest.fixture(autouse=True)(clear_read_caches)


@dataclasses.dataclass
class Damaged:
    """A key table of two data files of 10 rows (``first``: k 0..9, ``second``: k 10..19) in one bucket, whose
    deletion-vector file (``puffin``) deleted k=1, then was replaced by hand."""

    root: str
    table: lakefmt.Table
    first: str
    second: str
    puffin: str
    clean: bytes  #: the deletion-vector file as the table wrote it
    rows: list[tuple[int, int]]  #: the rows read before the damage
    snapshot: int

    def write(self, data: bytes) -> None:
        with open(os.path.join(self.root, self.puffin), "wb") as out:
            out.write(data)
        masks._cache.clear()
        key_cache_clear()

    def restore(self) -> None:
        self.write(self.clean)


def _rows(t: lakefmt.Table) -> list[tuple[int, int]]:
    got = t.to_arrow()
    return sorted(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True))


def _table(tmp_path: Any) -> Damaged:
    root = str(tmp_path / "t")
    t = lakefmt.create_table(root, SCHEMA, primary_key=["k"], options={"bucket": "1", "compaction.auto": "false"})
    t.upsert(pa.table({"k": list(range(10)), "v": list(range(10))}, schema=SCHEMA))
    t.upsert(pa.table({"k": list(range(10, 20)), "v": list(range(10, 20))}, schema=SCHEMA))
    t.delete_keys(pa.table({"k": [1]}))
    files = t.files()
    (first,) = [f for f in files if f.deletion_vector is not None]
    (second,) = [f for f in files if f.deletion_vector is None]
    assert first.deletion_vector is not None
    puffin = first.deletion_vector.file
    with open(os.path.join(root, puffin), "rb") as f:
        clean = f.read()
    latest = t.latest_snapshot()
    assert latest is not None
    return Damaged(root, t, first.path, second.path, puffin, clean, _rows(t), latest.id)


def _names(d: Damaged, data_file: str, puffin: bool = True) -> str:
    """A pattern matching a message that names ``data_file`` (and the vector's Puffin file)."""
    return re.escape(data_file) + (f".*{re.escape(d.puffin)}" if puffin else "")


READS: dict[str, Callable[[lakefmt.Table], object]] = {
    "to_arrow": lambda t: t.scan().to_arrow(),
    "to_batches": lambda t: list(t.scan().to_batches()),
    "count": lambda t: t.scan().count(),
    "filtered": lambda t: t.scan(filter="k > 3").to_arrow(),
    "projected": lambda t: t.scan(columns=["v"]).to_arrow(),
    "to_duckdb": lambda t: t.scan().to_duckdb(duckdb.connect()).fetchall(),
    "to_duckdb filtered": lambda t: t.scan().to_duckdb(duckdb.connect()).filter("k = 15").fetchall(),
    "to_polars": lambda t: t.scan().to_polars().collect(),
    "to_polars after the read": lambda t: t.scan().to_polars().collect(),
    "to_pandas": lambda t: t.scan().to_pandas(),
    "pa.table": lambda t: pa.table(t.scan()),
    "read_files": lambda t: list(t.read_files(t.files())),
    "incremental": lambda t: t.scan(from_snapshot=0).to_arrow(),
}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_position_at_or_past_the_rows_is_refused_by_every_read(
    tmp_path: Any, kind: str, read: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: DuckDB's masked read never checked a position (``2**32 + 5`` hid k=15, row 5 of the next file, and a
    position past the rows was accepted); ``pa.table(scan)`` turned the error into pyarrow's ``ArrowInvalid``. Every
    read now decodes vectors in one place, ``masks.deleted_positions``, which checks each position against the
    file's rows by its manifest entry (and by its footer where an engine numbers the rows itself)."""
    if read == "to_polars after the read":
        monkeypatch.setattr(polars_vectors, "reader_masks", lambda pl: False)
    d = _table(tmp_path)
    d.write(dvm.encode_puffin([(d.first, HOSTILE[kind])]))
    with pytest.raises(CorruptMetadataError, match=_names(d, d.first)):
        READS[read](d.table)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_position_at_or_past_the_rows_is_refused_by_the_change_feed(tmp_path: Any, kind: str) -> None:
    """The change feed reads the rows a vector newly deletes by position (``RowReader``), checked against the
    file's rows by its footer: a hostile vector is refused naming the data file and (found: only the data file was
    named) the vector's Puffin file, never read as changes."""
    d = _table(tmp_path)
    d.write(dvm.encode_puffin([(d.first, HOSTILE[kind])]))
    with pytest.raises(CorruptMetadataError, match=_names(d, d.first)):
        d.table.changes(from_snapshot=d.snapshot - 1)


WRITES: dict[str, Callable[[lakefmt.Table], object]] = {
    "upsert of the file's key": lambda t: t.upsert(pa.table({"k": [2], "v": [-2]}, schema=SCHEMA)),
    "upsert of another file's key": lambda t: t.upsert(pa.table({"k": [15], "v": [-15]}, schema=SCHEMA)),
    "delete_keys": lambda t: t.delete_keys(pa.table({"k": [3]})),
    "delete by filter": lambda t: t.delete("k = 4"),
    "merge": lambda t: (
        t.merge(pa.table({"k": [5, 98], "v": [-5, -98]}), "t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    ),
    "compact": lambda t: t.compact(),
}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_position_at_or_past_the_rows_is_refused_by_every_write(tmp_path: Any, kind: str, write: str) -> None:
    """Found: upsert and ``delete_keys`` copied an old vector's positions into the bucket's new vector unchecked,
    and compaction kept the vectors of the files it did not rewrite unchecked. Every write now loads old vectors
    with their data files' row counts and decodes them through ``masks.deleted_positions``: refused, naming the
    data file and the Puffin file, and nothing committed (the latest snapshot and, with the vector file put back,
    the rows are those of before)."""
    d = _table(tmp_path)
    d.write(dvm.encode_puffin([(d.first, HOSTILE[kind])]))
    with pytest.raises(CorruptMetadataError, match=_names(d, d.first)):
        WRITES[write](d.table)
    again = lakefmt.open_table(d.root)
    latest = again.latest_snapshot()
    assert latest is not None and latest.id == d.snapshot
    d.restore()
    assert _rows(again) == d.rows


def test_a_vector_naming_another_data_file_is_checked_against_that_file(tmp_path: Any) -> None:
    """A vector whose Puffin properties name the second data file with a position past its rows (the first
    file's vector relabelled) is refused naming the second file, on reads and writes."""
    d = _table(tmp_path)
    d.write(dvm.encode_puffin([(d.first, [1]), (d.second, [3, 10])]))
    for action in (READS["to_arrow"], READS["to_duckdb"], READS["count"], WRITES["upsert of another file's key"]):
        with pytest.raises(CorruptMetadataError, match=_names(d, d.second)):
            action(d.table)
        masks._cache.clear()


def test_a_file_task_carrying_another_files_vector_is_refused(tmp_path: Any) -> None:
    """A planned file handed to ``read_files`` with the vector of another data file (an engine's task built by
    hand, or shipped with the wrong vector) would mask the wrong rows: refused, naming both files."""
    d = _table(tmp_path)
    files = d.table.files()
    first = next(f for f in files if f.path == d.first)
    second = next(f for f in files if f.path == d.second)
    wrong = dataclasses.replace(second, deletion_vector=first.deletion_vector)
    with pytest.raises(CorruptMetadataError, match=f"{re.escape(d.first)}.*{re.escape(d.second)}"):
        list(d.table.read_files([wrong]))


GHOST = "bucket-0/data-00000000000000000000000000000000-0.parquet"


def test_a_vector_of_a_file_not_in_the_snapshot_changes_no_row(tmp_path: Any) -> None:
    """A vector of a data file that the snapshot does not hold is applied by no read (every form returns the rows
    of before, and ``count`` agrees), and the next write that rewrites the bucket's vectors (upsert, compaction)
    drops it rather than carrying it on."""
    d = _table(tmp_path)
    d.write(dvm.encode_puffin([(d.first, [1]), (GHOST, [0, 1, 2, 2**32 + 5])]))
    ids = sorted({k for k, _ in d.rows})
    for read in ("to_arrow", "to_batches", "to_duckdb", "to_polars", "to_pandas", "pa.table"):
        got = READS[read](d.table)
        if read == "to_batches":
            got = pa.Table.from_batches(got)  # type: ignore[arg-type]
        elif read == "to_duckdb":
            got = pa.table({"k": [r[0] for r in got]})  # type: ignore[attr-defined]
        elif read == "to_polars":
            got = got.to_arrow()  # type: ignore[attr-defined]
        elif read == "to_pandas":
            got = pa.Table.from_pandas(got)
        assert sorted(got.column("k").to_pylist()) == ids, read  # type: ignore[attr-defined]
    assert d.table.scan().count() == len(ids)
    d.table.upsert(pa.table({"k": [2], "v": [-2]}, schema=SCHEMA))
    assert GHOST not in {f.deletion_vector.file for f in d.table.files() if f.deletion_vector is not None}
    after = [f for f in d.table.files() if f.deletion_vector is not None]
    assert after and all(f.path != GHOST for f in after)
    with open(os.path.join(d.root, after[0].deletion_vector.file), "rb") as f:  # type: ignore[union-attr]
        assert GHOST not in {b.referenced_data_file for b in dvm.puffin_blobs(f.read())}
    assert sorted(k for k, _ in _rows(d.table)) == ids


def _tiered(tmp_path: Any) -> tuple[lakefmt.Table, str, str]:
    """A bucket whose large file (1000 rows; k=1 deleted) a tiered compaction leaves alone while it merges six
    one-row files: the table, the large file and its deletion-vector file."""
    root = str(tmp_path / "tiered")
    t = lakefmt.create_table(root, SCHEMA, primary_key=["k"], options={"bucket": "1", "compaction.auto": "false"})
    t.upsert(pa.table({"k": list(range(1000)), "v": list(range(1000))}, schema=SCHEMA))
    for i in range(6):
        t.upsert(pa.table({"k": [2000 + i], "v": [i]}, schema=SCHEMA))
    t.delete_keys(pa.table({"k": [1]}))
    (large,) = [f for f in t.files() if f.deletion_vector is not None]
    assert large.deletion_vector is not None
    return t, large.path, large.deletion_vector.file


def _vector_files(t: lakefmt.Table) -> dict[str, list[int]]:
    """The vectors of the latest snapshot's deletion-vector files (every blob, live file or not), by data file."""
    out: dict[str, list[int]] = {}
    for task in t.files():
        if task.deletion_vector is not None:
            with open(os.path.join(t.uri, task.deletion_vector.file), "rb") as f:
                out.update({p: v.to_pylist() for p, v in dvm.decode_puffin(f.read()).items()})
    return out


def test_a_compaction_keeps_no_vector_of_a_file_not_in_the_snapshot(tmp_path: Any) -> None:
    """Found: a compaction that leaves some of a bucket's files alone copies their vectors into the bucket's new
    deletion-vector file, and copied every vector the old file held but the rewritten files': one of a file that
    is not in the snapshot was carried on. It now keeps only the vectors of files live in the latest snapshot."""
    t, large, puffin = _tiered(tmp_path)
    with open(os.path.join(t.uri, puffin), "wb") as out:
        out.write(dvm.encode_puffin([(large, [1]), (GHOST, [0, 1])]))
    masks._cache.clear()
    before = _rows(t)
    report = compact(t, tiered=True, min_files=2)
    assert report.rewritten_files == 6
    assert _vector_files(t) == {large: [1]}
    assert _rows(t) == before


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_compaction_refuses_to_keep_a_position_past_the_rows(tmp_path: Any, kind: str) -> None:
    """Found: the vectors a compaction keeps (of the files it leaves alone) were copied unchecked: a position past
    the large file's rows went on into the new deletion-vector file. Now refused, nothing committed."""
    t, large, puffin = _tiered(tmp_path)
    with open(os.path.join(t.uri, puffin), "rb") as f:
        clean = f.read()
    latest = t.latest_snapshot()
    before = _rows(t)
    positions = [1, 1000] if kind == "at the row count" else [1, 2000] if kind == "past" else [1, 2**32 + 5]
    with open(os.path.join(t.uri, puffin), "wb") as out:
        out.write(dvm.encode_puffin([(large, positions)]))
    masks._cache.clear()
    with pytest.raises(CorruptMetadataError, match=f"{re.escape(large)}.*{re.escape(puffin)}"):
        compact(t, tiered=True, min_files=2)
    after = t.latest_snapshot()
    assert after is not None and latest is not None and after.id == latest.id
    with open(os.path.join(t.uri, puffin), "wb") as out:
        out.write(clean)
    masks._cache.clear()
    assert _rows(t) == before


PARTED = pa.schema([pa.field("k", pa.int64(), False), pa.field("p", pa.string(), False), ("v", pa.int64())])


def _two_partitions(tmp_path: Any) -> tuple[lakefmt.Table, str, str, str]:
    """A key table partitioned by ``p`` (one bucket each): p=a's file (k 0..2; k=1 deleted by a vector) and p=b's;
    returns the table, the two data files and a's deletion-vector file."""
    root = str(tmp_path / "parted")
    t = lakefmt.create_table(
        root, PARTED, primary_key=["k", "p"], partition_by=["p"], options={"bucket": "1", "compaction.auto": "false"}
    )
    t.upsert(pa.table({"k": [0, 1, 2], "p": ["a"] * 3, "v": [0, 1, 2]}, schema=PARTED))
    t.upsert(pa.table({"k": [0, 1, 2], "p": ["b"] * 3, "v": [10, 11, 12]}, schema=PARTED))
    t.delete_keys(pa.table({"k": [1], "p": ["a"]}))
    (a,) = [f for f in t.files() if f.deletion_vector is not None]
    (b,) = [f for f in t.files() if f.path != a.path]
    assert a.deletion_vector is not None
    return t, a.path, b.path, a.deletion_vector.file


MISPLACED: dict[str, Callable[[lakefmt.Table], object]] = {
    "to_arrow": lambda t: t.to_arrow(),
    "changes": lambda t: t.changes(0),
    "upsert into p=a": lambda t: t.upsert(pa.table({"k": [5], "p": ["a"], "v": [5]}, schema=PARTED)),
    "upsert of a's key": lambda t: t.upsert(pa.table({"k": [2], "p": ["a"], "v": [-2]}, schema=PARTED)),
    "delete_keys in p=a": lambda t: t.delete_keys(pa.table({"k": [0], "p": ["a"]})),
    "delete by filter in p=a": lambda t: t.delete("p = 'a' AND k = 2"),
    "merge into p=a": lambda t: (
        t.merge(
            pa.table({"k": [2], "p": ["a"], "v": [-2]}, schema=PARTED),
            "t.k = s.k AND t.p = s.p",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .execute()
    ),
    "compact": lambda t: t.compact(),
}


@pytest.mark.parametrize("action", list(MISPLACED))
def test_a_vector_of_a_file_in_another_partition_is_refused_everywhere(tmp_path: Any, action: str) -> None:
    """Found: p=a's deletion-vector file rewritten to hold a vector of p=b's file too (a valid Puffin file) was
    refused by every read ("another partition"), but the change feed listed (k=0, p=b) as deleted though it is
    live, and an upsert into p=a and a compaction succeeded silently (each left the vector out, as not of its
    files, before the home check ran). The check is one function (``masks.check_homes``), run by the feed and by
    every write before it leaves out the vectors it does not need; nothing is committed."""
    t, a, b, puffin = _two_partitions(tmp_path)
    latest = t.latest_snapshot()
    with open(os.path.join(t.uri, puffin), "wb") as out:
        out.write(dvm.encode_puffin([(a, [1]), (b, [0])]))
    masks._cache.clear()
    key_cache_clear()
    pattern = f"{re.escape(puffin)}.*{re.escape(b)}.*another partition"
    with pytest.raises(CorruptMetadataError, match=pattern):
        MISPLACED[action](t)
    after = lakefmt.open_table(t.uri).latest_snapshot()
    assert after is not None and latest is not None and after.id == latest.id
