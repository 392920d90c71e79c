"""The change data feed (``Table.changes``, ``lakefmt changes``) held to a model computed here, commit by commit.

A key table's model is a dict key -> row: an upsert of a live key is an update (its old row the pre-image, its new
row the post-image), of a new key an insert; a delete is the live rows it removes. A plain table's model is a list of
rows (a multiset): a copy-on-write delete removes exactly the matching rows, an overwrite is the multiset difference
of the rows before and after (a rewritten file's carried-over rows are no change). Compactions and schema changes
yield no row; each test compares the feed of every snapshot, and of ranges over several, with the model."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.errors import InvalidOptionError, SnapshotNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
KEYED = {"bucket": "2", "compaction.auto": "false"}
Row = tuple[Any, ...]
Change = tuple[str, int, Row]  # change type, snapshot, row


def _table(rows: list[Row], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)


def _feed(t: lakefmt.Table, *args: Any, **kwargs: Any) -> list[Change]:
    """The feed as (type, snapshot, row) triples, the data columns first, in the feed's order."""
    out = t.changes(*args, **kwargs)
    assert out.column_names[-2:] == ["_commit_snapshot", "_commit_timestamp"]
    assert out.schema.field("_commit_timestamp").type == pa.timestamp("ms", tz="UTC")
    kind = out.column_names[-3]
    data = out.column_names[:-3]
    rows = zip(*(out.column(c).to_pylist() for c in data), strict=True) if data else iter(())
    return [(k, s, r) for k, s, r in zip(out[kind].to_pylist(), out["_commit_snapshot"].to_pylist(), rows, strict=True)]


def _bag(changes: list[Change]) -> Counter[Change]:
    return Counter(changes)


class KeyModel:
    """A key table (key: id, dt) and what each of its snapshots changed."""

    def __init__(self, t: lakefmt.Table) -> None:
        self.t = t
        self.live: dict[tuple[int, str], Row] = {}
        self.changes: dict[int, list[Change]] = {}

    def _landed(self, snap: lakefmt.Snapshot | None, changes: list[tuple[str, Row]]) -> int:
        assert snap is not None
        self.changes[snap.id] = [(k, snap.id, r) for k, r in changes]
        return snap.id

    def upsert(self, rows: list[Row]) -> int:
        last = {(r[0], r[1]): r for r in rows}  # the last row of a key wins
        out: list[tuple[str, Row]] = []
        for key, row in last.items():
            if key in self.live:
                out += [("update_preimage", self.live[key]), ("update_postimage", row)]
            else:
                out.append(("insert", row))
            self.live[key] = row
        return self._landed(self.t.upsert(_table(rows)), out)

    def delete_keys(self, keys: list[tuple[int, str]]) -> int:
        gone = [("delete", self.live.pop(k)) for k in keys if k in self.live]
        return self._landed(
            self.t.delete_keys(pa.table({"id": [k[0] for k in keys], "dt": [k[1] for k in keys]})), gone
        )

    def delete(self, where: Any, expr: pc.Expression) -> int:
        gone = [k for k, r in self.live.items() if where(r)]
        return self._landed(self.t.delete(expr), [("delete", self.live.pop(k)) for k in gone])

    def check(self, *ids: int) -> None:
        for sid in ids:  # each snapshot alone: the exact rows, pre-images right before their post-images
            got = _feed(self.t, sid - 1, sid)
            assert _bag(got) == _bag(self.changes[sid]), sid
            for i, (kind, _, row) in enumerate(got):
                if kind == "update_preimage":
                    assert got[i + 1][0] == "update_postimage" and got[i + 1][2][:2] == row[:2]


def _key_table(tmp_path: Path, **options: str) -> KeyModel:
    t = lakefmt.create_table(
        str(tmp_path / "k"), SCHEMA, partition_by=["dt"], primary_key=["id", "dt"], options={**KEYED, **options}
    )
    return KeyModel(t)


