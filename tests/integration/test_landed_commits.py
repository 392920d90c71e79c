"""A landed commit is never deleted, whatever interrupts it (issue "Never delete a landed commit", items 1, 2
and 8): an interrupt after the publish, a connection-level S3 error (botocore's ``BotoCoreError``, not an
``OSError``) on the snapshot PUT or right after it, and a concurrent expiration of the snapshot a commit
builds on. S3 cases run against the moto server through s3fs; the faults are raised by a FileIO subclass at
the point where the real backend's call returns (the request itself reaches the real store)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

import lakefmt
from lakefmt.errors import CommitStateUnknownError
from lakefmt.io import FileIO, file_io_for
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64())])
RETAIN = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def _ids(t: lakefmt.Table, **kwargs: Any) -> list[int]:
    return sorted(t.scan(**kwargs).to_arrow().column("id").to_pylist())


def _faulty(base: FileIO, on: Callable[[str, str], BaseException | None], *, after: bool = True) -> FileIO:
    """``base``'s class, with ``on(op, path)`` consulted at every publish, write and delete: an exception it
    returns is raised after the operation was applied (``after``) or instead of it."""
    cls = type(base)

    class Faulty(cls):  # type: ignore[valid-type, misc]
        def _fire(self, op: str, path: str, apply: Callable[[], Any]) -> Any:
            exc = on(op, path)
            if exc is None:
                return apply()
            if after:
                apply()
            raise exc

        def _publish(self, path: str, data: bytes, sync: bool) -> None:
            rel = path.removeprefix(self.root + "/")
            self._fire("publish", rel, lambda: super(Faulty, self)._publish(path, data, sync))

        def write(self, rel: str, data: bytes, *, sync: bool = True) -> None:
            self._fire("write", rel, lambda: super(Faulty, self).write(rel, data, sync=sync))

        def delete(self, rel: str) -> None:
            self._fire("delete", rel, lambda: super(Faulty, self).delete(rel))

    io = Faulty(base.uri, base._storage_options)
    return io


def _table(io: FileIO) -> lakefmt.Table:
    return lakefmt.Table(io, MetaStore(io))


Hook = Callable[[str, str], BaseException | None]


def _once(match: Callable[[str, str], bool], exc: Callable[[], BaseException]) -> Hook:
    fired = threading.Event()

    def on(op: str, path: str) -> BaseException | None:
        if not fired.is_set() and match(op, path):
            fired.set()
            return exc()
        return None

    on.fired = fired  # type: ignore[attr-defined]
    return on


def _snapshot_put(op: str, path: str) -> bool:
    return op == "publish" and path.startswith("snapshot/snapshot-")


def _assert_whole(uri: str, opts: dict[str, Any], ids: list[int]) -> None:
    t = lakefmt.open_table(uri, storage_options=opts)
    assert _ids(t) == ids
    # every retained snapshot reads: none of its files was deleted (an expiration cut short by the interrupt
    # announced its new earliest snapshot first; those below it are half-expired until expire runs again)
    earliest = MetaStore(t.io).read_hint(layout.EARLIEST) or 0
    retained = [s.id for s in t.snapshots() if s.id >= earliest]
    for sid in retained:
        t.scan(snapshot_id=sid).to_arrow()
    t.expire_snapshots(retain_min=1, retain_max=len(retained))  # a rerun finishes what was cut short
    for s in t.snapshots():
        t.scan(snapshot_id=s.id).to_arrow()
    assert _ids(t) == ids


# -- 1. an interrupt after the publish ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "where",
    [
        "publish",  # the snapshot PUT applied, the interrupt before its answer
        "hint",  # the LATEST hint write
        "expire",  # the automatic expiration the table's options ask for after each commit
    ],
)
def test_an_interrupt_after_the_publish_deletes_nothing(store: Any, where: str) -> None:
    uri = store.uri()
    t = lakefmt.create_table(uri, SCHEMA, options=RETAIN, storage_options=store.storage_options)
    t.append(_rows([0]))
    matches = {
        "publish": _snapshot_put,
        "hint": lambda op, path: op == "write" and path == layout.LATEST,
        "expire": lambda op, path: op == "delete",
    }
    on = _once(matches[where], KeyboardInterrupt)
    io = _faulty(file_io_for(uri, store.storage_options), on)
    with pytest.raises(KeyboardInterrupt):
        _table(io).append(_rows([1]))
    assert on.fired.is_set()  # type: ignore[attr-defined]
    _assert_whole(uri, store.storage_options, [0, 1])


def test_an_interrupt_before_the_publish_cleans_up(local_store: Any) -> None:
    """The other side of the rule: a commit interrupted before any publish request leaves no files."""
    uri = local_store.uri()
    t = lakefmt.create_table(uri, SCHEMA)
    t.append(_rows([0]))
    before = {f.path for f in t.io.walk()}
    on = _once(lambda op, path: op == "write" and path.startswith("manifest/manifest-list-"), KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        _table(_faulty(t.io, on, after=False)).append(_rows([1]))
    after = {f.path for f in t.io.walk()}
    assert {p for p in after - before if not p.startswith("manifest/manifest-list-")} == set()
    _assert_whole(uri, {}, [0])


# -- 2. connection-level S3 errors ----------------------------------------------------------------------------
def _connection_errors() -> list[Callable[[], BaseException]]:
    return [
        lambda: ConnectionClosedError(endpoint_url="http://127.0.0.1"),
        lambda: EndpointConnectionError(endpoint_url="http://127.0.0.1"),
        lambda: ReadTimeoutError(endpoint_url="http://127.0.0.1"),
    ]


@pytest.mark.s3
@pytest.mark.parametrize("error", _connection_errors(), ids=["closed", "endpoint", "read-timeout"])
@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_connection_error_on_the_snapshot_put_is_resolved(s3_store: Any, error: Any, applied: bool) -> None:
    uri = s3_store.uri()
    lakefmt.create_table(uri, SCHEMA, storage_options=s3_store.storage_options).append(_rows([0]))
    on = _once(_snapshot_put, error)
    snap = _table(_faulty(file_io_for(uri, s3_store.storage_options), on, after=applied)).append(_rows([1]))
    assert on.fired.is_set() and snap is not None and snap.id == 2  # type: ignore[attr-defined]
    _assert_whole(uri, s3_store.storage_options, [0, 1])


@pytest.mark.s3
def test_a_connection_error_on_the_hint_after_the_publish_is_not_a_failure(s3_store: Any) -> None:
    uri = s3_store.uri()
    lakefmt.create_table(uri, SCHEMA, options=RETAIN, storage_options=s3_store.storage_options).append(_rows([0]))
    on = _once(lambda op, path: op == "write" and path == layout.LATEST, _connection_errors()[0])
    snap = _table(_faulty(file_io_for(uri, s3_store.storage_options), on)).append(_rows([1]))
    assert on.fired.is_set() and snap is not None  # type: ignore[attr-defined]
    _assert_whole(uri, s3_store.storage_options, [0, 1])


@pytest.mark.s3
def test_a_publish_whose_outcome_stays_unknown_keeps_its_files(s3_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt of the snapshot PUT ends in a dropped connection. From outside, that cannot be told from
    PUTs that landed (or are still in flight), so the outcome is unknown: CommitStateUnknownError, nothing is
    deleted, and the retry that real jobs do (same user, same identifier) settles it, exactly once."""
    uri = s3_store.uri()
    opts = s3_store.storage_options
    lakefmt.create_table(uri, SCHEMA, storage_options=opts).append(_rows([0]))
    monkeypatch.setattr(FileIO, "PUBLISH_ATTEMPTS", 3)
    always = _connection_errors()[0]
    io = _faulty(file_io_for(uri, opts), lambda op, path: always() if _snapshot_put(op, path) else None, after=False)
    t = _table(io)
    w = t.new_writer()
    w.write(_rows([1]))
    msg = w.prepare_commit()
    committer = t.new_committer("job")
    with pytest.raises(CommitStateUnknownError, match="do not delete"):
        committer.commit([msg], identifier=1)
    assert committer.may_have_landed
    # a one-off append with the same fault: unknown, and its files stay (orphan-clean's job if it did not land)
    before = {f.path for f in file_io_for(uri, opts).walk()}
    with pytest.raises(CommitStateUnknownError):
        t.append(_rows([2]))
    after = {f.path for f in file_io_for(uri, opts).walk()}
    assert any(p.endswith(".parquet") for p in after - before)
    # the job's retry through a healthy store lands exactly once
    good = lakefmt.open_table(uri, storage_options=opts)
    assert good.new_committer("job").commit([msg], identifier=1) is not None
    assert good.new_committer("job").commit([msg], identifier=1) is None
    _assert_whole(uri, opts, [0, 1])


