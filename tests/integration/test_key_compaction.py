"""Compaction of format-version-3 tables (key tables and merge-on-read deletes): input files are read with their
deletion vectors applied (no deleted row comes back), each compacted bucket's deletion-vector file is replaced
in the same COMPACT snapshot, a key table is compacted per bucket at ``num-sorted-run.compaction-trigger`` (by
``Table.compact`` and by automatic compaction), and a compaction that races an upsert or a delete of its bucket
loses (re-plans or gives up) without failing the writer. Restore, tags, expiration and orphan-clean with
deletion-vector files."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt import hooks
from lakefmt.errors import RewriteConflictError
from lakefmt.meta import entries as ents
from lakefmt.options import TableOptions
from lakefmt.read import masks
from lakefmt.read.masks import load_vectors
from lakefmt.spec import CommitKind
from lakefmt.spec.keys.hashing import bucket_of

KEYED = pa.schema(
    [pa.field("p", pa.string(), nullable=False), pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())]
)
PLAIN = pa.schema([pa.field("id", pa.int64()), pa.field("p", pa.string()), pa.field("v", pa.string())])
NOSYNC = {"write.fsync": "false"}
Model = dict[tuple[str, int], int]


def keyed(where: Any, **options: str) -> lakefmt.Table:
    """A key table (key p, k; partitioned by p; 2 buckets) on a storage fixture or at a local path; it compacts
    only when asked (a key table compacts automatically by default) unless ``options`` say otherwise."""
    opts = {**NOSYNC, "bucket": "2", "compaction.auto": "false", **options}
    if isinstance(where, str):
        return lakefmt.create_table(where, KEYED, partition_by=["p"], options=opts, primary_key=["p", "k"])
    table: lakefmt.Table = create_table_in(where, KEYED, partition_by=["p"], options=opts, primary_key=["p", "k"])
    return table


def upsert(t: lakefmt.Table, model: Model, keys: Iterable[int], v: int, parts: tuple[str, ...] = ("a", "b")) -> None:
    rows = [(p, k) for k in keys for p in parts]
    t.upsert(pa.table({"p": [p for p, _ in rows], "k": [k for _, k in rows], "v": [v] * len(rows)}, schema=KEYED))
    model.update(dict.fromkeys(rows, v))


def delete(t: lakefmt.Table, model: Model, keys: Iterable[int], parts: tuple[str, ...] = ("a", "b")) -> None:
    rows = [(p, k) for k in keys for p in parts]
    t.delete_keys(pa.table({"p": [p for p, _ in rows], "k": pa.array([k for _, k in rows], pa.int64())}))
    for r in rows:
        model.pop(r, None)


def state(t: lakefmt.Table, snapshot_id: int | None = None) -> Model:
    """What a scan reads, one row per key (a second row for a key fails)."""
    out: Model = {}
    for r in t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist():
        key = (r["p"], r["k"])
        assert key not in out, f"two live rows for key {key} in snapshot {snapshot_id}"
        out[key] = r["v"]
    return out


def live(t: lakefmt.Table, snapshot_id: int | None = None) -> pa.Table:
    store = t.rewrite_target().store
    snap = store.snapshot(snapshot_id) if snapshot_id is not None else t.latest_snapshot()
    assert snap is not None
    return ents.live_entries(store, snap)


def check(t: lakefmt.Table, snapshot_id: int | None = None, *, files: bool = False) -> None:
    """A snapshot's invariants: one row per key, its row count is its live rows, at most one deletion-vector file
    per partition and bucket, vectors only of live data files; with ``files``, each data file's rows are in its
    bucket and its folder is the bucket's."""
    entries = live(t, snapshot_id)
    rows = t.scan(snapshot_id=snapshot_id).to_arrow()
    state(t, snapshot_id)
    snap = t.latest_snapshot() if snapshot_id is None else t.rewrite_target().store.snapshot(snapshot_id)
    assert snap is not None and snap.total_record_count == rows.num_rows
    dv = ents.vector_files(entries)
    where = list(zip(dv.column("partition").to_pylist(), dv.column("bucket").to_pylist(), strict=True))
    assert len({(p["p"], b) for p, b in where}) == len(where)
    data = ents.data_files(entries)
    assert set(load_vectors(t.io, dv)) <= set(ents.paths(data))
    if not files:
        return
    for path, bucket, part in zip(
        ents.paths(data), data.column("bucket").to_pylist(), data.column("partition").to_pylist(), strict=True
    ):
        assert path.startswith(f"p={part['p']}/bucket-{bucket}/")
        table = pq.read_table(pa.BufferReader(t.io.read(path)))
        assert set(bucket_of(table, ["k"], t.table_schema().table_options.bucket).tolist()) <= {bucket}