def test_key_table_inserts_updates_and_deletes(tmp_path: Path) -> None:
    m = _key_table(tmp_path)
    s1 = m.upsert([(i, "a" if i % 2 else "b", i) for i in range(40)])
    # updates of old keys, new keys, a key written twice in the batch (its first row is no change)
    s2 = m.upsert([(i, "a" if i % 2 else "b", 100 + i) for i in range(0, 40, 3)] + [(50, "a", 1), (50, "a", 2)])
    s3 = m.delete_keys([(1, "a"), (2, "b"), (3, "a"), (999, "a")])
    s4 = m.delete(lambda r: r[2] >= 130 or r[2] < 5, (pc.field("v") >= 130) | (pc.field("v") < 5))
    s5 = m.upsert([(4, "b", 7), (50, "a", 3)])  # a key whose row the previous upsert wrote
    m.check(s1, s2, s3, s4, s5)
    assert [c for c in m.changes[s2] if c[2][0] == 50] == [("insert", s2, (50, "a", 2))]
    # a range over several snapshots is their feeds in commit order
    every = _feed(m.t)
    assert _bag(every) == _bag([c for s in (s1, s2, s3, s4, s5) for c in m.changes[s]])
    assert [s for _, s, _ in every] == sorted(s for _, s, _ in every)
    assert _bag(_feed(m.t, s2, s4)) == _bag(m.changes[s3] + m.changes[s4])
    # row kinds, a projection and a filter on the rows
    kinds = m.t.changes(s1, s2, row_kinds=True, columns=["id"], filter=pc.field("id") < 10)
    assert kinds.column_names == ["id", "_row_kind", "_commit_snapshot", "_commit_timestamp"]
    names = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}
    want = sorted((r[0], names[k]) for k, _, r in m.changes[s2] if r[0] < 10)
    assert sorted(zip(kinds["id"].to_pylist(), kinds["_row_kind"].to_pylist(), strict=True)) == want
    stamp = m.t.snapshot(s2).time_millis
    got_times = kinds["_commit_timestamp"].cast(pa.int64()).to_pylist()
    assert set(got_times) == {stamp}


def test_compactions_and_schema_changes_change_no_row(tmp_path: Path) -> None:
    m = _key_table(tmp_path, **{"compaction.min.file-num": "2"})
    s1 = m.upsert([(i, "a", i) for i in range(30)])
    s2 = m.upsert([(i, "a", 1000 + i) for i in range(0, 30, 2)])
    report = m.t.compact(min_files=2)
    assert report.snapshot is not None
    compacted = report.snapshot.id
    assert m.t.snapshot(compacted).commit_kind is lakefmt.CommitKind.COMPACT
    assert m.t.changes(compacted - 1, compacted).num_rows == 0
    # deletes and updates of rows that now live in the compaction's files
    s3 = m.delete_keys([(1, "a"), (2, "a")])
    m.check(s1, s2, s3)
    with m.t.update_schema() as u:
        u.add_column("note", pa.string())
    evolved = m.t.latest_snapshot()
    assert evolved is not None and m.t.changes(evolved.id - 1, evolved.id).num_rows == 0
    # rows are read as the current schema: the new column is null in rows written before it
    row = pa.Table.from_pylist([{"id": 3, "dt": "a", "v": 5, "note": "x"}], schema=m.t.schema())
    s4 = m.t.upsert(row)
    assert s4 is not None
    got = m.t.changes(s3 - 1, s4.id)
    assert got.column_names[:4] == ["id", "dt", "v", "note"]
    assert sorted(zip(got["_change_type"].to_pylist(), got["v"].to_pylist(), got["note"].to_pylist(), strict=True)) == [
        ("delete", 1, None),
        ("delete", 1002, None),
        ("update_postimage", 5, "x"),
        ("update_preimage", 3, None),
    ]
    # automatic compactions after commits change nothing either
    auto = lakefmt.create_table(
        str(tmp_path / "auto"), SCHEMA, primary_key=["id", "dt"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "2", "compaction.async": "false"},
    )  # fmt: skip
    for i in range(4):
        auto.upsert(_table([(j, "a", i) for j in range(5)]))
    kinds = [s.commit_kind for s in auto.snapshots()]
    assert lakefmt.CommitKind.COMPACT in kinds
    feed = _feed(auto)
    assert Counter(k for k, _, _ in feed) == Counter({"insert": 5, "update_preimage": 15, "update_postimage": 15})
    assert {s for _, s, _ in feed}.isdisjoint(s.id for s in auto.snapshots() if s.commit_kind.name == "COMPACT")


def test_merge_on_read_and_copy_on_write_deletes_of_a_plain_table(tmp_path: Path) -> None:
    for mode in ("merge-on-read", "copy-on-write"):
        options = {"write.delete.mode": mode} if mode == "merge-on-read" else {}
        t = lakefmt.create_table(str(tmp_path / mode), SCHEMA, partition_by=["dt"], options=options)
        rows: list[Row] = [(i % 7, "a" if i < 20 else "b", i % 5) for i in range(40)] + [(1, "a", 1)] * 3
        s1 = t.append(_table(rows))
        # deletes a few rows of files that keep the rest: no carried-over row is reported
        s2 = t.delete((pc.field("id") == 3) & (pc.field("v") < 3))
        assert s1 is not None and s2 is not None
        gone = [r for r in rows if r[0] == 3 and r[2] < 3]
        assert gone and _bag(_feed(t, s1.id, s2.id)) == _bag([("delete", s2.id, r) for r in gone]), mode
        assert _bag(_feed(t, 0, s1.id)) == _bag([("insert", s1.id, r) for r in rows])
        if mode == "copy-on-write":
            assert t.snapshot(s2.id).properties["lakefmt.operation"] == "delete"


