"""FileIO conformance: local disk, memory and S3 (a real moto server through s3fs) keep the same guarantees.

Every test taking ``store`` runs once per backend. The guarantees are the ones documented in
``lakefmt/io/fileio.py``: whole reads, exclusive publish (including the retry of a publish whose answer was
lost), fresh sorted listings, idempotent delete, paths that cannot leave the root, clean pickling, and
storage options that never show up in ``repr``.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from lakefmt.errors import PathOutsideTableError
from lakefmt.io import FileIO, file_io_for

RACERS = 8
RACE_ROUNDS = 10


@pytest.fixture
def fio(store: Any) -> FileIO:
    """A FileIO on a fresh, empty root of the backend under test."""
    return file_io_for(store.uri(), store.storage_options)


def twin(fio: FileIO, store: Any) -> FileIO:
    """A second, independent FileIO on the same root (as another process or committer would have)."""
    return file_io_for(fio.uri, store.storage_options)


# -- read / write ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [b"", b"x", bytes(range(256)) * 3, os.urandom(3 << 20)],
    ids=["empty", "one-byte", "all-byte-values", "3MiB"],
)
def test_write_read_round_trip(fio: FileIO, payload: bytes) -> None:
    fio.write("a/b/c/file.bin", payload)
    fio.write("top.bin", payload[::-1])

    got = fio.read("a/b/c/file.bin")
    assert isinstance(got, bytes)
    assert got == payload
    assert fio.read("top.bin") == payload[::-1]


def test_open_output_round_trip(fio: FileIO) -> None:
    stream = fio.open_output("k=v/data-0.parquet")
    stream.write(b"hello ")
    stream.write(b"world")
    assert stream.tell() == 11
    stream.close()
    fio.sync("k=v/data-0.parquet")

    assert fio.read("k=v/data-0.parquet") == b"hello world"


def test_read_of_missing_file_raises_file_not_found(fio: FileIO) -> None:
    with pytest.raises(FileNotFoundError):
        fio.read("missing")
    with pytest.raises(FileNotFoundError):
        fio.read("no/such/folder/missing")

    fio.write("there", b"1")
    fio.delete("there")
    with pytest.raises(FileNotFoundError):
        fio.read("there")


def test_exists(fio: FileIO) -> None:
    assert not fio.exists("snapshot/snapshot-1")
    fio.write("snapshot/snapshot-1", b"{}")
    assert fio.exists("snapshot/snapshot-1")
    fio.delete("snapshot/snapshot-1")
    assert not fio.exists("snapshot/snapshot-1")


# -- publish ----------------------------------------------------------------------------------------------


def test_publish_is_exclusive(fio: FileIO) -> None:
    first = b'{"id": 1, "nonce": "first"}'
    second = b'{"id": 1, "nonce": "second"}'

    assert fio.publish("snapshot/snapshot-1", first) is True
    assert fio.read("snapshot/snapshot-1") == first

    assert fio.publish("snapshot/snapshot-1", second) is False
    assert fio.read("snapshot/snapshot-1") == first


def test_publish_of_the_same_bytes_again_is_a_win(fio: FileIO, store: Any) -> None:
    """A PUT that landed but whose answer was lost is retried and meets its own object: still a win."""
    data = b'{"id": 7, "nonce": "mine"}'
    assert fio.publish("snapshot/snapshot-7", data) is True

    assert fio.publish("snapshot/snapshot-7", data) is True
    assert twin(fio, store).publish("snapshot/snapshot-7", data) is True
    assert fio.read("snapshot/snapshot-7") == data
    assert fio.list("snapshot") == ["snapshot-7"]


def test_publish_never_replaces_a_plain_write(fio: FileIO) -> None:
    fio.write("schema/schema-0", b"written")
    assert fio.publish("schema/schema-0", b"published") is False
    assert fio.read("schema/schema-0") == b"written"


def test_racing_publishers_have_exactly_one_winner(fio: FileIO, store: Any) -> None:
    """Threads with their own FileIO race to publish distinct bytes under one name, round after round."""
    racers = [twin(fio, store) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)

    def race(i: int, rel: str, payload: bytes) -> bool:
        barrier.wait(timeout=60)
        return racers[i].publish(rel, payload)

    with ThreadPoolExecutor(RACERS) as pool:
        for rnd in range(1, RACE_ROUNDS + 1):
            rel = f"snapshot/snapshot-{rnd}"
            payloads = [f"round {rnd} writer {i};".encode() * 2000 for i in range(RACERS)]
            results = list(pool.map(race, range(RACERS), [rel] * RACERS, payloads))

            assert results.count(True) == 1, f"round {rnd}: {results}"
            winner = results.index(True)
            assert fio.read(rel) == payloads[winner]

    assert fio.list("snapshot") == sorted(f"snapshot-{r}" for r in range(1, RACE_ROUNDS + 1))


# -- list -------------------------------------------------------------------------------------------------


def test_list_returns_sorted_direct_children(fio: FileIO) -> None:
    for name in ["snapshot-10", "snapshot-2", "LATEST", "snapshot-1", "EARLIEST"]:
        fio.write(f"snapshot/{name}", b"x")
    fio.write("snapshot/nested/deeper", b"x")
    fio.write("snapshotx/sibling-with-common-prefix", b"x")
    fio.write("snapshot-at-root", b"x")

    assert fio.list("snapshot") == ["EARLIEST", "LATEST", "snapshot-1", "snapshot-10", "snapshot-2"]
    assert fio.list("snapshot/nested") == ["deeper"]
    assert fio.list("snapshotx") == ["sibling-with-common-prefix"]


def test_list_of_missing_folder_is_empty(fio: FileIO) -> None:
    assert fio.list("snapshot") == []
    fio.write("manifest/m-1", b"x")
    assert fio.list("snapshot") == []
    assert fio.list("manifest/m-1/not-a-folder") == []


def test_list_read_and_exists_are_fresh_across_instances(fio: FileIO, store: Any) -> None:
    """What another FileIO (another process) writes is seen at once: no listing or metadata cache."""
    other = twin(fio, store)
    assert fio.list("snapshot") == []
    with pytest.raises(FileNotFoundError):
        fio.read("snapshot/snapshot-1")
    assert not fio.exists("snapshot/snapshot-1")

    other.write("snapshot/snapshot-1", b"one")
    assert fio.list("snapshot") == ["snapshot-1"]
    assert fio.read("snapshot/snapshot-1") == b"one"
    assert fio.exists("snapshot/snapshot-1")

    assert other.publish("snapshot/snapshot-2", b"two") is True
    assert fio.list("snapshot") == ["snapshot-1", "snapshot-2"]
    assert fio.publish("snapshot/snapshot-2", b"not two") is False

    other.delete("snapshot/snapshot-1")
    assert fio.list("snapshot") == ["snapshot-2"]
    with pytest.raises(FileNotFoundError):
        fio.read("snapshot/snapshot-1")
    assert not fio.exists("snapshot/snapshot-1")


# -- delete -----------------------------------------------------------------------------------------------


def test_delete_is_idempotent(fio: FileIO) -> None:
    fio.write("manifest/m-1", b"x")
    fio.write("manifest/m-2", b"y")

    fio.delete("manifest/m-1")
    fio.delete("manifest/m-1")
    fio.delete("never/existed")

    assert fio.list("manifest") == ["m-2"]
    assert fio.read("manifest/m-2") == b"y"


# -- walk -------------------------------------------------------------------------------------------------


def test_walk_yields_every_file_with_relative_path_size_and_mtime(fio: FileIO) -> None:
    assert list(fio.walk()) == []
    before_ms = int(time.time() * 1000)
    files = {
        "schema/schema-0": b"{}",
        "snapshot/snapshot-1": b"0123456789",
        "dt=2026-11-01/data-a-0.parquet": b"p" * 1000,
        "dt=2026-11-01/hour=3/data-b-0.parquet": b"q" * 7,
        "top": b"t",
    }
    for rel, data in files.items():
        if rel.startswith("snapshot/"):
            assert fio.publish(rel, data)
        else:
            fio.write(rel, data)
    after_ms = int(time.time() * 1000)

    found = list(fio.walk())
    assert {f.path: f.size for f in found} == {rel: len(data) for rel, data in files.items()}
    assert len(found) == len(files)
    for f in found:
        # Object stores keep mtime to the second; allow that much slack (plus clock skew) but never 0:
        # orphan-clean decides by age, and a missing mtime must not make an in-flight file look ancient.
        assert before_ms - 3000 <= f.mtime_ms <= after_ms + 3000, f


def test_walk_of_missing_root_is_empty(store: Any) -> None:
    assert list(file_io_for(store.uri(), store.storage_options).walk()) == []


# -- paths --------------------------------------------------------------------------------------------------

BAD_PATHS = [
    "..",
    "../escape",
    "a/../../escape",
    "a/..",
    ".",
    "./a",
    "a/./b",
    "/escape",
    "//escape",
    "a\\b",
    "..\\escape",
    "a//b",
    "a/",
    "",
    "s3://other-bucket/key",
    "file:///escape",
    "memory://escape",
    "a\x00b",
]


@pytest.mark.parametrize("rel", BAD_PATHS)
def test_paths_that_could_leave_the_root_are_refused(store: Any, tmp_path: Any, rel: str) -> None:
    fio = file_io_for(store.uri(), store.storage_options)
    operations: list[Callable[[], object]] = [
        lambda: fio.read(rel),
        lambda: fio.write(rel, b"x"),
        lambda: fio.publish(rel, b"x"),
        lambda: fio.list(rel),
        lambda: fio.delete(rel),
        lambda: fio.exists(rel),
        lambda: fio.open_output(rel),
        lambda: fio.full_path(rel),
    ]
    for op in operations:
        with pytest.raises(PathOutsideTableError):
            op()
    # nothing was written anywhere near the root, inside or outside it
    assert list(file_io_for(store.base, store.storage_options).walk()) == []
    assert list(tmp_path.iterdir()) == []


def test_absolute_local_path_is_refused(store: Any, tmp_path: Any) -> None:
    target = tmp_path / "outside"
    fio = file_io_for(store.uri(), store.storage_options)
    with pytest.raises(PathOutsideTableError):
        fio.write(str(target), b"x")
    with pytest.raises(PathOutsideTableError):
        fio.publish(str(target), b"x")
    assert not target.exists()


@pytest.mark.parametrize(
    "rel", ["..a", "a..b", "a/b..", ".hidden", "dt=2026-11-01/data-0.parquet", "k=%2E%2E/x", "with space/ü"]
)
def test_unusual_but_clean_paths_are_accepted(fio: FileIO, rel: str) -> None:
    fio.write(rel, rel.encode())
    assert fio.read(rel) == rel.encode()
    assert rel in {f.path for f in fio.walk()}


# -- pickling and repr ----------------------------------------------------------------------------------

LIVE_MODULES = ("fsspec", "s3fs", "aiobotocore", "botocore", "boto3", "aiohttp", "asyncio", "threading", "_thread")


class _RecordingUnpickler(pickle.Unpickler):
    """Unpickles while recording every global the pickle refers to."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.globals: list[tuple[str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        self.globals.append((module, name))
        return super().find_class(module, name)