def bucket_files(t: lakefmt.Table) -> dict[tuple[str, int], int]:
    data = ents.data_files(live(t))
    out: dict[tuple[str, int], int] = {}
    for part, bucket in zip(data.column("partition").to_pylist(), data.column("bucket").to_pylist(), strict=True):
        out[(part["p"], bucket)] = out.get((part["p"], bucket), 0) + 1
    return out


# -- Table.compact -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("store", ["local", "memory"], indirect=True)
def test_compaction_after_upserts_and_deletes_keeps_exactly_the_live_rows(store: Any) -> None:
    t = keyed(store)
    model: Model = {}
    for i in range(6):  # overlapping keys: each upsert replaces rows of the ones before
        upsert(t, model, range(i * 4, i * 4 + 10), i)
    delete(t, model, [1, 9, 21])
    before = t.latest_snapshot()
    assert before is not None and state(t) == model and ents.vector_files(live(t)).num_rows == 4
    report = t.compact()  # 6 files per bucket >= the trigger (5)
    snap = report.snapshot
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert state(t) == model and report.rows == len(model) and report.purged_rows > 0
    assert report.rows + report.purged_rows == 6 * 10 * 2
    assert ents.vector_files(live(t)).num_rows == 0  # every file of every bucket was merged
    assert set(bucket_files(t).values()) == {1} and len(bucket_files(t)) == 4
    assert snap.total_record_count == before.total_record_count == len(model)
    check(t, files=True)
    assert state(t, before.id) == model  # the snapshot before still reads the same
    assert t.compact().snapshot is None  # one file per bucket: nothing to do
    upsert(t, model, [0, 1, 2], 99)  # an upsert after the compaction replaces the compacted rows
    delete(t, model, [3])
    assert state(t) == model
    check(t)


def test_compaction_with_vectors_on_s3(s3_store: Any) -> None:
    t = keyed(s3_store, bucket="1", **{"num-sorted-run.compaction-trigger": "3"})
    model: Model = {}
    for i in range(3):
        upsert(t, model, range(i * 4, i * 4 + 8), i, parts=("a",))
    delete(t, model, [9], parts=("a",))
    report = t.compact()
    assert report.snapshot is not None and report.purged_rows == 9 and report.rows == len(model) == 15
    assert state(t) == model and bucket_files(t) == {("a", 0): 1} and ents.vector_files(live(t)).num_rows == 0


def test_a_key_table_is_compacted_at_min_files_when_asked(tmp_path: Any) -> None:
    t = keyed(str(tmp_path / "t"), **{"num-sorted-run.compaction-trigger": "4"})
    model: Model = {}
    for i in range(3):  # disjoint keys: no deleted row
        upsert(t, model, range(i * 10, i * 10 + 10), i, parts=("a",))
    assert t.compact(min_files=4).snapshot is None  # 3 files per bucket, 4 asked for
    plan = lakefmt.plan_compaction(t, min_files=4)
    assert plan.groups == () and plan.min_files == 4
    report = t.compact(min_files=2)
    assert report.snapshot is not None and set(bucket_files(t).values()) == {1}
    assert state(t) == model
    for i in range(3, 7):
        upsert(t, model, range(i * 10, i * 10 + 10), i, parts=("a",))
    assert set(bucket_files(t).values()) == {5}
    groups = lakefmt.plan_compaction(t, min_files=4).groups
    assert len(groups) == 2 and {g.bucket for g in groups} == {0, 1}  # one group per bucket, never mixed
    assert all(set(g.entries.column("bucket").to_pylist()) == {g.bucket} for g in groups)
    assert t.compact(min_files=4).snapshot is not None and set(bucket_files(t).values()) == {1}
    assert state(t) == model
    check(t, files=True)


