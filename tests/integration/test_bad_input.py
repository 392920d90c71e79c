"""Bad input is refused with the error type that names the problem, and leaves the table exactly as it was:
same snapshots, same rows, same files, still readable."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in

import lakefmt
from lakefmt.errors import (
    CorruptMetadataError,
    InvalidPartitionError,
    LakefmtError,
    LocationNotEmptyError,
    NotATableError,
    PathOutsideTableError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableAlreadyExistsError,
    UnsupportedFormatVersionError,
    UnsupportedTypeError,
)
from lakefmt.io import FileIO, file_io_for
from lakefmt.io.paths import check_relative
from lakefmt.options import InvalidOptionError
from lakefmt.spec import layout
from lakefmt.spec.manifest import decode_manifest, encode_manifest

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string()),
        pa.field("v", pa.float64()),
    ]
)


def _data(ids: list[int], dt: str | None = "a") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "dt": pa.array([dt] * len(ids), pa.string()),
            "v": pa.array([float(i) for i in ids]),
        },
        schema=SCHEMA,
    )


@dataclass(frozen=True)
class State:
    """What must not change: snapshot ids and their contents, the rows, and the files under the root outside
    ``manifest/`` (a commit that fails after writing its manifest lists leaves them as orphans for
    orphan-clean, by design; the writer's data files and per-task manifest are removed at once)."""

    snapshots: tuple[Any, ...]
    rows: tuple[Any, ...]
    files: frozenset[str]


def _state(uri: str, storage_options: dict[str, Any]) -> State:
    t = lakefmt.open_table(uri, storage_options=storage_options)  # fresh: no metadata caches
    rows = t.scan().to_arrow().sort_by("id").to_pylist()
    snaps = tuple((s.id, s.nonce, s.total_record_count) for s in t.snapshots())
    files = frozenset(f.path for f in t.io.walk() if not f.path.startswith(f"{layout.MANIFEST_DIR}/"))
    return State(snaps, tuple(tuple(sorted(r.items())) for r in rows), files)


@dataclass
class Fixture:
    table: lakefmt.Table
    storage_options: dict[str, Any]
    before: State

    @property
    def io(self) -> FileIO:
        return self.table.io

    def fresh(self) -> lakefmt.Table:
        return lakefmt.open_table(self.table.uri, storage_options=self.storage_options)

    def state(self) -> State:
        return _state(self.table.uri, self.storage_options)

    def assert_unchanged(self) -> None:
        assert self.state() == self.before
        # and it still takes writes
        t = self.fresh()
        assert t.append(_data([1000 + len(self.before.snapshots)], "zz")) is not None
        self.before = self.state()


def _make(store: Any, **kwargs: Any) -> Fixture:
    t = create_table_in(store, SCHEMA, partition_by=["dt"], **kwargs)
    t.append(pa.concat_tables([_data([1, 2], "a"), _data([3], "b")]))
    t.append(_data([4], "a"))
    return Fixture(t, store.storage_options, _state(t.uri, store.storage_options))


@pytest.fixture
def fx(store: Any) -> Fixture:
    """A table with two snapshots on each storage backend."""
    return _make(store)


@pytest.fixture
def mfx(tmp_path: Any) -> Iterator[Fixture]:
    """The same on local disk only (for the many-variant tests)."""

    @dataclass
    class _Local:
        storage_options: dict[str, Any]

        def uri(self) -> str:
            return str(tmp_path / "table")

    yield _make(_Local({}), options={"write.row-group-rows": "1"})


# -- schema mismatch -------------------------------------------------------------------------------

MISMATCHES: dict[str, tuple[Callable[[], pa.Table], str]] = {
    # a missing nullable column is written as nulls; a missing column that is not nullable is refused, named
    "missing": (lambda: _data([5]).drop_columns(["id"]), r"missing column\(s\) id \(not nullable"),
    "extra": (lambda: _data([5]).append_column("surprise", pa.array([1])), "surprise"),
    "wrong-type": (lambda: _data([5]).set_column(2, "v", pa.array(["1.0"])), "v"),
    # a narrower integer is written (safe coercion); a value the table's type cannot hold is not
    "wrong-type-int": (lambda: _data([5]).set_column(0, "id", pa.array([5.5])), "id"),
    "too-large-int": (lambda: _data([5]).set_column(0, "id", pa.array([2**63], pa.uint64())), "id"),
    "nulls-in-required": (
        lambda: pa.table({"id": pa.array([5, None], pa.int64()), "dt": ["a", "a"], "v": [1.0, 2.0]}),
        "id",
    ),
    "renamed": (lambda: _data([5]).rename_columns(["ID", "dt", "v"]), "id"),
    "a-column-twice": (lambda: _data([5]).append_column("v", pa.array([2.0])), r"'v' appear more than once"),
}


def _check_mismatch(fx: Fixture, case: str) -> None:
    make, column = MISMATCHES[case]
    bad = make()
    for action in (
        lambda: fx.table.append(bad),
        lambda: fx.table.overwrite(bad, partition={"dt": "a"}),
        lambda: fx.table.overwrite(bad),
    ):
        with pytest.raises(SchemaMismatchError, match=column):
            action()
    w = fx.table.new_writer()
    with pytest.raises(SchemaMismatchError, match=column):
        w.write(bad)
    w.abort()
    fx.assert_unchanged()


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_schema_mismatch_names_the_column(mfx: Fixture, case: str) -> None:
    _check_mismatch(mfx, case)


def test_schema_mismatch_on_every_store(fx: Fixture) -> None:
    _check_mismatch(fx, "nulls-in-required")
    _check_mismatch(fx, "wrong-type")


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_schema_mismatch_after_good_batches_leaves_no_files(mfx: Fixture, case: str) -> None:
    """Good batches already written to data files (row groups of one row) are removed when a later one is
    refused."""
    make, column = MISMATCHES[case]
    batches = [_data([10, 11], "a"), _data([12], "new"), make()]
    with pytest.raises(SchemaMismatchError, match=column):
        mfx.table.append(batches)
    mfx.assert_unchanged()


@pytest.mark.parametrize(
    "data",
    [None, "text", 42, {"id": [1]}, [1, 2], [pa.array([1])]],
    ids=["none", "text", "int", "dict", "list", "list-of-arrays"],  # stable names: repr() shows an address
)
def test_not_arrow_data_is_refused(mfx: Fixture, data: Any) -> None:
    with pytest.raises(SchemaMismatchError):
        mfx.table.append(data)
    mfx.assert_unchanged()


# -- locations -------------------------------------------------------------------------------------


def test_open_table_on_something_that_is_not_a_table(store: Any) -> None:
    missing = store.uri()
    with pytest.raises(NotATableError):
        lakefmt.open_table(missing, storage_options=store.storage_options)
    other = store.uri()
    io = file_io_for(other, store.storage_options)
    io.write("readme.txt", b"not a table")
    io.write("snapshot/snapshot-1", b"{}")  # looks like a table's file, but there is no schema
    with pytest.raises(NotATableError, match="not a lakefmt table"):
        lakefmt.open_table(other, storage_options=store.storage_options)
    assert {f.path for f in io.walk()} == {"readme.txt", "snapshot/snapshot-1"}


def test_create_table_over_an_existing_table(fx: Fixture) -> None:
    other_schema = pa.schema([("x", pa.string())])
    with pytest.raises(TableAlreadyExistsError):
        lakefmt.create_table(fx.table.uri, other_schema, storage_options=fx.storage_options)
    with pytest.raises(TableAlreadyExistsError):
        lakefmt.create_table(fx.table.uri, SCHEMA, partition_by=["dt"], storage_options=fx.storage_options)
    assert fx.fresh().schema() == SCHEMA
    fx.assert_unchanged()


def test_create_table_in_a_non_empty_location(store: Any) -> None:
    uri = store.uri()
    io = file_io_for(uri, store.storage_options)
    io.write("data/part-0000.parquet", b"someone else's")
    with pytest.raises(LocationNotEmptyError, match="part-0000"):
        lakefmt.create_table(uri, SCHEMA, storage_options=store.storage_options)
    assert [f.path for f in io.walk()] == ["data/part-0000.parquet"]
    with pytest.raises(NotATableError):
        lakefmt.open_table(uri, storage_options=store.storage_options)


@pytest.mark.parametrize(
    ("schema", "kwargs", "error", "match"),
    [
        (pa.schema([("id", pa.int64()), ("d", pa.duration("s"))]), {}, UnsupportedTypeError, "duration"),
        (pa.schema([("id", pa.int64()), ("s", pa.struct([]))]), {}, UnsupportedTypeError, "struct"),
        (SCHEMA, {"partition_by": ["nope"]}, LakefmtError, "nope"),
        (SCHEMA, {"partition_by": ["v"]}, UnsupportedTypeError, "v"),
        (SCHEMA, {"options": {"target-file-size": "huge"}}, InvalidOptionError, "target-file-size"),
        (SCHEMA, {"options": {"manifest.merge-min-count": "0"}}, InvalidOptionError, "merge-min-count"),
    ],
    ids=["duration", "empty-struct", "unknown-partition-key", "float-partition-key", "bad-size", "zero-count"],
)
def test_create_table_refuses_bad_definitions_and_writes_nothing(
    tmp_path: Any, schema: pa.Schema, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    uri = str(tmp_path / "t")
    with pytest.raises(error, match=match):
        lakefmt.create_table(uri, schema, **kwargs)
    assert list(file_io_for(uri).walk()) == []
    assert lakefmt.create_table(uri, SCHEMA).scan().to_arrow().num_rows == 0  # the location is still usable


# -- corrupt metadata ------------------------------------------------------------------------------

MANGLES: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[: len(b) // 2],
    "garbage": lambda b: b"\x00\xffnot metadata at all" * 3,
}


def _replace(io: FileIO, rel: str, mangle: Callable[[bytes], bytes]) -> bytes:
    original = io.read(rel)
    io.delete(rel)
    io.write(rel, mangle(original))
    return original


def _restore(io: FileIO, rel: str, original: bytes) -> None:
    io.delete(rel)
    io.write(rel, original)


def test_corrupt_latest_snapshot_on_every_store(fx: Fixture) -> None:
    _check_corrupt_latest_snapshot(fx, "truncated")


@pytest.mark.parametrize("mangle", sorted(MANGLES))
def test_corrupt_latest_snapshot(mfx: Fixture, mangle: str) -> None:
    _check_corrupt_latest_snapshot(mfx, mangle)


def _check_corrupt_latest_snapshot(fx: Fixture, mangle: str) -> None:
    rel = layout.snapshot_path(2)
    original = _replace(fx.io, rel, MANGLES[mangle])
    t = fx.fresh()
    for action in (
        lambda: t.scan().to_arrow(),
        t.latest_snapshot,
        t.snapshots,
        lambda: t.snapshot(2),
        lambda: t.scan(snapshot_id=2),
        lambda: t.append(_data([9])),
    ):
        with pytest.raises(CorruptMetadataError, match=rel):
            action()
    assert sorted(t.scan(snapshot_id=1).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert not fx.io.exists(layout.snapshot_path(3))  # the failed append published nothing
    _restore(fx.io, rel, original)
    fx.assert_unchanged()


@pytest.mark.parametrize("mangle", sorted(MANGLES))
def test_corrupt_older_snapshot(mfx: Fixture, mangle: str) -> None:
    rel = layout.snapshot_path(1)
    original = _replace(mfx.io, rel, MANGLES[mangle])
    t = mfx.fresh()
    with pytest.raises(CorruptMetadataError, match=rel):
        t.scan(snapshot_id=1)
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]  # latest is unaffected
    _restore(mfx.io, rel, original)
    mfx.assert_unchanged()


def _manifest_files(t: lakefmt.Table) -> tuple[list[str], list[str]]:
    snap = t.latest_snapshot()
    assert snap is not None
    lists = [snap.base_manifest_list, snap.delta_manifest_list]
    return lists, [m.file_name for m in t._store.snapshot_manifests(snap)]


def test_corrupt_manifest_list_on_every_store(fx: Fixture) -> None:
    _check_corrupt_manifest(fx, "garbage", "delta-list")


@pytest.mark.parametrize("mangle", sorted(MANGLES))
@pytest.mark.parametrize("which", ["manifest", "base-list", "delta-list"])
def test_corrupt_manifest_or_manifest_list(mfx: Fixture, mangle: str, which: str) -> None:
    _check_corrupt_manifest(mfx, mangle, which)


def _check_corrupt_manifest(fx: Fixture, mangle: str, which: str) -> None:
    lists, manifests = _manifest_files(fx.table)
    name = manifests[0] if which == "manifest" else lists[0 if which == "base-list" else 1]
    rel = layout.manifest_path(name)
    original = _replace(fx.io, rel, MANGLES[mangle])
    t = fx.fresh()
    with pytest.raises(CorruptMetadataError, match=rel):
        t.scan().to_arrow()
    with pytest.raises(CorruptMetadataError, match=rel):
        t.scan().files()
    if which != "manifest":  # a commit reads the latest lists to build the next base
        with pytest.raises(CorruptMetadataError, match=rel):
            t.append(_data([9]))
        assert not fx.io.exists(layout.snapshot_path(3))
    _restore(fx.io, rel, original)
    fx.assert_unchanged()


def test_missing_manifest_is_corrupt_metadata(mfx: Fixture) -> None:
    _, manifests = _manifest_files(mfx.table)
    rel = layout.manifest_path(manifests[-1])
    original = mfx.io.read(rel)
    mfx.io.delete(rel)
    with pytest.raises(CorruptMetadataError, match=rel):
        mfx.fresh().scan().to_arrow()
    mfx.io.write(rel, original)
    mfx.assert_unchanged()


def _rewrite_snapshot(io: FileIO, snapshot_id: int, change: Callable[[dict[str, Any]], None]) -> bytes:
    rel = layout.snapshot_path(snapshot_id)
    original = io.read(rel)
    obj = orjson.loads(original)
    change(obj)
    _replace(io, rel, lambda _: orjson.dumps(obj))
    return original


def test_snapshot_from_a_newer_format_version(fx: Fixture) -> None:
    original = _rewrite_snapshot(fx.io, 2, lambda o: o.update(version=lakefmt.FORMAT_VERSION + 1))
    t = fx.fresh()
    newer = str(lakefmt.FORMAT_VERSION + 1)
    for action in (
        lambda: t.scan().to_arrow(),
        t.latest_snapshot,
        lambda: t.append(_data([9])),
        lambda: t.overwrite(_data([9]), partition={"dt": "a"}),
    ):
        with pytest.raises(UnsupportedFormatVersionError, match=newer):
            action()
    assert not fx.io.exists(layout.snapshot_path(3))  # never commit on top of a format we do not know
    _restore(fx.io, layout.snapshot_path(2), original)
    fx.assert_unchanged()


def test_snapshot_with_unknown_fields_still_reads(mfx: Fixture) -> None:
    original = _rewrite_snapshot(mfx.io, 2, lambda o: o.update(futureField={"x": [1]}, changelogManifestList=None))
    assert sorted(mfx.fresh().scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    _restore(mfx.io, layout.snapshot_path(2), original)
    mfx.assert_unchanged()


# -- paths that escape the root --------------------------------------------------------------------

ESCAPING = [
    "../evil.parquet",
    "../../etc/passwd",
    "/etc/passwd",
    "dt=a/../../evil.parquet",
    "dt=a/./x.parquet",
    "s3://other-bucket/x.parquet",
    "file:///etc/passwd",
    "dt=a//x.parquet",
    "",
    "..",
    "dt=a\\..\\..\\x",
    "dt=a/x.parquet\x00.txt",
]


@pytest.mark.parametrize("bad", ESCAPING, ids=repr)
def test_manifest_entry_path_outside_the_root(mfx: Fixture, bad: str) -> None:
    _, manifests = _manifest_files(mfx.table)
    name = manifests[-1]  # the delta manifest of snapshot 2: id 4 in dt=a
    rel = layout.manifest_path(name)

    def poison(data: bytes) -> bytes:
        entries = decode_manifest(data)
        paths = pa.array([bad] * entries.num_rows, pa.string())
        return encode_manifest(entries.set_column(entries.schema.get_field_index("path"), "path", paths))

    original = _replace(mfx.io, rel, poison)
    t = mfx.fresh()
    for action in (
        lambda: t.scan().to_arrow(),
        lambda: t.scan().files(),
        lambda: t.scan().to_dataset(),
        lambda: t.scan(from_snapshot=1).to_arrow(),
        lambda: t.overwrite(_data([9]), partition={"dt": "a"}),
        lambda: t.overwrite(_data([9])),
    ):
        with pytest.raises(PathOutsideTableError):
            action()
    assert not mfx.io.exists(layout.snapshot_path(3))
    _restore(mfx.io, rel, original)
    mfx.assert_unchanged()


@pytest.mark.parametrize("bad", ["../manifest-list-x", "/etc/passwd", "a/b", "..", ""], ids=repr)
def test_snapshot_or_list_naming_a_file_outside_the_manifest_folder(mfx: Fixture, bad: str) -> None:
    original = _rewrite_snapshot(mfx.io, 2, lambda o: o.update(baseManifestList=bad))
    with pytest.raises(PathOutsideTableError):
        mfx.fresh().scan().to_arrow()
    with pytest.raises(PathOutsideTableError):
        mfx.fresh().append(_data([9]))
    _restore(mfx.io, layout.snapshot_path(2), original)
    mfx.assert_unchanged()


# -- partitions ------------------------------------------------------------------------------------

HOSTILE = [
    "/",
    "..",
    ".",
    "=",
    "%",
    "%2F",
    "a/../../b",
    "k=v/x=y",
    "é日本😀",
    "",
    " ",
    "\\",
    "__null__",
    None,
    "x" * 500,
]


def test_hostile_partition_values_round_trip_under_the_root(store: Any) -> None:
    t = lakefmt.create_table(store.uri(), SCHEMA, partition_by=["dt"], storage_options=store.storage_options)
    data = pa.concat_tables([_data([i * 10, i * 10 + 1], v) for i, v in enumerate(HOSTILE)])
    t.append(data)
    t.append(_data([999], ".."))
    t = lakefmt.open_table(t.uri, storage_options=store.storage_options)
    out = t.scan().to_arrow()
    assert sorted(out.to_pylist(), key=lambda r: r["id"]) == sorted(
        pa.concat_tables([data, _data([999], "..")]).to_pylist(), key=lambda r: r["id"]
    )
    files = t.scan().files()
    folders = {f.path.rsplit("/", 1)[0] for f in files}
    assert len(folders) == len(HOSTILE)  # one folder per distinct value, '..' reused
    root = t.io.root
    for f in files:
        check_relative(f.path)
        folder, name = f.path.split("/")  # exactly one partition folder, then the file
        assert folder.startswith("dt=") and folder not in ("dt=.", "dt=..") and name.endswith(".parquet")
        assert f.full_path == f"{root}/{f.path}"
        if store.kind == "local":
            real = os.path.realpath(f.full_path)
            assert real.startswith(os.path.realpath(root) + os.sep) and os.path.isfile(real)
    walked = {f.path for f in t.io.walk()}
    assert {f.path for f in files} <= walked
    if store.kind == "local":
        for dirpath, dirnames, filenames in os.walk(root):
            assert os.path.realpath(dirpath).startswith(os.path.realpath(root))
            assert not {".", ".."} & set(dirnames)
            del filenames
    for i, v in enumerate(HOSTILE):
        expr = pc.field("dt").is_null() if v is None else pc.field("dt") == v
        expected = [i * 10, i * 10 + 1] + ([999] if v == ".." else [])
        assert sorted(t.scan(filter=expr).to_arrow().column("id").to_pylist()) == expected, v
    # overwriting a hostile partition replaces exactly it
    t.overwrite(_data([5000], "a/../../b"), partition={"dt": "a/../../b"})
    t.overwrite(_data([6000], None), partition={"dt": None})
    got = sorted(t.scan().to_arrow().column("id").to_pylist())
    gone = {i * 10 + k for i, v in enumerate(HOSTILE) if v in ("a/../../b", None) for k in (0, 1)}
    assert got == sorted((set(data.column("id").to_pylist()) - gone) | {999, 5000, 6000})


@pytest.mark.parametrize(
    ("partition", "match"),
    [
        ({"id": 1}, "id"),
        ({"v": 1.0}, "v"),
        ({"nope": "a"}, "nope"),
        ({"dt": "a", "extra": 1}, "extra"),
        ({"DT": "a"}, "DT"),
    ],
    ids=repr,
)
def test_overwrite_with_a_key_that_is_not_a_partition_column(
    mfx: Fixture, partition: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidPartitionError, match=match):
        mfx.table.overwrite(_data([9], "a"), partition=partition)
    mfx.assert_unchanged()


def test_overwrite_with_a_bad_partition_key_on_every_store(fx: Fixture) -> None:
    with pytest.raises(InvalidPartitionError, match="nope"):
        fx.table.overwrite(_data([9], "a"), partition={"nope": "a"})
    w = fx.table.new_writer()
    w.write(_data([9], "a"))
    with pytest.raises(InvalidPartitionError, match="id"):
        fx.table.new_committer("u").overwrite([w.prepare_commit()], identifier=1, partition={"id": 9})
    assert fx.fresh().commit_user_identifier("u") is None
    for f in w.written_files:  # a failed committer never deletes a writer's files: the caller owns them
        fx.io.delete(f.path)
    fx.assert_unchanged()


def test_overwrite_data_outside_the_partition_or_of_the_wrong_type(mfx: Fixture) -> None:
    with pytest.raises(InvalidPartitionError, match="dt"):
        mfx.table.overwrite(pa.concat_tables([_data([9], "a"), _data([10], "b")]), partition={"dt": "a"})
    with pytest.raises(InvalidPartitionError):
        mfx.table.overwrite(_data([9], "b"), partition={"dt": "a"})
    with pytest.raises(InvalidPartitionError):
        mfx.table.overwrite(_data([9], None), partition={"dt": "a"})
    mfx.assert_unchanged()
    int_part = lakefmt.create_table(
        mfx.table.uri + "-int", pa.schema([("id", pa.int64()), ("p", pa.int32())]), partition_by=["p"]
    )
    int_part.append(pa.table({"id": [1], "p": pa.array([1], pa.int32())}))
    with pytest.raises(InvalidPartitionError, match="p"):
        int_part.overwrite(pa.table({"id": [2], "p": pa.array([1], pa.int32())}), partition={"p": "one"})
    assert int_part.scan().to_arrow().column("id").to_pylist() == [1]


def test_overwrite_partition_of_an_unpartitioned_table(tmp_path: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_data([1]))
    before = _state(t.uri, {})
    with pytest.raises(InvalidPartitionError, match="dt"):
        t.overwrite(_data([2]), partition={"dt": "a"})
    assert _state(t.uri, {}) == before


# -- snapshots that do not exist -------------------------------------------------------------------


def test_time_travel_to_a_missing_snapshot(fx: Fixture) -> None:
    t = fx.fresh()
    for sid in (3, 99, 0, -1):
        with pytest.raises(SnapshotNotFoundError, match=str(sid)):
            t.scan(snapshot_id=sid)
        with pytest.raises(SnapshotNotFoundError, match=str(sid)):
            t.snapshot(sid)
    with pytest.raises(SnapshotNotFoundError):
        t.scan(as_of=t.snapshot(1).time_millis - 1)
    with pytest.raises(SnapshotNotFoundError, match="99"):
        t.scan(from_snapshot=1, to_snapshot=99)
    with pytest.raises(LookupError):  # SnapshotNotFoundError is a LookupError too
        t.snapshot(42)
    fx.assert_unchanged()


def test_time_travel_on_an_empty_table(store: Any) -> None:
    t = lakefmt.create_table(store.uri(), SCHEMA, storage_options=store.storage_options)
    with pytest.raises(SnapshotNotFoundError):
        t.scan(snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError):
        t.scan(as_of=2**41)
    assert t.scan().to_arrow().num_rows == 0
    assert t.scan().to_arrow().schema == SCHEMA


# -- commit messages -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [["not a message"], [None], [{"manifests": []}], [b"x"]])
def test_committer_refuses_what_is_not_a_commit_message(mfx: Fixture, bad: list[Any]) -> None:
    with pytest.raises(TypeError, match="CommitMessage"):
        mfx.table.new_committer("job").commit(bad, 1)
    mfx.assert_unchanged()


def test_committer_takes_a_lone_commit_message(mfx: Fixture) -> None:
    with mfx.table.new_writer() as w:
        w.write(_data([50, 51], "c"))
        message = w.prepare_commit()
    committer = mfx.table.new_committer("job")
    snap = committer.commit(message, 1)
    assert snap is not None and committer.commit(message, 1) is None
    assert sorted(mfx.fresh().scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 50, 51]