# -- 8. a commit racing another commit plus retain_max=1 expiration -----------------------------------------
def test_a_commit_whose_base_snapshot_expires_under_it_retries(store: Any) -> None:
    uri = store.uri()
    opts = store.storage_options
    lakefmt.create_table(uri, SCHEMA, options=RETAIN, storage_options=opts).append(_rows([0]))
    other = lakefmt.open_table(uri, storage_options=opts)
    raced = threading.Event()

    class Racing(type(file_io_for(uri, opts))):  # type: ignore[misc]
        def read(self, rel: str) -> bytes:
            if rel.startswith("manifest/manifest-list-") and not raced.is_set():
                raced.set()  # between reading the latest snapshot and its lists: another commit + expiration
                other.append(_rows([1]))
            return super().read(rel)

    t = _table(Racing(uri, opts))
    snap = t.new_committer("racer").commit([_message(t, [2])], identifier=1)
    assert raced.is_set() and snap is not None and snap.id == 3
    _assert_whole(uri, opts, [0, 1, 2])


def _message(t: lakefmt.Table, ids: list[int]) -> lakefmt.CommitMessage:
    w = t.new_writer()
    w.write(_rows(ids))
    return w.prepare_commit()


# -- an id freed by a concurrent expiration -----------------------------------------------------------------
def _slowed_by_two_commits_and_expiry(uri: str, opts: dict[str, Any]) -> lakefmt.Table:
    """A Table whose commit is overtaken, between reading the latest snapshot and publishing, by two commits of
    another writer, whose automatic expiration (retain 1) deletes the snapshot this commit builds on and the
    one that took this commit's id."""
    other = lakefmt.open_table(uri, storage_options=opts)
    fired = threading.Event()

    class Slow(type(file_io_for(uri, opts))):  # type: ignore[misc]
        def write(self, rel: str, data: bytes, *, sync: bool = True) -> None:
            super().write(rel, data, sync=sync)
            if rel.startswith("manifest/manifest-list-") and not fired.is_set():
                fired.set()
                other.append(_rows([2]))
                other.append(_rows([3]))

    return _table(Slow(uri, opts))


