"""Bad input that tests/integration/test_bad_input.py does not try: a live data file gone missing, a corrupt
schema file, schema files, manifest lists and manifests written by a newer format version, and expire and
orphan-clean over manifests that name files outside the table. Each fails loudly with the file named, commits
nothing, deletes nothing, and loses nothing: once the file is back the table reads exactly as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.errors import CorruptMetadataError, PathOutsideTableError, UnsupportedFormatVersionError
from lakefmt.meta.store import MetaStore
from lakefmt.spec import codec, layout
from lakefmt.spec.manifest import MANIFEST_KIND, decode_manifest, encode_manifest
from lakefmt.spec.manifest_list import MANIFEST_LIST_KIND

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _table(store: Any) -> lakefmt.Table:
    t = lakefmt.create_table(store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options)
    t.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=SCHEMA))
    t.append(pa.table({"id": [3], "dt": ["a"]}, schema=SCHEMA))
    return t


def _ids(t: lakefmt.Table, **kwargs: Any) -> list[int]:
    return sorted(t.to_arrow(**kwargs).column("id").to_pylist())


def test_a_missing_data_file_is_named_and_nothing_else_is_lost(store: Any) -> None:
    t = _table(store)
    missing = [f for f in t.files() if f.partition == {"dt": "a"}][-1]  # the second snapshot's file
    data = t.io.read(missing.path)
    t.io.delete(missing.path)
    fresh = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    with pytest.raises(FileNotFoundError, match=missing.path.rsplit("/", 1)[-1]):
        fresh.to_arrow()
    assert _ids(fresh, snapshot_id=1) == [1, 2]  # snapshots without it still read
    assert _ids(fresh, filter=pc.field("dt") == "b") == [2]  # and so do reads that prune it away
    snap = fresh.append(pa.table({"id": [4], "dt": ["c"]}, schema=SCHEMA))  # commits do not read data files
    assert snap is not None and snap.id == 3
    t.io.write(missing.path, data)
    assert _ids(lakefmt.open_table(t.uri, storage_options=store.storage_options)) == [1, 2, 3, 4]


@pytest.mark.parametrize("mangle", [b"", b"{", b"\x00\xff garbage"], ids=["empty", "truncated", "garbage"])
def test_a_corrupt_schema_file_is_named_and_nothing_is_committed(local_store: Any, mangle: bytes) -> None:
    t = _table(local_store)
    original = t.io.read(layout.schema_path(0))
    t.io.delete(layout.schema_path(0))
    t.io.write(layout.schema_path(0), mangle)
    for action in (
        lambda: lakefmt.open_table(t.uri),
        lambda: lakefmt.Table(t.io, MetaStore(t.io)).append(pa.table({"id": [9], "dt": ["a"]}, schema=SCHEMA)),
    ):
        with pytest.raises(CorruptMetadataError, match="schema/schema-0"):
            action()
    assert [s.id for s in t.snapshots()] == [1, 2]
    t.io.delete(layout.schema_path(0))
    t.io.write(layout.schema_path(0), original)
    assert _ids(lakefmt.open_table(t.uri)) == [1, 2, 3]


NEWER = lakefmt.FORMAT_VERSION + 1


def _newer_arrow(kind: str) -> Callable[[bytes, pytest.MonkeyPatch], bytes]:
    """The same manifest (list), as a library of format version NEWER would have encoded it."""

    def rewrite(data: bytes, monkeypatch: pytest.MonkeyPatch) -> bytes:
        table = codec.read_arrow_file(data, kind, kind)
        with monkeypatch.context() as m:
            m.setattr(codec, "FORMAT_VERSION", NEWER)
            return codec.write_arrow_file(table, kind)

    return rewrite


def _newer_schema(data: bytes, monkeypatch: pytest.MonkeyPatch) -> bytes:
    obj = orjson.loads(data)
    obj["version"] = NEWER
    return orjson.dumps(obj)


@pytest.mark.parametrize("which", ["schema", "base-list", "delta-list", "manifest"])
def test_metadata_of_a_newer_format_version_is_refused_and_nothing_is_committed(
    local_store: Any, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(local_store)
    snap = t.latest_snapshot()
    assert snap is not None
    if which == "schema":
        rel, rewrite = layout.schema_path(0), _newer_schema
    elif which == "manifest":
        manifests = MetaStore(t.io).snapshot_manifests(snap)
        rel, rewrite = layout.manifest_path(manifests[-1].file_name), _newer_arrow(MANIFEST_KIND)
    else:
        name = snap.base_manifest_list if which == "base-list" else snap.delta_manifest_list
        rel, rewrite = layout.manifest_path(name), _newer_arrow(MANIFEST_LIST_KIND)
    original = t.io.read(rel)
    newer = rewrite(original, monkeypatch)
    t.io.delete(rel)
    t.io.write(rel, newer)
    files_before = {f.path for f in t.io.walk()}

    actions: list[Callable[[], Any]] = [lambda: lakefmt.open_table(t.uri).to_arrow()]
    if which != "schema":  # (a table whose schema file is newer does not even open)
        actions.append(lambda: lakefmt.open_table(t.uri).scan().files())
        # a commit reads the latest manifest lists, and an overwrite the manifests of the partition it replaces
        actions.append(lambda: lakefmt.open_table(t.uri).overwrite(pa.table({"id": [9], "dt": ["a"]}, schema=SCHEMA)))
    if which != "manifest":
        actions.append(lambda: lakefmt.open_table(t.uri).append(pa.table({"id": [9], "dt": ["a"]}, schema=SCHEMA)))
    for action in actions:
        with pytest.raises(UnsupportedFormatVersionError, match=rf"{rel}.*version {NEWER}.*upgrade lakefmt"):
            action()
    assert not t.io.exists(layout.snapshot_path(3)), "committed on top of metadata of a newer format version"
    # nothing outside manifest/ was added or removed (a refused commit leaves at most manifest lists behind)
    files_after = {f.path for f in t.io.walk()}
    assert {f for f in files_after ^ files_before if not f.startswith(f"{layout.MANIFEST_DIR}/")} == set()

    t.io.delete(rel)
    t.io.write(rel, original)
    fresh = lakefmt.open_table(t.uri)
    assert [s.id for s in fresh.snapshots()] == [1, 2]
    assert _ids(fresh) == [1, 2, 3]
    assert _ids(fresh, snapshot_id=1) == [1, 2]


@pytest.mark.parametrize("bad", ["../victim.parquet", "dt=a/../../victim.parquet", "ABSOLUTE"], ids=repr)
@pytest.mark.parametrize("maintenance", ["expire", "orphan-clean"])
def test_maintenance_over_a_path_outside_the_root_deletes_nothing(tmp_path: Any, bad: str, maintenance: str) -> None:
    """A manifest (corrupt or hostile) names a file outside the table where expire would delete it (the
    partition was overwritten, so the file is only the expired snapshot's) and orphan-clean would judge
    references by it: both refuse before deleting anything, inside or outside the root."""
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"someone else's data")
    bad = str(victim) if bad == "ABSOLUTE" else bad
    uri = str(tmp_path / "t")
    t = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    t.overwrite(pa.table({"id": [2], "dt": ["a"]}, schema=SCHEMA), partition={"dt": "a"})
    t.append(pa.table({"id": [3], "dt": ["b"]}, schema=SCHEMA))
    store = MetaStore(t.io)
    poisoned = {m.file_name for sid in (1, 2) for m in store.snapshot_manifests(store.snapshot(sid))}
    originals = {}
    for name in poisoned:
        rel = layout.manifest_path(name)
        originals[rel] = t.io.read(rel)
        entries = decode_manifest(originals[rel])
        paths = pa.array([bad] * entries.num_rows, pa.string())
        t.io.delete(rel)
        t.io.write(rel, encode_manifest(entries.set_column(entries.schema.get_field_index("path"), "path", paths)))
    before = {f.path for f in t.io.walk()}

    fresh = lakefmt.open_table(uri)
    with pytest.raises(PathOutsideTableError, match="outside the table"):
        if maintenance == "expire":
            fresh.expire_snapshots(retain_max=1)
        else:
            fresh.remove_orphan_files(older_than=0)
    assert victim.read_bytes() == b"someone else's data"
    assert {f.path for f in t.io.walk()} == before, "maintenance deleted files although it refused"

    for rel, data in originals.items():
        t.io.delete(rel)
        t.io.write(rel, data)
    fresh = lakefmt.open_table(uri)
    assert [s.id for s in fresh.snapshots()] == [1, 2, 3]
    assert _ids(fresh) == [2, 3]
    assert _ids(fresh, snapshot_id=1) == [1]