def test_compact_merges_every_bucket_whole_below_the_trigger(tmp_path: Any) -> None:
    """``Table.compact()`` on a key table is a full compaction (Paimon's): a bucket of 3 files, under the trigger
    (5), is merged into one file, and a bucket that is one file with deleted rows is rewritten without them; the
    automatic compaction's trigger does not apply to an explicit call."""
    t = keyed(str(tmp_path / "t"))
    model: Model = {}
    for i in range(3):  # overlapping keys: each upsert deletes rows of the one before
        upsert(t, model, range(i * 5, i * 5 + 10), i, parts=("a",))
    assert set(bucket_files(t).values()) == {3}
    plan = lakefmt.plan_compaction(t)
    assert plan.min_files == 1 and len(plan.groups) == 2 and plan.num_files == 6
    report = t.compact()
    assert report.snapshot is not None and report.rewritten_files == 6 and report.purged_rows == 2 * 5
    assert set(bucket_files(t).values()) == {1} and ents.vector_files(live(t)).num_rows == 0
    assert state(t) == model
    delete(t, model, [7], parts=("a",))  # one file in its bucket, one row of it deleted
    assert ents.vector_files(live(t)).num_rows == 1
    report = t.compact()
    assert report.snapshot is not None and report.rewritten_files == 1 and report.purged_rows == 1
    assert ents.vector_files(live(t)).num_rows == 0 and state(t) == model
    assert t.compact().snapshot is None  # one file per bucket, no deleted row: nothing left to do
    check(t, files=True)


def test_a_bucket_with_many_deleted_rows_is_compacted_below_the_trigger(tmp_path: Any) -> None:
    t = keyed(str(tmp_path / "t"))
    model: Model = {}
    upsert(t, model, range(20), 0, parts=("a",))
    upsert(t, model, range(20), 1, parts=("a",))  # the first file's rows are all deleted
    report = t.compact()
    assert report.snapshot is not None and report.purged_rows == 20 and report.rows == 20
    assert set(bucket_files(t).values()) == {1} and ents.vector_files(live(t)).num_rows == 0
    assert state(t) == model


def test_merge_on_read_compaction_rewrites_files_with_many_deleted_rows_and_keeps_other_vectors(
    tmp_path: Any,
) -> None:
    t = lakefmt.create_table(
        str(tmp_path / "t"),
        PLAIN,
        partition_by=["p"],
        options={**NOSYNC, "write.delete.mode": "merge-on-read", "compaction.auto": "false"},  # compacted on demand
    )
    for i in range(3):
        ids = range(i * 100, i * 100 + 100)
        t.append(pa.table({"id": ids, "p": ["a"] * 50 + ["b"] * 50, "v": ["x"] * 100}, schema=PLAIN))
    t.delete(pc.field("id") < 40)  # 40 of the 50 rows of the first file of a
    t.delete(pc.field("id") == 120)  # 1 row of the second file of a
    before = sorted(t.to_arrow().column("id").to_pylist())
    old_dv = ents.paths(ents.vector_files(live(t)))
    assert len(old_dv) == 1
    report = t.compact(min_files=10)  # no partition holds 10 small files: only the file with many deletes
    assert report.snapshot is not None and report.rewritten_files == 1 and report.purged_rows == 40
    assert report.rows == 10 and report.partitions == [{"p": "a"}]
    assert sorted(t.to_arrow().column("id").to_pylist()) == before and 120 not in before
    entries = live(t)
    dv = ents.vector_files(entries)
    assert dv.num_rows == 1 and ents.paths(dv) != old_dv and dv.column("row_count").to_pylist() == [1]
    vectors = load_vectors(t.io, dv)
    assert len(vectors) == 1 and next(iter(vectors)) in ents.paths(ents.data_files(entries))
    store = t.rewrite_target().store
    snap = t.latest_snapshot()
    assert snap is not None and snap.total_record_count == len(before)
    delta = ents.concat_entries(ents.read_manifests(store, store.manifest_list(snap.delta_manifest_list)))
    assert old_dv[0] in ents.paths(ents.deletes(delta))  # the old file replaced in the COMPACT snapshot
    assert t.compact(min_files=10).snapshot is None  # the rest deletes too little to be worth it