def test_fileio_pickles_without_live_state_and_works_after(fio: FileIO) -> None:
    fio.write("manifest/m-1", b"before pickling")
    assert fio.list("manifest") == ["m-1"]
    assert fio.fs is not None  # the fsspec filesystem is live now, on every backend

    data = pickle.dumps(fio)
    unpickler = _RecordingUnpickler(data)
    clone = unpickler.load()

    live = [g for g in unpickler.globals if g[0].split(".")[0] in LIVE_MODULES]
    assert live == [], f"pickled FileIO refers to live machinery: {live}"
    assert type(clone) is type(fio)
    assert clone.uri == fio.uri
    assert repr(clone) == repr(fio)

    assert clone.read("manifest/m-1") == b"before pickling"
    clone.write("manifest/m-2", b"after pickling")
    assert clone.publish("snapshot/snapshot-1", b"s1") is True
    assert fio.read("manifest/m-2") == b"after pickling"
    assert fio.publish("snapshot/snapshot-1", b"other") is False
    assert clone.list("manifest") == ["m-1", "m-2"]

    again = pickle.loads(pickle.dumps(clone))  # a clone that has been used pickles as well
    assert again.read("snapshot/snapshot-1") == b"s1"


def test_repr_and_str_never_show_storage_option_values(store: Any) -> None:
    secret = "FAKE-SECRET-do-not-print-9f3c1a"
    token = "FAKE-TOKEN-do-not-print-77b2e0"
    options = dict(store.storage_options)
    if store.kind == "s3":  # moto accepts any credentials, so these are used for real below
        options.update(secret=secret, token=token)
    else:
        options.update(secret=secret, client_kwargs={"token": token})
    fio = file_io_for(store.uri(), options)

    fio.write("x", b"1")  # make the filesystem live
    with pytest.raises(FileNotFoundError) as missing:
        fio.read("missing")
    clone = pickle.loads(pickle.dumps(fio))

    for shown in (repr(fio), str(fio), repr(clone), str(clone), str(missing.value), f"{fio!r} {fio}"):
        assert secret not in shown
        assert token not in shown
    assert fio.uri in repr(fio)