def test_overwrites_report_the_multiset_difference(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "p"), SCHEMA, partition_by=["dt"])
    first: list[Row] = [(i, "a" if i % 2 else "b", i % 3) for i in range(30)] + [(5, "a", 2)]
    s1 = t.append(_table(first))
    # the whole table: rows kept, one copy of a duplicate dropped, a row changed, new rows
    second = [r for r in first if r[0] not in (7, 8)] + [(8, "b", 99), (100, "a", 1)]
    second.remove((5, "a", 2))
    s2 = t.overwrite(_table(second))
    assert s1 is not None and s2 is not None
    removed = Counter(first) - Counter(second)
    added = Counter(second) - Counter(first)
    want = [("delete", s2.id, r) for r in removed.elements()] + [("insert", s2.id, r) for r in added.elements()]
    assert _bag(_feed(t, s1.id)) == _bag(want)
    assert _bag(want) == _bag([("delete", s2.id, (5, "a", 2)), ("delete", s2.id, (7, "a", 1)),
                               ("delete", s2.id, (8, "b", 2)), ("insert", s2.id, (8, "b", 99)),
                               ("insert", s2.id, (100, "a", 1))])  # fmt: skip
    # one partition: rows of the other partition are not touched
    third = [(i, "b", 0) for i in range(0, 10, 2)]
    s3 = t.overwrite(_table(third), partition={"dt": "b"})
    assert s3 is not None
    before_b = Counter(r for r in second if r[1] == "b")
    want3 = [("delete", s3.id, r) for r in (before_b - Counter(third)).elements()]
    want3 += [("insert", s3.id, r) for r in (Counter(third) - before_b).elements()]
    assert _bag(_feed(t, s2.id, s3.id)) == _bag(want3)


def test_key_table_overwrite_pairs_updates(tmp_path: Path) -> None:
    m = _key_table(tmp_path)
    s1 = m.upsert([(i, "a", i) for i in range(10)] + [(i, "b", i) for i in range(5)])
    m.upsert([(2, "a", 50)])
    m.delete_keys([(3, "a")])
    s4 = m.t.overwrite(_table([(2, "a", 50), (4, "a", 40), (11, "a", 0)]), partition={"dt": "a"})
    assert s4 is not None
    got = _bag(_feed(m.t, s4.id - 1, s4.id))
    gone = [r for k, r in m.live.items() if k[1] == "a" and k[0] not in (2, 4)]
    want = [("delete", s4.id, r) for r in gone]
    want += [("update_preimage", s4.id, (4, "a", 4)), ("update_postimage", s4.id, (4, "a", 40))]
    want += [("insert", s4.id, (11, "a", 0))]
    assert got == _bag(want)
    m.check(s1)
    # a restore: rows its vectors no longer delete come back as inserts, changed keys as updates
    before = {(r[0], r[1]): r for r in m.t.to_arrow().to_pylist() for r in [tuple(r.values())]}
    target = {(r[0], r[1]): r for r in m.t.to_arrow(snapshot_id=s1).to_pylist() for r in [tuple(r.values())]}
    back = m.t.restore(s1)
    assert back is not None
    want = [("delete", back.id, r) for k, r in before.items() if k not in target]
    want += [("insert", back.id, r) for k, r in target.items() if k not in before]
    for k in before.keys() & target.keys():
        if before[k] != target[k]:
            want += [("update_preimage", back.id, before[k]), ("update_postimage", back.id, target[k])]
    assert _bag(_feed(m.t, s4.id)) == _bag(want) and len(want) > 5