@pytest.mark.parametrize("sort_by", [None, "v"])
def test_vectors_mask_files_read_in_many_batches_and_a_wholly_deleted_file_goes(
    tmp_path: Any, sort_by: str | None
) -> None:
    t = lakefmt.create_table(
        str(tmp_path / "t"),
        PLAIN,
        partition_by=["p"],
        options={
            **NOSYNC, "write.delete.mode": "merge-on-read", "write.row-group-rows": "64", "compaction.auto": "false"
        },
    )
    for lo, hi in ((0, 500), (500, 1000), (1000, 1100)):
        ids = range(lo, hi)
        t.append(pa.table({"id": ids, "p": ["a"] * len(ids), "v": [f"{i:05}" for i in ids]}, schema=PLAIN))
    t.delete(pc.field("id").isin([i for i in range(1100) if i % 7 == 0]))  # rows in every batch of every file
    t.delete(pc.field("id") >= 1000)  # the whole third file
    want = sorted(i for i in range(1000) if i % 7)
    report = t.compact(min_files=3, sort_by=sort_by)
    assert report.snapshot is not None and report.rewritten_files == 3 and report.rows == len(want)
    assert report.purged_rows == 1100 - len(want)
    assert sorted(t.to_arrow().column("id").to_pylist()) == want
    assert ents.vector_files(live(t)).num_rows == 0
    snap = t.latest_snapshot()
    assert snap is not None and snap.total_record_count == len(want)


# -- automatic compaction ----------------------------------------------------------------------------------------
def test_automatic_compaction_keeps_buckets_under_the_trigger(tmp_path: Any) -> None:
    t = keyed(str(tmp_path / "t"), **{"compaction.auto": "true", "num-sorted-run.compaction-trigger": "3"})
    model: Model = {}
    kinds = []
    for i in range(7):
        upsert(t, model, range(i * 3, i * 3 + 12), i)
        if i % 4 == 3:
            delete(t, model, [i * 3])
        assert max(bucket_files(t).values()) < 3
        assert state(t) == model
        latest = t.latest_snapshot()
        assert latest is not None
        kinds.append(latest.commit_kind)
    assert CommitKind.COMPACT in kinds
    latest = t.latest_snapshot()
    assert latest is not None
    for sid in range(1, latest.id + 1):
        check(t, sid)
    check(t, files=True)


def test_asynchronous_automatic_compaction_of_a_key_table(tmp_path: Any) -> None:
    t = keyed(
        str(tmp_path / "t"),
        **{"compaction.auto": "true", "compaction.async": "true", "num-sorted-run.compaction-trigger": "3"},
    )
    model: Model = {}
    for i in range(8):
        upsert(t, model, range(i * 2, i * 2 + 8), i)
        if i % 3 == 2:
            delete(t, model, [i * 2 + 1])
    assert t.wait_for_compaction(60)
    assert state(t) == model and max(bucket_files(t).values()) < 3
    latest = t.latest_snapshot()
    assert latest is not None
    for sid in range(1, latest.id + 1):
        check(t, sid)


