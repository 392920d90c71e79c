"""Expiration after each commit, driven by table options (Paimon's snapshot.num-retained.* and
snapshot.time-retained)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.maintenance import referenced_files

SCHEMA = pa.schema([("id", pa.int64())])


def test_commits_expire_beyond_num_retained_max(store) -> None:
    t = lakefmt.create_table(
        store.uri(),
        SCHEMA,
        options={"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3", "compaction.auto": "false"},
        storage_options=store.storage_options,
    )
    committer = t.new_committer(commit_user="stream")
    for i in range(6):
        w = t.new_writer()
        w.write(pa.table({"id": [i]}))
        committer.commit([w.prepare_commit()], identifier=i)
    assert [s.id for s in t.snapshots()] == [4, 5, 6]
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == list(range(6))
    # dedup survives expiration: identifier 1 was committed in an expired snapshot
    w = t.new_writer()
    w.write(pa.table({"id": [100]}))
    assert committer.commit([w.prepare_commit()], identifier=1) is None
    # expiration left nothing behind but what the retained snapshots reference (plus the skipped attempt)
    refs = referenced_files(t._store)
    leftovers = [f.path for f in t.io.walk() if f.path not in refs]
    assert all(p.endswith(".parquet") or p.startswith("manifest/manifest-") for p in leftovers)
    assert len(leftovers) == 2  # the replayed attempt's data file and per-task manifest


def test_no_option_keeps_the_last_hour(local_store) -> None:
    """Without options, the defaults apply (snapshot.time-retained 1h): snapshots younger than that all stay."""
    t = lakefmt.create_table(local_store.uri(), SCHEMA, options={"compaction.auto": "false"})
    for i in range(12):
        t.append(pa.table({"id": [i]}))
    assert [s.id for s in t.snapshots()] == list(range(1, 13))


def test_time_retained_keeps_recent_snapshots(local_store) -> None:
    t = lakefmt.create_table(local_store.uri(), SCHEMA, options={"snapshot.time-retained": "1h"})
    for i in range(4):
        t.append(pa.table({"id": [i]}))
    assert len(t.snapshots()) == 4  # all younger than an hour


def test_bad_retention_option_is_refused(local_store) -> None:
    with pytest.raises(lakefmt.LakefmtError, match=r"snapshot\.time-retained"):
        lakefmt.create_table(local_store.uri(), SCHEMA, options={"snapshot.time-retained": "soon"})


def test_create_over_a_crashed_create_leftover(local_store) -> None:
    """A process killed inside create_table leaves schema/.schema-0.tmp-*: a retry must still create."""
    import os

    uri = local_store.uri()
    os.makedirs(os.path.join(uri, "schema"))
    with open(os.path.join(uri, "schema", ".schema-0.tmp-0123abcd"), "wb") as f:
        f.write(b'{"trunc')
    t = lakefmt.create_table(uri, SCHEMA)
    t.append(pa.table({"id": [1]}))
    assert t.scan().count() == 1