def test_ranges_by_time_and_tag_and_errors(tmp_path: Path) -> None:
    clock = [1_800_000_000.0]
    m = _key_table(tmp_path)
    m.t = lakefmt.Table(m.t.io, m.t.rewrite_target().store, clock=lambda: clock[0])
    ids = []
    for i in range(4):
        clock[0] += 60
        ids.append(m.upsert([(i, "a", i), (0, "a", 10 + i)]))
    m.t.create_tag("second", ids[1])
    at = datetime.datetime.fromtimestamp(m.t.snapshot(ids[1]).time_millis / 1000, datetime.UTC)
    by_time = _feed(m.t, from_timestamp=at, to_timestamp=at + datetime.timedelta(seconds=61))
    assert _bag(by_time) == _bag(m.changes[ids[2]])
    assert _bag(_feed(m.t, from_tag="second")) == _bag(m.changes[ids[2]] + m.changes[ids[3]])
    assert _bag(_feed(m.t, to_tag="second")) == _bag(m.changes[ids[0]] + m.changes[ids[1]])
    assert _bag(_feed(m.t, from_timestamp="2000-01-01T00:00:00Z", to_snapshot=ids[0])) == _bag(m.changes[ids[0]])
    with pytest.raises(InvalidOptionError):
        m.t.changes(1, from_tag="second")
    with pytest.raises(InvalidOptionError):
        m.t.changes(3, 2)
    assert m.t.changes(ids[-1]).num_rows == 0
    assert m.t.changes(ids[-1], columns=["v"]).column_names == ["v", "_change_type", *["_commit_snapshot"],
                                                                 "_commit_timestamp"]  # fmt: skip
    # an expired snapshot in the range is named; a range after it still reads
    m.t.expire_snapshots(retain_max=2)
    with pytest.raises(SnapshotNotFoundError, match=r"need snapshot 1\b.*expired"):
        m.t.changes(0)
    assert _bag(_feed(m.t, ids[2])) == _bag(m.changes[ids[3]])


def _cli(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0, capsys.readouterr().err
    return str(capsys.readouterr().out)


def test_cli_changes(tmp_path: Path, capsys: Any) -> None:
    m = _key_table(tmp_path)
    s1 = m.upsert([(1, "a", 10), (2, "b", 20)])
    s2 = m.upsert([(1, "a", 11)])
    s3 = m.delete_keys([(2, "b")])
    lines = _cli(capsys, "changes", m.t.uri, "--from", "0").splitlines()
    assert lines[0].split() == ["snapshot", "committed", "change", "id", "dt", "v"]
    body = [line.split() for line in lines[1:]]
    assert [(b[0], b[4], b[5], b[6], b[7]) for b in body] == [
        (str(s1), "insert", "1", "a", "10"),
        (str(s1), "insert", "2", "b", "20"),
        (str(s2), "update_preimage", "1", "a", "10"),
        (str(s2), "update_postimage", "1", "a", "11"),
        (str(s3), "delete", "2", "b", "20"),
    ]
    rows = json.loads(_cli(capsys, "changes", m.t.uri, "--from", str(s1), "--to", str(s2), "--json", "--row-kinds"))
    assert [(r["id"], r["v"], r["_row_kind"], r["_commit_snapshot"]) for r in rows] == [
        (1, 10, "-U", s2),
        (1, 11, "+U", s2),
    ]
    assert rows[0]["_commit_timestamp_millis"] == m.t.snapshot(s2).time_millis
    assert rows[0]["_commit_timestamp"].endswith("+00:00")
    limited = json.loads(_cli(capsys, "changes", m.t.uri, "--from", "0", "--json", "--limit", "3"))
    assert [r["_change_type"] for r in limited] == ["insert", "insert", "update_preimage"]
    assert _cli(capsys, "changes", m.t.uri, "--from", str(s3)).strip() == "(none)"
    assert json.loads(_cli(capsys, "changes", m.t.uri, "--from", str(s3), "--json")) == []
    m.t.expire_snapshots(retain_max=1)
    assert main(["changes", m.t.uri, "--from", "0"]) == 1
    assert "need snapshot 1" in capsys.readouterr().err


def test_changelog_producer_option(tmp_path: Path) -> None:
    """``changelog-producer``: none (the default) and lookup give the same feed (the vectors a commit writes are
    the lookup's result); full-compaction is refused, and a bad value names itself; no table is made."""
    feeds = []
    for producer in ("none", "lookup"):
        t = lakefmt.create_table(
            str(tmp_path / producer), SCHEMA, primary_key=["id", "dt"],
            options={**KEYED, "changelog-producer": producer},
        )  # fmt: skip
        assert t.table_schema().table_options.changelog_producer == producer
        t.upsert(_table([(1, "a", 10), (2, "a", 20)]))
        t.upsert(_table([(1, "a", 11), (3, "b", 30)]))
        t.delete_keys(_table([(2, "a", None)]))
        feeds.append(_bag(_feed(t, 0)))
    assert feeds[0] == feeds[1]
    assert feeds[1][("update_preimage", 2, (1, "a", 10))] == 1 and feeds[1][("delete", 3, (2, "a", 20))] == 1
    for value, message in (
        ("full-compaction", "full-compaction is not supported yet"),
        ("Lookups", "none, input or lookup, got 'Lookups'"),
    ):
        with pytest.raises(InvalidOptionError, match=message):
            lakefmt.create_table(
                str(tmp_path / "bad"), SCHEMA, primary_key=["id"], options={"changelog-producer": value}
            )
        assert not (tmp_path / "bad").exists()