def test_automatic_compaction_keeps_the_rows_on_disk_near_the_live_rows(tmp_path: Any) -> None:
    """Upserts of 1% of a key table's keys with the default options: every read masks the rows upserts replaced
    until a compaction drops them; ``compaction.bucket.delete-ratio-threshold`` bounds their share (the bucket is
    merged at the trigger that follows, a few commits later at most: the slack)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema, primary_key=["id"], options=NOSYNC)
    n, step = 2000, 20
    t.append(pa.table({"id": range(n), "v": [0] * n}, schema=schema))
    bound = 1 + TableOptions.from_map(t.options).bucket_delete_ratio_threshold + 0.05
    model = dict.fromkeys(range(n), 0)
    for k in range(60):
        ids = [(k * 7919 + j * 97) % n for j in range(step)]
        t.upsert(pa.table({"id": ids, "v": [k + 1] * step}, schema=schema))
        model.update(dict.fromkeys(ids, k + 1))
        on_disk = sum(f.row_count for f in t.files())
        assert n <= on_disk <= bound * n, (k, on_disk)
    got = t.scan().to_arrow()
    assert dict(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True)) == model


# -- races -------------------------------------------------------------------------------------------------------
def _five_files(tmp_path: Any, overlapping: bool) -> tuple[lakefmt.Table, Model]:
    t = keyed(str(tmp_path / "t"), bucket="1")
    model: Model = {}
    for i in range(5):
        upsert(t, model, range(i * (3 if overlapping else 10), i * (3 if overlapping else 10) + 10), i, parts=("a",))
    return t, model


@pytest.mark.parametrize("overlapping", [True, False], ids=["bucket-with-vectors", "bucket-without-vectors"])
@pytest.mark.parametrize("change", ["upsert", "delete"])
def test_compaction_loses_to_a_change_of_its_bucket_made_while_it_rewrote(
    tmp_path: Any, overlapping: bool, change: str
) -> None:
    t, model = _five_files(tmp_path, overlapping)
    assert (ents.vector_files(live(t)).num_rows == 1) is overlapping
    plan = lakefmt.plan_compaction(t)
    assert len(plan.groups) == 1
    messages = [lakefmt.rewrite_group(t, g) for g in plan.groups]
    other = lakefmt.open_table(t.uri)
    if change == "upsert":
        upsert(other, model, [0, 5, 12], 100, parts=("a",))
    else:
        delete(other, model, [0, 5, 12], parts=("a",))
    report = lakefmt.commit_compaction(t, plan, messages, replan=False)
    assert report.snapshot is None and len(report.given_up) == 1  # never a lost upsert or a resurrected row
    assert state(t) == model
    report = t.compact()  # planned again on the new snapshot
    assert report.snapshot is not None and state(t) == model
    check(t, files=True)


@pytest.mark.parametrize("overlapping", [True, False], ids=["bucket-with-vectors", "bucket-without-vectors"])
def test_compaction_that_loses_the_publish_race_to_a_delete_plans_again(tmp_path: Any, overlapping: bool) -> None:
    t, model = _five_files(tmp_path, overlapping)
    other = lakefmt.open_table(t.uri)
    fired: list[int] = []

    def hook(phase: str, snap: lakefmt.Snapshot) -> None:
        if phase == "before-publish" and snap.commit_kind is CommitKind.COMPACT and not fired:
            fired.append(snap.id)
            delete(other, model, [2, 11], parts=("a",))  # lands first, on the same snapshot id

    remove = hooks.add_publish_hook(hook)
    try:
        report = t.compact()
    finally:
        remove()
    assert fired and report.replanned == [{"p": "a"}] and report.snapshot is not None
    assert report.snapshot.id == fired[0] + 1
    assert state(t) == model and (("a", 2) not in state(t))
    check(t, files=True)


def test_a_vector_file_expired_before_the_compaction_read_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t, model = _five_files(tmp_path, overlapping=True)
    plan = lakefmt.plan_compaction(t)
    (group,) = plan.groups
    assert group.vector_paths
    delete(t, model, [7], parts=("a",))  # replaces the bucket's vector file
    t.expire_snapshots(retain_max=1)  # ... and the old one is deleted
    assert not t.io.exists(group.vector_paths[0])
    monkeypatch.setattr(masks, "_cache", OrderedDict())  # as in another process: the planner read it here
    with pytest.raises(RewriteConflictError) as info:
        lakefmt.rewrite_group(t, group)
    assert list(info.value.gone) == group.vector_paths
    report = lakefmt.commit_compaction(t, plan, [], gone=info.value.gone)
    assert report.replanned == [{"p": "a"}] and report.snapshot is not None
    assert state(t) == model
    check(t)


def test_compaction_racing_upserts_and_deletes_of_the_same_keys(local_store: Any) -> None:
    uri = local_store.uri()
    t = keyed(uri, **{"num-sorted-run.compaction-trigger": "2", "commit.max-retries": "200"})
    keys, doomed = list(range(12)), list(range(100, 106))
    start: Model = {}
    upsert(t, start, keys + doomed, 0)
    errors: list[str] = []
    stop = threading.Event()

    def run(what: str, work: Any) -> None:
        try:
            work(lakefmt.open_table(uri))
        except BaseException as exc:  # reported below
            errors.append(f"{what}: {exc!r}")

    def writer(tt: lakefmt.Table) -> None:
        for r in range(1, 7):
            upsert(tt, {}, keys, r)

    def deleter(tt: lakefmt.Table) -> None:
        for k in doomed:
            delete(tt, {}, [k])

    def compactor(tt: lakefmt.Table) -> None:
        while not stop.is_set():
            tt.compact()

    threads = [threading.Thread(target=run, args=(n, w)) for n, w in (("writer", writer), ("deleter", deleter))]
    compactors = [threading.Thread(target=run, args=("compactor", compactor)) for _ in range(2)]
    for th in threads + compactors:
        th.start()
    for th in threads:
        th.join(120)
    stop.set()
    for th in compactors:
        th.join(120)
    assert not errors
    assert state(t) == {(p, k): 6 for k in keys for p in ("a", "b")}
    latest = t.latest_snapshot()
    assert latest is not None
    gone: set[tuple[str, int]] = set()
    compactions = 0
    for sid in range(1, latest.id + 1):
        check(t, sid)
        now = set(state(t, sid))
        assert not gone & now, f"deleted rows back in snapshot {sid}: {sorted(gone & now)}"
        gone |= {(p, k) for k in doomed for p in ("a", "b")} - now
        compactions += t.rewrite_target().store.snapshot(sid).commit_kind is CommitKind.COMPACT
    assert compactions > 0


# -- restore, tags, expiration, orphan-clean ---------------------------------------------------------------------
def puffins(t: lakefmt.Table) -> set[str]:
    return {p for p in file_listing(t.io) if p.endswith(".puffin")}


@pytest.mark.parametrize("store", ["local", "memory"], indirect=True)
def test_restore_tags_expire_and_orphan_clean_with_vector_files(store: Any) -> None:
    t = keyed(store)
    model: Model = {}
    upsert(t, model, range(10), 0)
    upsert(t, model, range(5, 15), 1)
    tagged, at_tag = t.latest_snapshot(), dict(model)
    assert tagged is not None
    t.create_tag("before-delete", tagged.id)
    tag_dv = set(ents.paths(ents.vector_files(live(t))))
    delete(t, model, [1, 7])
    deleted, at_delete = t.latest_snapshot(), dict(model)
    assert deleted is not None
    upsert(t, model, [7, 20], 2)
    assert t.compact(min_files=2).snapshot is not None and state(t) == model

    plan = t.plan_restore(deleted.id)
    summary = plan.to_dict()
    assert summary["rows_after"] == len(at_delete) and summary["rows_before"] == len(model)
    added_dv = [f for f in summary["files_added"] if f["path"].endswith(".puffin")]
    assert added_dv and all(f["rows"] == 0 and f["deleted_rows"] > 0 for f in added_dv)
    t.restore(deleted.id)  # to right after the delete: exactly that snapshot's rows, its vectors back
    assert state(t) == at_delete
    assert set(ents.paths(ents.vector_files(live(t)))) == set(ents.paths(ents.vector_files(live(t, deleted.id))))
    t.restore(tag="before-delete")  # to before the delete
    assert state(t) == at_tag
    check(t)

    t.expire_snapshots(retain_max=1)  # the tag keeps its vector files
    assert tag_dv and tag_dv <= puffins(t)
    assert state(t) == at_tag and len(t.scan(tag="before-delete").to_arrow()) == len(at_tag)
    t.remove_orphan_files(older_than=0)  # never a live vector file
    assert state(t) == at_tag and len(t.scan(tag="before-delete").to_arrow()) == len(at_tag)
    assert set(ents.paths(ents.vector_files(live(t)))) <= puffins(t)

    t.delete_tag("before-delete")
    upsert(t, at_tag, [1, 2], 3)  # replaces the vector files of the buckets it touches
    t.expire_snapshots(retain_max=1)
    t.remove_orphan_files(older_than=0)
    assert puffins(t) == set(ents.paths(ents.vector_files(live(t))))  # only the live ones are left
    assert state(t) == at_tag
    check(t)


def test_expire_deletes_a_vector_file_only_expired_snapshots_reference(tmp_path: Any) -> None:
    t = keyed(str(tmp_path / "t"))
    model: Model = {}
    upsert(t, model, range(10), 0)
    upsert(t, model, range(5), 1)  # vector files for the first upsert's files
    first = set(ents.paths(ents.vector_files(live(t))))
    delete(t, model, [8])  # replaces one bucket's vector file, or adds one
    now = set(ents.paths(ents.vector_files(live(t))))
    replaced = first - now
    assert replaced and first <= puffins(t)
    report = t.expire_snapshots(retain_max=2)  # the snapshot of the delete and the one before stay
    assert not set(report.paths) & first  # the snapshot before the delete still references them
    report = t.expire_snapshots(retain_max=1)
    assert replaced <= set(report.paths) and not replaced & puffins(t)
    assert now <= puffins(t) and state(t) == model
