"""Tags: named snapshots that read after their snapshot expired and keep every file they read across expire and
orphan-clean, without holding other snapshots back; exclusive creation; retain times; bad names."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing, sorted_ids

import lakefmt
from lakefmt.maintenance import plan_expiration, referenced_files
from lakefmt.maintenance.expire import apply_expiration
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def rows(*ids: int, dt: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "dt": [dt] * len(ids)}, schema=SCHEMA)


def history(t: lakefmt.Table) -> None:
    """Snapshots 1..5: 1 appends 1, 2 (a) and 3 (b); 2 overwrites a with 4; 3 appends 5 (c); 4 overwrites the
    table with 6; 5 appends 7."""
    t.append(pa.concat_tables([rows(1, 2), rows(3, dt="b")]))
    t.overwrite(rows(4), partition={"dt": "a"})
    t.append(rows(5, dt="c"))
    t.overwrite(rows(6))
    t.append(rows(7))


def check_clean(t: lakefmt.Table) -> None:
    """The store holds exactly the referenced files (orphan-clean with age 0 left nothing else)."""
    files = set(file_listing(t.io))
    refs = referenced_files(MetaStore(t.io))
    assert files - refs == set()
    assert refs - files <= {layout.LATEST, layout.EARLIEST}


def test_tagged_snapshots_keep_every_file_and_read_after_their_snapshot_expired(store: Any) -> None:
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    history(t)
    first = t.create_tag("first", 1)
    t.create_tag("third", 3, retain="30d")
    assert [(g.name, g.snapshot_id, g.retain_millis) for g in t.tags()] == [
        ("first", 1, None),
        ("third", 3, 30 * 86_400_000),
    ]
    assert first.snapshot == t.snapshot(1)  # a copy of the snapshot itself
    report = t.expire_snapshots(retain_max=1)
    assert report.expired_snapshots == [1, 2, 3, 4], "a tag holds no snapshot back"
    assert sorted_ids(t, tag="first") == [1, 2, 3]
    assert sorted_ids(t, tag="third") == [3, 4, 5]
    assert sorted_ids(t) == [6, 7]
    with pytest.raises(lakefmt.SnapshotNotFoundError):
        t.scan(snapshot_id=1)
    # what neither tag nor a retained snapshot reads is gone: snapshot 2's and 4's own files
    t.remove_orphan_files(older_than=0)
    check_clean(t)
    t = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    assert sorted_ids(t, tag="first") == [1, 2, 3] and sorted_ids(t, tag="third") == [3, 4, 5]
    assert {f.path for f in t.scan(tag="first").files()} <= set(file_listing(t.io))
    # deleting a tag leaves its exclusive files to orphan-clean (expiration has passed them)
    only_first = {f.path for f in t.scan(tag="first").files()} - {f.path for f in t.scan(tag="third").files()}
    assert len(only_first) == 1  # dt=a/{1, 2}: snapshot 3 still reads dt=b/{3}
    before = set(file_listing(t.io))
    t.delete_tag("first")
    assert set(file_listing(t.io)) == before - {layout.tag_path("first")}
    assert t.expire_snapshots(retain_max=1).total_files == 0
    removed = t.remove_orphan_files(older_than=0)
    assert {p for p in removed.paths if p.endswith(".parquet")} == only_first
    check_clean(t)
    assert sorted_ids(t, tag="third") == [3, 4, 5]
    with pytest.raises(lakefmt.TagNotFoundError, match="third"):
        t.scan(tag="first")
    assert first.snapshot_id == 1


def test_a_tag_past_its_retain_time_is_released(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    history(t)
    hour_ago = lakefmt.Table(t.io, MetaStore(t.io), clock=lambda: time.time() - 3600)
    hour_ago.create_tag("old", 1, retain="30m")  # created an hour ago, kept for 30 minutes: past
    t.create_tag("kept", 2)
    assert [g.expired(int(time.time() * 1000)) for g in t.tags()] == [False, True]
    with pytest.raises(lakefmt.TagNotFoundError, match="expired"):
        t.scan(tag="old")
    dry = t.expire_snapshots(retain_max=1, dry_run=True)
    assert dry.expired_tags == ["old"] and layout.tag_path("old") in dry.paths
    report = t.expire_snapshots(retain_max=1)
    assert report.expired_tags == ["old"] and report.to_dict()["expired_tags"] == ["old"]
    assert [g.name for g in t.tags()] == ["kept"]
    t.remove_orphan_files(older_than=0)
    check_clean(t)
    assert sorted_ids(t, tag="kept") == [3, 4]
    assert {p.rsplit("/", 1)[0] for p in file_listing(t.io) if p.endswith(".parquet")} == {"dt=a", "dt=b"}


def test_two_racing_creates_of_one_name_give_one_winner(store: Any) -> None:
    t = create_table_in(store, SCHEMA)
    for i in range(4):
        t.append(rows(i))
    results: list[Any] = [None] * 8
    start = threading.Barrier(8)

    def create(i: int) -> None:
        table = lakefmt.open_table(t.uri, storage_options=store.storage_options)
        start.wait()
        try:
            results[i] = table.create_tag("release", 1 + i % 4)
        except lakefmt.LakefmtError as exc:
            results[i] = exc

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    winners = [r for r in results if isinstance(r, lakefmt.Tag)]
    losers = [r for r in results if isinstance(r, lakefmt.TagAlreadyExistsError)]
    assert len(winners) == 1 and len(losers) == 7, results
    assert "already has a tag 'release'" in str(losers[0])
    assert t.tags() == winners
    assert sorted_ids(t, tag="release") == list(range(winners[0].snapshot_id))


def test_refused_tags(local_store: Any) -> None:
    t = create_table_in(local_store, SCHEMA)
    with pytest.raises(lakefmt.SnapshotNotFoundError, match="no snapshot to tag"):
        t.create_tag("x")
    t.append(rows(1))
    t.append(rows(2))
    for bad in ["", "../x", "a/b", ".hidden", "-opt", "a b", "x" * 201, 7]:
        with pytest.raises(lakefmt.InvalidTagNameError):
            t.create_tag(bad)  # type: ignore[arg-type]
    t.create_tag("x")
    with pytest.raises(lakefmt.TagAlreadyExistsError):
        t.create_tag("x", 1)
    with pytest.raises(lakefmt.SnapshotNotFoundError):
        t.create_tag("y", 9)
    with pytest.raises(ValueError, match="positive"):
        t.create_tag("y", retain=0)
    with pytest.raises(lakefmt.TagNotFoundError, match="its tags: 'x'"):
        t.delete_tag("nope")
    with pytest.raises(ValueError, match="tag alone"):
        t.scan(tag="x", snapshot_id=1)
    t.expire_snapshots(retain_max=1)
    with pytest.raises(lakefmt.SnapshotNotFoundError, match="expired"):
        t.create_tag("late", 1)
    assert [g.name for g in t.tags()] == ["x"] and sorted_ids(t, tag="x") == [1, 2]
    # an unreadable tag stops maintenance (it cannot know what the tag keeps) until it is deleted
    t.io.write(layout.tag_path("broken"), b'{"version":1,"tagName":"broken"')
    before = file_listing(t.io)
    with pytest.raises(lakefmt.CorruptMetadataError, match="tag 'broken'"):
        t.remove_orphan_files(older_than=0)
    with pytest.raises(lakefmt.CorruptMetadataError):
        t.expire_snapshots(retain_max=1)
    assert file_listing(t.io) == before
    t.delete_tag("broken")
    t.remove_orphan_files(older_than=0)


def test_a_tag_created_while_an_expiration_runs_keeps_its_files(local_store: Any) -> None:
    """The expiration was planned before the tag existed; it lists the tags again after its announcement and
    spares what the new tag reads. A tag created after the announcement is refused instead."""
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    history(t)
    store = MetaStore(t.io)
    plan = plan_expiration(store, retain_max=2)
    assert plan.expired == (1, 2, 3)
    t.create_tag("month-end", 3)
    apply_expiration(t.io, store, plan)
    assert sorted_ids(t, tag="month-end") == [3, 4, 5]
    t.remove_orphan_files(older_than=0)
    assert sorted_ids(t, tag="month-end") == [3, 4, 5]
    # after the announcement (EARLIEST = 4 here) a tag of snapshot 4 is fine, one of an announced one is not
    t.io.write(layout.EARLIEST, b"5")
    with pytest.raises(lakefmt.SnapshotNotFoundError, match="expired while tag"):
        t.create_tag("late", 4)
    assert [g.name for g in t.tags()] == ["month-end"]
