"""The golden format-version-3 table (tests/data/golden_v3, written by tools/make_golden_v3.py): a key table
partitioned by ``dt``, keyed by ``(dt, id)``, with 2 buckets, an upsert and a ``delete_keys``. Every later lakefmt
must read these files as they are: the exact rows of each snapshot, the counts, the bucket of every row (the hash is
part of the format), and the deletion vectors, which pyiceberg's reader decodes too."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

import lakefmt
from lakefmt.errors import DeletionVectorsError, UnsupportedFormatVersionError
from lakefmt.meta import entries as ents
from lakefmt.spec import codec
from lakefmt.spec.deletion_vector import decode_puffin, puffin_blobs
from lakefmt.spec.keys.hashing import bucket_of
from lakefmt.spec.manifest import FileContent

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_v3"
D1, D2 = "2026-01-01", "2026-01-02"

#: (dt, id, name, amount) of each snapshot, sorted by key
ROWS = {
    1: [
        (D1, 1, "a", 1.0), (D1, 2, "b", 2.0), (D1, 3, "c", 3.0), (D1, 4, "d", 4.0),
        (D2, 1, "a", 10.0), (D2, 2, "b", 20.0), (D2, 3, "c", 30.0),
    ],
    2: [
        (D1, 1, "a", 1.0), (D1, 2, "b2", 2.5), (D1, 3, "c", 3.0), (D1, 4, "d", 4.0), (D1, 5, "e", 5.0),
        (D2, 1, "a2", 10.5), (D2, 2, "b", 20.0), (D2, 3, "c2", 30.5),
    ],
    3: [
        (D1, 1, "a", 1.0), (D1, 2, "b2", 2.5), (D1, 4, "d", 4.0), (D1, 5, "e", 5.0),
        (D2, 1, "a2", 10.5), (D2, 3, "c2", 30.5),
    ],
}
#: the rows the live deletion vectors of snapshot 3 delete: replaced by the upsert, or deleted by key
DELETED = {(D1, 2, "b"), (D1, 3, "c"), (D2, 1, "a"), (D2, 2, "b"), (D2, 3, "c")}


@pytest.fixture
def golden(tmp_path: Path) -> lakefmt.Table:
    shutil.copytree(GOLDEN, tmp_path / "t")
    return lakefmt.open_table(str(tmp_path / "t"))


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in table.select(["dt", "id", "name", "amount"]).to_pylist())


def _live(t: lakefmt.Table, snapshot_id: int | None = None) -> pa.Table:
    store = t.rewrite_target().store
    snap = t.snapshot(snapshot_id) if snapshot_id is not None else t.latest_snapshot()
    assert snap is not None
    return ents.live_entries(store, snap)


def _bucket_key(entries: pa.Table, i: int) -> tuple[str, int]:
    return entries.column(ents.PARTITION)[i].as_py()["dt"], entries.column(ents.BUCKET)[i].as_py()


def test_the_rows_and_counts_of_every_snapshot(golden: lakefmt.Table) -> None:
    t = golden
    schema = t.table_schema()
    assert (schema.format_version, schema.primary_keys, schema.partition_keys) == (3, ("dt", "id"), ("dt",))
    assert t.options == {"bucket": "2"} and schema.table_options.bucket == 2
    assert [f.nullable for f in t.schema()] == [False, False, True, True]  # key columns are non-null
    snaps = t.snapshots()
    assert [s.id for s in snaps] == [1, 2, 3]
    assert [s.commit_kind.value for s in snaps] == ["APPEND", "APPEND", "OVERWRITE"]
    assert [s.properties.get("lakefmt.operation") for s in snaps] == ["upsert", "upsert", "delete"]
    assert [s.total_record_count for s in snaps] == [7, 8, 6]  # live rows: the vectors' rows count negative
    assert [s.delta_record_count for s in snaps] == [7, 1, -2]
    assert [s.total_file_count for s in snaps] == [4, 11, 11]  # data files and deletion-vector files
    for sid, want in ROWS.items():
        assert _rows(t.to_arrow(snapshot_id=sid)) == want
        assert t.scan(snapshot_id=sid).count() == len(want) == t.snapshot(sid).total_record_count
    assert _rows(t.to_arrow()) == ROWS[3]
    assert _rows(pa.Table.from_batches(list(t.scan().to_batches()), schema=t.schema())) == ROWS[3]
    # the mask comes before the filter: the deleted versions of id 3 never show
    assert _rows(t.scan(filter=pc.field("id") == 3).to_arrow()) == [(D2, 3, "c2", 30.5)]
    assert t.scan(filter=pc.field("name") == "b").count() == 0
    ids = t.scan(columns=["id"], filter=pc.field("dt") == D1).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [1, 2, 4, 5]
    with pytest.raises(DeletionVectorsError, match="to_arrow"):
        t.scan().to_dataset()


def test_the_layout_and_the_bucket_of_every_row(golden: lakefmt.Table) -> None:
    """Data files sit in ``<partition>/bucket-<n>/``; every row of a file is in the file's bucket by the format's
    hash (a changed hash fails here); a partition and bucket has at most one live deletion-vector file."""
    live = _live(golden)
    data, dv = ents.data_files(live), ents.vector_files(live)
    assert (data.num_rows, dv.num_rows) == (8, 3)
    root = Path(golden.uri)
    for i, path in enumerate(ents.paths(data)):
        dt, bucket = _bucket_key(data, i)
        assert path.startswith(f"dt={dt}/bucket-{bucket}/data-") and path.endswith(".parquet")
        rows = pq.read_table(root / path)
        assert rows.num_rows == data.column(ents.ROW_COUNT)[i].as_py()
        assert set(bucket_of(rows, ["id"], 2).tolist()) == {bucket}
        assert set(rows.column("dt").to_pylist()) == {dt}
    keys = [_bucket_key(dv, i) for i in range(dv.num_rows)]
    assert Counter(keys) == Counter({(D1, 0): 1, (D2, 0): 1, (D2, 1): 1})
    for i, path in enumerate(ents.paths(dv)):
        dt, bucket = keys[i]
        assert path.startswith(f"dt={dt}/bucket-{bucket}/dv-") and path.endswith(".puffin")
        assert dv.column(ents.CONTENT)[i].as_py() == int(FileContent.DELETION_VECTORS)


def test_the_deletion_vectors_decode(golden: lakefmt.Table) -> None:
    """Each live Puffin file holds the vectors of its bucket's data files; the positions, decoded by lakefmt and by
    pyiceberg, are exactly the rows replaced or deleted; an entry's row count is its positions, and the snapshot's
    row count is the data files' rows less them."""
    root = Path(golden.uri)
    live = _live(golden)
    data, dv = ents.data_files(live), ents.vector_files(live)
    data_bucket = {p: _bucket_key(data, i) for i, p in enumerate(ents.paths(data))}
    deleted: set[tuple[Any, ...]] = set()
    for i, path in enumerate(ents.paths(dv)):
        raw = (root / path).read_bytes()
        ours = {k: v.to_pylist() for k, v in decode_puffin(raw).items()}
        theirs = {
            d.referenced_data_file: [(key << 32) + low for key, bitmap in enumerate(d._bitmaps) for low in bitmap]
            for d in deletion_vectors_from_puffin_file(PuffinFile(raw))
        }
        assert ours == theirs and ours
        cardinality = {b.referenced_data_file: b.cardinality for b in puffin_blobs(raw)}
        assert cardinality == {k: len(v) for k, v in ours.items()}
        assert dv.column(ents.ROW_COUNT)[i].as_py() == sum(len(v) for v in ours.values())
        for file, positions in ours.items():
            assert data_bucket[file] == _bucket_key(dv, i)  # a vector lives with its data file's bucket
            rows = pq.read_table(root / file).to_pylist()
            assert positions == sorted(positions) and positions[-1] < len(rows)
            deleted |= {(rows[p]["dt"], rows[p]["id"], rows[p]["name"]) for p in positions}
    assert deleted == DELETED
    total = pc.sum(data.column(ents.ROW_COUNT)).as_py() - pc.sum(dv.column(ents.ROW_COUNT)).as_py()
    assert total == golden.latest_snapshot().total_record_count == 6  # type: ignore[union-attr]


