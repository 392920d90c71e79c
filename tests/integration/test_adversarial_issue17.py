"""Attacks on tags, restore, engines and the CLI (issue 17): each test is a way a user or a race could lose
data or get a wrong answer, and shows that it no longer does."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing, sorted_ids

import lakefmt
from lakefmt.cli import main
from lakefmt.maintenance import orphans, plan_expiration
from lakefmt.maintenance.expire import apply_expiration
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def rows(*ids: int, dt: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "dt": [dt] * len(ids)}, schema=SCHEMA)


def history(t: lakefmt.Table) -> None:
    """Snapshots 1..4: 1 appends 1 (a) and 2 (b); 2 overwrites a with 3; 3 overwrites the table with 4;
    4 appends 5."""
    t.append(pa.concat_tables([rows(1), rows(2, dt="b")]))
    t.overwrite(rows(3), partition={"dt": "a"})
    t.overwrite(rows(4))
    t.append(rows(5))


def test_a_tag_name_given_to_an_older_snapshot_while_an_expiration_runs_keeps_its_files(local_store: Any) -> None:
    """The expiration's plan saw tag 'x' on a retained snapshot; before it deletes anything, 'x' is deleted and
    created again for a snapshot the plan expires. The name is the same, the tag is not: its files are spared."""
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    history(t)
    t.create_tag("x", 4)
    store = MetaStore(t.io)
    plan = plan_expiration(store, retain_max=1)
    assert plan.expired == (1, 2, 3)
    t.delete_tag("x")
    t.create_tag("x", 1)  # snapshot 1 is still there and no expiration is announced yet: allowed
    apply_expiration(t.io, store, plan)
    assert sorted_ids(t, tag="x") == [1, 2]
    t.remove_orphan_files(older_than=0)
    assert sorted_ids(t, tag="x") == [1, 2]


@pytest.mark.parametrize("retain", [10**16, 10**30])
def test_a_retain_too_long_to_read_back_is_refused(local_store: Any, retain: int) -> None:
    """A retain of 10**16 s is 10**19 ms, beyond a signed 64-bit integer: the tag file was written, then refused
    by its own reader, and every tags(), expire and orphan-clean failed until it was deleted."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    with pytest.raises(ValueError, match="retain must be a positive duration"):
        t.create_tag("forever", retain=retain)
    assert t.tags() == []
    assert t.io.list(layout.TAG_DIR) == []
    t.create_tag("long", retain=datetime.timedelta.max)  # 999999999 days fits
    assert [g.name for g in t.tags()] == ["long"]
    t.expire_snapshots(retain_min=1)


@pytest.mark.parametrize("manifest_list", ["manifest-list-00000000000000000000000000000000-1", "../../outside"])
def test_an_unreadable_tag_snapshot_stops_maintenance_and_is_named(local_store: Any, manifest_list: str) -> None:
    """A hand-made or damaged tag file naming a manifest list that is missing or outside the root: expire and
    orphan-clean delete nothing, and their error names the tag to delete (it only named the manifest list)."""
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    history(t)
    good = json.loads(t.io.read(layout.tag_path(t.create_tag("good", 1).name)))
    bad = dict(good, tagName="bad", snapshot=dict(good["snapshot"], nonce="0" * 32, baseManifestList=manifest_list))
    t.io.write(layout.tag_path("bad"), json.dumps(bad).encode())
    before = file_listing(t.io)
    for run in (lambda: t.expire_snapshots(retain_max=1), lambda: t.remove_orphan_files(older_than=0)):
        with pytest.raises(lakefmt.LakefmtError, match=r"tag 'bad' .*delete tag 'bad'"):
            run()
    assert file_listing(t.io) == before
    t.delete_tag("bad")
    t.expire_snapshots(retain_max=1)
    assert sorted_ids(t, tag="good") == [1, 2]