def test_a_commit_whose_id_an_expiration_freed_is_not_reported_as_landed(store: Any) -> None:
    uri = store.uri()
    opts = store.storage_options
    lakefmt.create_table(uri, SCHEMA, options=RETAIN, storage_options=opts).append(_rows([1]))
    slow = _slowed_by_two_commits_and_expiry(uri, opts)
    committer = slow.new_committer("job")
    with pytest.raises(CommitStateUnknownError, match="freed by an expiration"):
        committer.commit(_message(slow, [100]), identifier=1)
    assert committer.may_have_landed
    t = lakefmt.open_table(uri, storage_options=opts)
    assert _ids(t) == [1, 2, 3]  # the other writer's rows are intact; 100 is not in the history
    # the job's retry (same user and identifier) lands it, exactly once
    assert t.new_committer("job").commit(_message(t, [100]), identifier=1) is not None
    assert t.new_committer("job").commit(_message(t, [100]), identifier=1) is None
    assert _ids(lakefmt.open_table(uri, storage_options=opts)) == [1, 2, 3, 100]


def test_a_one_off_append_whose_id_an_expiration_freed_raises_unknown(local_store: Any) -> None:
    uri = local_store.uri()
    lakefmt.create_table(uri, SCHEMA, options=RETAIN).append(_rows([1]))
    slow = _slowed_by_two_commits_and_expiry(uri, {})
    with pytest.raises(CommitStateUnknownError):
        slow.append(_rows([100]))
    assert _ids(lakefmt.open_table(uri)) == [1, 2, 3]