# -- S3 only --------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_read_and_probe_are_one_get(s3_store: Any) -> None:
    """A read, and a probe for a snapshot that does not exist yet, each cost exactly one GET (no HEAD for
    the size, no LIST to rule out a folder): committers probe on every commit."""
    fio = file_io_for(s3_store.uri(), s3_store.storage_options)
    fio.write("snapshot/snapshot-1", b"{}")
    calls: list[str] = []
    call_s3 = fio.fs._call_s3

    async def counting(method: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(method)
        return await call_s3(method, *args, **kwargs)

    fio.fs._call_s3 = counting
    assert fio.read("snapshot/snapshot-1") == b"{}"
    assert calls == ["get_object"]

    calls.clear()
    with pytest.raises(FileNotFoundError):
        fio.read("snapshot/snapshot-2")
    assert calls == ["get_object"]


# -- local disk only ------------------------------------------------------------------------------------


def test_local_publish_leaves_no_temp_file(local_store: Any) -> None:
    fio = file_io_for(local_store.uri(), local_store.storage_options)
    assert fio.publish("snapshot/snapshot-1", b"won") is True
    assert fio.publish("snapshot/snapshot-1", b"lost") is False
    assert fio.publish("snapshot/snapshot-1", b"won") is True

    folder = os.path.join(fio.root, "snapshot")
    assert sorted(os.listdir(folder)) == ["snapshot-1"]
    assert [f.path for f in fio.walk()] == ["snapshot/snapshot-1"]


@pytest.mark.parametrize("failing", ["fsync", "link"])
def test_local_failed_publish_leaves_no_temp_file(
    local_store: Any, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A publish that fails half way (disk error while writing the temp file, or on the link) cleans up."""
    fio = file_io_for(local_store.uri(), local_store.storage_options)
    fio.write("snapshot/LATEST", b"1")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, f"injected {failing} failure")

    monkeypatch.setattr(os, failing, broken)
    with pytest.raises(OSError, match="injected"):
        fio.publish("snapshot/snapshot-1", b"x" * 100_000)
    monkeypatch.undo()

    assert sorted(os.listdir(os.path.join(fio.root, "snapshot"))) == ["LATEST"]
    with pytest.raises(FileNotFoundError):
        fio.read("snapshot/snapshot-1")
    assert fio.publish("snapshot/snapshot-1", b"x") is True


def test_local_publish_never_shows_a_partial_file(local_store: Any) -> None:
    """A reader polling the name while large files are published sees nothing or everything."""
    fio = file_io_for(local_store.uri(), local_store.storage_options)
    reader_io = file_io_for(fio.uri)
    rounds = 6
    size = 8 << 20
    done = threading.Event()
    current = [0]  # the round being published; the reader polls only that name
    bad: list[str] = []

    def poll() -> None:
        while not done.is_set():
            r = current[0]
            rel = f"snapshot/snapshot-{r}"
            try:  # a stat is cheap, so the poll is tight; a full read checks the content too
                seen = os.stat(reader_io.full_path(rel)).st_size
                got = reader_io.read(rel)
            except FileNotFoundError:
                continue
            if seen != size or got != bytes([65 + r]) * size:
                bad.append(f"{rel}: saw {seen} bytes, read {len(got)}, expected {size}")

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for r in range(rounds):
            current[0] = r
            assert fio.publish(f"snapshot/snapshot-{r}", bytes([65 + r]) * size) is True
    finally:
        done.set()
        reader.join(timeout=60)
    assert not reader.is_alive()
    assert bad == []
    assert sorted(os.listdir(os.path.join(fio.root, "snapshot"))) == [f"snapshot-{r}" for r in range(rounds)]


# -- replace (the consumer files: overwritten in place, atomically) ----------------------------------------------


def test_replace_creates_then_overwrites(fio: FileIO, store: Any) -> None:
    fio.replace("consumer/consumer-a", b"first")
    assert fio.read("consumer/consumer-a") == b"first"
    fio.replace("consumer/consumer-a", b"second, longer")
    assert twin(fio, store).read("consumer/consumer-a") == b"second, longer"
    fio.replace("consumer/consumer-a", b"3")  # shorter: nothing of the old bytes is left
    assert fio.read("consumer/consumer-a") == b"3"
    assert [f.path for f in fio.walk()] == ["consumer/consumer-a"]  # no temp file left behind
    with pytest.raises(PathOutsideTableError):
        fio.replace("../consumer-a", b"x")


def test_local_replace_never_shows_a_partial_or_missing_file(local_store: Any) -> None:
    """A reader polling a file while it is replaced by large contents sees the old bytes or the new ones: never a
    mix, a short file, or no file (``FileIO.write`` truncates in place, so a reader of it sees partial files)."""
    fio = file_io_for(local_store.uri(), local_store.storage_options)
    size = 4 << 20
    rounds = 8
    fio.replace("consumer/consumer-a", b"@" * size)
    done = threading.Event()
    bad: list[str] = []
    reads = [0]

    def poll() -> None:
        while not done.is_set():
            try:
                got = fio.read("consumer/consumer-a")
            except FileNotFoundError:
                bad.append("missing")
                continue
            reads[0] += 1
            if len(got) != size or got.count(got[:1]) != size:
                bad.append(f"{len(got)} bytes, first {got[:1]!r}")

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for r in range(rounds):
            fio.replace("consumer/consumer-a", bytes([65 + r]) * size)
    finally:
        done.set()
        reader.join(timeout=60)
    assert bad == [] and reads[0] > 0
    assert fio.read("consumer/consumer-a") == bytes([65 + rounds - 1]) * size


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_local_failed_replace_keeps_the_old_file(
    local_store: Any, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    fio = file_io_for(local_store.uri(), local_store.storage_options)
    fio.replace("consumer/consumer-a", b"old")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, f"injected {failing} failure")

    monkeypatch.setattr(os, failing, broken)
    with pytest.raises(OSError, match="injected"):
        fio.replace("consumer/consumer-a", b"new" * 10_000)
    monkeypatch.undo()
    assert fio.read("consumer/consumer-a") == b"old"
    assert sorted(os.listdir(os.path.join(fio.root, "consumer"))) == ["consumer-a"]