def test_a_version_2_reader_refuses_it_naming_the_version(golden: lakefmt.Table, monkeypatch: Any) -> None:
    monkeypatch.setattr(codec, "FORMAT_VERSION", 2)
    with pytest.raises(UnsupportedFormatVersionError, match=r"format version 3; this library reads up to version 2"):
        lakefmt.open_table(golden.uri).to_arrow()


def test_writing_on_the_golden_table(golden: lakefmt.Table) -> None:
    """This lakefmt upserts and deletes on the old files: the new marks join each bucket's one live Puffin file."""
    t = golden
    t.upsert(pa.table({"dt": [D1, D2], "id": [4, 7], "name": ["d2", "g"], "amount": [4.5, 70.0]}, schema=t.schema()))
    t.delete_keys(pa.table({"dt": [D2], "id": [3]}))
    want = [r for r in ROWS[3] if r[:2] not in ((D1, 4), (D2, 3))] + [(D1, 4, "d2", 4.5), (D2, 7, "g", 70.0)]
    assert _rows(t.to_arrow()) == sorted(want)
    assert t.latest_snapshot().total_record_count == len(want)  # type: ignore[union-attr]
    dv = ents.vector_files(_live(t))
    keys = [_bucket_key(dv, i) for i in range(dv.num_rows)]
    assert len(keys) == len(set(keys))
    assert _rows(t.to_arrow(snapshot_id=3)) == ROWS[3]  # time travel to the golden snapshot still reads it