def test_a_tag_created_and_its_snapshot_expired_while_an_orphan_clean_runs(
    local_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphan-clean read the tags (none yet); then a tag of snapshot 1 was created and an expiration removed
    snapshots 1..3 (sparing the tag's files); then orphan-clean read the snapshots: the tag's files were in
    neither reading and were deleted as orphans. It reads the tags again after the snapshots."""
    t = create_table_in(local_store, SCHEMA, partition_by=["dt"])
    history(t)
    real = orphans.list_tags
    calls: list[int] = []

    def list_tags_then_race(io: Any) -> Any:
        listing = real(io)
        calls.append(1)
        if len(calls) == 1:
            t.create_tag("late", 1)
            t.expire_snapshots(retain_max=1)
        return listing

    monkeypatch.setattr(orphans, "list_tags", list_tags_then_race)
    t.remove_orphan_files(older_than=0)
    monkeypatch.undo()
    assert sorted_ids(t, tag="late") == [1, 2]


@pytest.mark.parametrize("retain", ["0", "0s"])
def test_cli_a_zero_retain_is_a_bad_argument(local_store: Any, capsys: pytest.CaptureFixture[str], retain: str) -> None:
    """``lakefmt tag create --retain 0`` was exit 1 with 'ValueError: ...'; it is a bad argument (exit 2, one
    line naming the option), and no tag is created."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    with pytest.raises(SystemExit) as exc:
        main(["tag", "create", t.uri, "m", "--retain", retain])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    why = "positive" if retain == "0s" else "has no unit"  # a bare number is refused whatever it is (issue 22)
    assert err.count("\n") == 1 and "argument --retain" in err and why in err and "ValueError" not in err
    assert t.tags() == []


def test_cli_tag_delete_removes_an_unreadable_tag(local_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable tag file stops maintenance, and the error says to delete it with ``lakefmt tag delete URI
    NAME``; that command listed every tag first (to show the deleted one's snapshot) and so failed with the same
    error, leaving no way out from the shell. Deleting another, readable tag failed the same way."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.create_tag("good")
    t.create_tag("other")
    t.io.write(layout.tag_path("broken"), b'{"version":1,"tagName":"broken"')
    assert main(["tag", "delete", t.uri, "other"]) == 0
    assert capsys.readouterr().out.startswith("deleted tag 'other' (snapshot 1)")
    assert main(["tag", "delete", t.uri, "broken"]) == 0
    assert capsys.readouterr().out.startswith("deleted tag 'broken';")
    assert [g.name for g in t.tags()] == ["good"]
    t.expire_snapshots(retain_max=1)


@pytest.mark.parametrize("retain", [0, 0.0001, -1, float("nan"), float("inf"), True, [], "-1d", 10**30])
def test_a_bad_retain_is_an_invalid_option(local_store: Any, retain: Any) -> None:
    """``create_tag(retain=...)`` raised ValueError, TypeError or OverflowError (NaN: "cannot convert float NaN
    to integer"); each is now :class:`InvalidOptionError` (a LakefmtError and a ValueError) naming retain, and no
    tag file is written."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    with pytest.raises(lakefmt.InvalidOptionError, match="retain"):
        t.create_tag("x", retain=retain)
    assert t.io.list(layout.TAG_DIR) == [] and t.tags() == []


def test_ambiguous_versions_are_invalid_options(local_store: Any) -> None:
    """``restore()`` with no version or with two, and ``scan(tag=..., snapshot_id=...)``, raised a plain
    ValueError; they are :class:`InvalidOptionError` (a LakefmtError and a ValueError), as the same mistake in
    Spark's read options is, and nothing is committed."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.create_tag("x")
    for call in (
        lambda: t.restore(),
        lambda: t.restore(1, tag="x"),
        lambda: t.restore(1, as_of=0),
        lambda: t.plan_restore(tag="x", as_of=0),
        lambda: t.scan(tag="x", snapshot_id=1),
        lambda: t.scan(tag="x", as_of=0),
        lambda: t.scan(snapshot_id=1, as_of=0),
        lambda: t.scan(from_snapshot=0, snapshot_id=1),
    ):
        with pytest.raises(lakefmt.InvalidOptionError):
            call()
    assert [s.id for s in t.snapshots()] == [1]


def test_cli_restore_commits_the_plan_it_shows(
    local_store: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lakefmt restore`` showed a plan, then had ``Table.restore`` plan again: an append landing in between was
    removed by the restore without being listed among the files it removed. The command commits the plan it
    shows: the append makes it a conflict (exit 1), and the appended row stays."""
    t = create_table_in(local_store, SCHEMA)
    t.append(rows(1))
    t.append(rows(2))
    real = lakefmt.Table.plan_restore

    def plan_then_append(self: lakefmt.Table, *args: Any, **kwargs: Any) -> Any:
        plan = real(self, *args, **kwargs)
        lakefmt.open_table(t.uri).append(rows(3))
        return plan

    monkeypatch.setattr(lakefmt.Table, "plan_restore", plan_then_append)
    assert main(["restore", t.uri, "--snapshot", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not land" in err, err
    assert [s.id for s in t.snapshots()] == [1, 2, 3] and sorted_ids(t) == [1, 2, 3]
