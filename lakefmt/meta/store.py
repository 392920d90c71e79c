"""Reading and locating a table's metadata files through a FileIO: schemas, snapshots, manifest lists,
manifests. Shared by the writer, the committer, the planner and maintenance. Immutable files are cached by
name, and a snapshot's live entries by its manifest lists, least recently used out first
(:class:`lakefmt.cache.BoundedCache`)."""

from __future__ import annotations

import contextlib

import pyarrow as pa

from lakefmt.cache import BoundedCache
from lakefmt.errors import (
    CorruptMetadataError,
    InvalidSnapshotIdError,
    MissingMetadataError,
    NotATableError,
    SnapshotNotFoundError,
)
from lakefmt.io import FileIO
from lakefmt.io.paths import check_name
from lakefmt.spec import ManifestFileMeta, Snapshot, TableSchema, layout
from lakefmt.spec.manifest import decode_manifest
from lakefmt.spec.manifest_list import decode_manifest_list

__all__ = ["MetaStore"]


class MetaStore:
    """Metadata access for one table root. Immutable files (manifests, lists) are cached by name."""

    MANIFEST_CACHE_SIZE = 256
    LIVE_CACHE_SIZE = 8  #: snapshots whose live entries are kept (:meth:`live_of`)
    LIVE_CACHE_BYTES = 64 << 20  #: and at most this many bytes of them
    REMEMBER_WRITTEN_MAX = 1 << 20  #: bytes: manifests written here and larger than this are not cached

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._reset()

    def _reset(self) -> None:
        # immutable files, decoded, shared by every thread using this table (least recently used out first)
        self._manifests: BoundedCache[str, pa.Table] = BoundedCache(self.MANIFEST_CACHE_SIZE)
        self._lists: BoundedCache[str, list[ManifestFileMeta]] = BoundedCache(self.MANIFEST_CACHE_SIZE)
        # a snapshot's live entries, by its two manifest lists
        self._live: BoundedCache[tuple[str, str], pa.Table] = BoundedCache(
            self.LIVE_CACHE_SIZE, self.LIVE_CACHE_BYTES, lambda t: t.nbytes
        )
        self._schemas: dict[int, TableSchema] = {}
        self._latest_schema_id: int | None = None
        self._known_latest: Snapshot | None = None  # the newest snapshot this store has seen or published

    def __getstate__(self) -> dict[str, object]:
        return {"io": self.io}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.io = state["io"]  # type: ignore[assignment]
        self._reset()  # caches are rebuilt where the store lands, never shipped

    # -- schemas ----------------------------------------------------------------------------------------
    def schema_ids(self) -> list[int]:
        ids = (layout.parse_numbered(n, "schema") for n in self.io.list(layout.SCHEMA_DIR))
        return sorted(i for i in ids if i is not None)

    def schema(self, schema_id: int) -> TableSchema:
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        path = layout.schema_path(schema_id)
        try:
            data = self.io.read(path)
        except FileNotFoundError as exc:
            raise MissingMetadataError(f"schema {schema_id} is missing ({path})") from exc
        schema = TableSchema.from_json(data, what=f"schema file {path}")
        if schema.id != schema_id:
            raise CorruptMetadataError(f"schema file {path} holds schema {schema.id}: the metadata is corrupt")
        self._schemas[schema_id] = schema  # schema files are immutable
        return schema

    def latest_schema(self, refresh: bool = False) -> TableSchema:
        """The newest schema. Listed once per store (a table object is bound to the schema it opened with,
        as in Paimon), again with ``refresh=True`` or when a snapshot names a newer schema."""
        if self._latest_schema_id is None or refresh:
            ids = self.schema_ids()
            if not ids:
                raise NotATableError(f"{self.io.uri} is not a lakefmt table (no {layout.SCHEMA_DIR}/schema-0)")
            self._latest_schema_id = ids[-1]
        return self.schema(self._latest_schema_id)

    def remember_schema(self, schema: TableSchema) -> None:
        """Record a schema this process just published: it is the newest from now on (for this store)."""
        self._schemas[schema.id] = schema
        if self._latest_schema_id is None or schema.id > self._latest_schema_id:
            self._latest_schema_id = schema.id

    def schema_for(self, snap: Snapshot | None) -> TableSchema:
        """The schema to commit on top of ``snap``: the newest known, or the snapshot's if that is newer.
        :class:`MissingMetadataError` if the schema ``snap`` records is gone (a commit on top of it would record
        an older schema, and a schema change would reuse the field ids it assigned)."""
        schema = self.latest_schema()
        if snap is not None and snap.schema_id > schema.id:
            schema = self.latest_schema(refresh=True)
            if snap.schema_id > schema.id:
                try:
                    schema = self.schema(snap.schema_id)
                except MissingMetadataError as exc:
                    raise MissingMetadataError(
                        f"snapshot {snap.id} records schema {snap.schema_id}, but the table's newest schema file is "
                        f"schema-{schema.id}: {exc}"
                    ) from exc
        return schema

    # -- snapshots --------------------------------------------------------------------------------------
    def snapshot_ids(self) -> list[int]:
        """Ids of the snapshot files present, ascending (a fresh listing)."""
        ids = (layout.parse_numbered(n, "snapshot") for n in self.io.list(layout.SNAPSHOT_DIR))
        return sorted(i for i in ids if i is not None)

    def try_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot, or None if its file does not exist (a probe is one read, never a cached exists)."""
        path = layout.snapshot_path(snapshot_id)
        try:
            data = self.io.read(path)
        except FileNotFoundError:
            return None
        snap = Snapshot.from_json(data, what=f"snapshot file {path}")
        if snap.id != snapshot_id:  # e.g. an operator's copy of another snapshot's file: probing would loop
            raise CorruptMetadataError(
                f"snapshot file {path} holds snapshot id {snap.id}; a snapshot file's id must match its name"
            )
        return snap

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """One snapshot; :class:`SnapshotNotFoundError` if it never existed or has expired."""
        if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int):
            raise TypeError(f"a snapshot id must be a whole number, got {snapshot_id!r}")
        if snapshot_id < 1:
            raise InvalidSnapshotIdError(f"snapshot id {snapshot_id} is invalid: snapshot ids start at 1")
        snap = self.try_snapshot(snapshot_id)
        if snap is None:
            ids = self.snapshot_ids()
            if ids and snapshot_id < ids[0]:
                raise SnapshotNotFoundError(
                    f"snapshot {snapshot_id} has expired; the earliest retained snapshot is {ids[0]}"
                )
            span = f"snapshots {ids[0]}..{ids[-1]}" if ids else "no snapshots"
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist (the table has {span})")
        return snap

    def expiring(self, snapshot_id: int) -> str | None:
        """Why snapshot ``snapshot_id`` is expired or being expired (a sentence), or None while it is retained: its
        file is gone from below the earliest snapshot, or an expiration announced an earliest snapshot past it (the
        ``EARLIEST`` hint, believed when the snapshot it names exists: a garbage hint names nothing)."""
        if self.try_snapshot(snapshot_id) is None:
            ids = self.snapshot_ids()
            if not ids or snapshot_id < ids[0]:
                first = f"; the earliest retained snapshot is {ids[0]}" if ids else ""
                return f"snapshot {snapshot_id} has expired{first}"
            return None
        hint = self.read_hint(layout.EARLIEST)
        if hint is None or snapshot_id >= hint or self.try_snapshot(hint) is None:
            return None
        return (
            f"snapshot {snapshot_id} has expired: an expiration that keeps snapshots {hint} and later is deleting "
            "its files (or was interrupted, and running expire again finishes it)"
        )

    def read_hint(self, path: str) -> int | None:
        """The id a hint file holds, or None if it is missing or not a positive number. A hint is only a
        starting point: callers check it against the snapshot files that exist."""
        try:
            text = self.io.read(path).decode("ascii", "replace").strip()
        except FileNotFoundError:
            return None
        if not (text.isascii() and text.isdigit()) or len(text) > 19:
            return None
        return int(text) or None

    def all_schemas(self) -> list[TableSchema]:
        """Every schema the table has had, oldest first (a fresh listing)."""
        ids = self.schema_ids()
        if ids:
            self.latest_schema(refresh=True)
        return [self.schema(i) for i in ids]

    def last_identifier(self, commit_user: str) -> int | None:
        """The last identifier ``commit_user`` committed, as the latest snapshot remembers it."""
        latest = self.latest_snapshot()
        last = latest.commit_users.get(commit_user) if latest is not None else None
        return last[0] if last else None

    def retained_snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first (one expiring meanwhile is left out; the latest is always in)."""
        out = []
        ids = self.snapshot_ids()
        hint = self.read_hint(layout.EARLIEST)
        if hint is not None and hint in ids:  # below it: being expired, or half-expired by an interrupted run
            ids = [i for i in ids if i >= hint]
        for sid in ids:
            snap = self.try_snapshot(sid)
            if snap is not None:
                out.append(snap)
        latest = self.latest_snapshot()
        if latest is not None and (not out or out[-1].id < latest.id):
            out.extend(self.snapshot(i) for i in range(out[-1].id + 1 if out else latest.id, latest.id + 1))
        return out

    def latest_snapshot(self, *, strict: bool = False) -> Snapshot | None:
        """The latest snapshot: start from the LATEST hint, then probe forward until a snapshot is absent.
        A missing, stale or garbage hint costs a listing.

        When the hint names the newest snapshot this store already holds (it published it, or read it), the
        probe starts from that one without reading it again: on an object store, a long-lived writer finds
        the latest snapshot in two GETs (the hint and one probe). That answer can be stale in one case: the
        hint was set back to an old id (a hint PUT applied late) *and* the snapshots after it were expired.
        ``strict=True`` starts from the listing instead (one LIST): maintenance, which deletes what the latest
        snapshot does not need, always asks for it."""
        current: Snapshot | None = None
        if not strict:
            hint = self.read_hint(layout.LATEST)
            known = self._known_latest
            current = known if known is not None and hint == known.id else (self.try_snapshot(hint) if hint else None)
        if current is None:
            ids = self.snapshot_ids()
            if not ids:
                return None
            current = self.snapshot(ids[-1])
        while True:  # ends: every step reads a file whose id is one more than the last (try_snapshot checks)
            nxt = self.try_snapshot(current.id + 1)
            if nxt is None:
                self._known_latest = current
                return current
            current = nxt

    def remember_published(self, snap: Snapshot) -> None:
        """Record a snapshot this process just published (the next commit starts its probe there)."""
        if self._known_latest is None or snap.id > self._known_latest.id:
            self._known_latest = snap

    def write_hint(self, path: str, snapshot_id: int) -> None:
        """Best effort: a hint that fails to update is only stale, and stale hints are harmless. Any error
        (a dropped connection is a ``BotoCoreError``, not an ``OSError``) is swallowed; an interrupt is not."""
        with contextlib.suppress(Exception):
            self.io.write(path, str(snapshot_id).encode(), sync=False)  # a lost hint is only stale

    # -- manifests --------------------------------------------------------------------------------------
    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        cached = self._lists.get(name)
        if cached is not None:
            return cached
        path = layout.manifest_list_path(check_name(name, "a snapshot"))
        metas = decode_manifest_list(self._read_referenced(path, "manifest list"), what=f"manifest list {path}")
        for m in metas:
            check_name(m.file_name, f"manifest list {path}")
        self._lists.put(name, metas)
        return metas

    def remember_manifest(self, name: str, data: bytes) -> None:
        """Cache a small manifest this process wrote, decoded from the very bytes written (a later minor merge
        in this process then reads nothing back). Large ones are left to the read path."""
        if len(data) <= self.REMEMBER_WRITTEN_MAX:
            self._manifests.put(name, decode_manifest(data, what=f"manifest {name}"))

    def forget_manifest(self, name: str) -> None:
        """Drop a manifest from the cache (it was deleted: a read must find it missing)."""
        self._manifests.pop(name)

    def remember_list(self, name: str, metas: list[ManifestFileMeta]) -> None:
        """Cache a manifest list this process wrote (immutable, so the next commit need not read it back)."""
        self._lists.put(name, list(metas))

    def snapshot_manifests(self, snap: Snapshot) -> list[ManifestFileMeta]:
        """Every manifest of a snapshot: its base list (the table before it) then its delta list."""
        return self.manifest_list(snap.base_manifest_list) + self.manifest_list(snap.delta_manifest_list)

    def live_of(self, snap: Snapshot) -> pa.Table | None:
        """The live entries of ``snap`` remembered by :meth:`remember_live`, or None. A snapshot's live entries
        depend only on its two manifest lists, which are immutable and named uniquely: they are the key."""
        return self._live.get(_lists_of(snap))

    def remember_live(self, snap: Snapshot, live: pa.Table) -> None:
        """Keep the live entries of ``snap`` (every one of its files, checked) for the next plan of the same
        snapshot: a table read again and again plans once. Bounded by count and by bytes (a table's entries larger
        than a quarter of the bound are not kept)."""
        if live.nbytes <= self.LIVE_CACHE_BYTES // 4:
            self._live.put(_lists_of(snap), live)

    def manifest(self, name: str) -> pa.Table:
        cached = self._manifests.get(name)
        if cached is not None:
            return cached
        path = layout.manifest_path(check_name(name, "a manifest list"))
        table = decode_manifest(self._read_referenced(path, "manifest"), what=f"manifest {path}")
        self._manifests.put(name, table)
        return table

    def _read_referenced(self, path: str, what: str) -> bytes:
        """The bytes of a metadata file that committed metadata names: its absence means the table is damaged."""
        try:
            return self.io.read(path)
        except FileNotFoundError as exc:
            raise MissingMetadataError(f"{what} {path} is missing") from exc


def _lists_of(snap: Snapshot) -> tuple[str, str]:
    """A snapshot's two manifest lists: what its live entries depend on, immutable and uniquely named."""
    return (snap.base_manifest_list, snap.delta_manifest_list)
