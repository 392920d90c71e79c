"""Orphan-file removal: delete files under the root that no retained snapshot references and that are older
than a threshold (so files of a commit still in flight are never touched).

The listing is taken *before* the references are read: a commit that lands in between references only files
that are young (written just before it), which the age threshold protects. Referenced: every schema file, the
hints, every file directly in ``consumer/`` or ``tag/`` but temp files (consumer records and tags, whatever their
content or name: a record is the consumer's to delete, a tag its owner's or expiration's, never orphan-clean's),
every retained snapshot file, its manifest lists and their manifests, every data file live in any retained
snapshot (live in the earliest, or added by a later one), and the manifest lists, manifests and live data files
of every tagged snapshot (tags and restores' pins not past their ``retain`` time; the tags are read before the
snapshots and again after them). Only files under the root are ever listed (symlinks are not followed, and a
symlink is deleted as a link, never its target).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence

from lakefmt.errors import LakefmtError, MissingMetadataError
from lakefmt.io import FileIO
from lakefmt.io.paths import is_temp
from lakefmt.maintenance.keep import changelog_paths, tag_references
from lakefmt.maintenance.report import MaintenanceReport, Progress, classify
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.meta.tags import list_tags
from lakefmt.spec import Tag, layout
from lakefmt.units import DEFAULT_ORPHAN_OLDER_THAN_MS

__all__ = ["is_referenced", "nested_table_roots", "referenced_files", "remove_orphan_files", "unreferenced"]

DEFAULT_OLDER_THAN_MS = DEFAULT_ORPHAN_OLDER_THAN_MS  #: the default age threshold (lakefmt.options)

_NESTED_SCHEMA = re.compile(r"^(.+)/schema/schema-\d+$")


def referenced_files(store: MetaStore) -> set[str]:
    """Paths (relative to the root) of every file the retained snapshots need.

    The EARLIEST hint is trusted only as far as the listing confirms it: snapshots below it that are still
    listed (an expiration in progress, or a stale or garbage hint) keep everything of theirs that can still be
    read. So a wrong hint never costs a snapshot its files; a half-expired snapshot costs a rerun of expire."""
    refs = {layout.LATEST, layout.EARLIEST}
    refs.update(layout.schema_path(i) for i in store.schema_ids())
    refs.update(
        f"{layout.CONSUMER_DIR}/{name}" for name in store.io.list(layout.CONSUMER_DIR) if not is_temp(name)
    )
    refs.update(f"{layout.TAG_DIR}/{name}" for name in store.io.list(layout.TAG_DIR) if not is_temp(name))
    tags = list_tags(store.io).check().live(int(time.time() * 1000))  # an unreadable tag: delete nothing
    refs.update(tag_references(store, tags).paths())
    latest = store.latest_snapshot(strict=True)  # never a stale answer before deleting
    if latest is None:
        return _tags_since(store, refs, tags)
    ids = [i for i in store.snapshot_ids() if i <= latest.id]
    hint = store.read_hint(layout.EARLIEST) or 0  # below it: being (or already) expired, perhaps half-way
    doubtful = [i for i in ids if i < hint]
    trusted = [i for i in ids if i >= hint] or [latest.id]
    for sid in doubtful:
        _refs_of_half_expired(store, sid, refs)
    first = True
    for sid in trusted:
        snap = store.try_snapshot(sid)
        if snap is None:
            continue  # expired meanwhile
        refs.add(layout.snapshot_path(sid))
        for name in snap.manifest_lists:
            refs.add(layout.manifest_list_path(name))
            refs.update(layout.manifest_path(m.file_name) for m in store.manifest_list(name))
        refs.update(changelog_paths(store, snap))
        if first:
            refs.update(ents.paths(ents.live_entries(store, snap)))
            first = False
        else:
            for m in store.manifest_list(snap.delta_manifest_list):
                if m.num_added_files:
                    added = ents.adds(store.manifest(m.file_name))
                    ents.check_data_paths(added, f"a manifest of snapshot {sid}")
                    refs.update(ents.paths(added))
    return _tags_since(store, refs, tags)


def is_referenced(path: str, refs: set[str]) -> bool:
    """Whether ``path`` is one of ``refs`` (:func:`referenced_files`), or the key index of one (it goes with its
    data file: format spec 21.5)."""
    return path in refs or layout.data_path_of_key_index(path) in refs


def unreferenced(paths: Iterable[str], refs: set[str]) -> set[str]:
    """The ``paths`` that :func:`is_referenced` does not keep."""
    return {p for p in paths if not is_referenced(p, refs)}


def _tags_since(store: MetaStore, refs: set[str], seen: Sequence[Tag]) -> set[str]:
    """``refs`` with what the tags created since ``seen`` was read keep: the tags are read again after the
    snapshots, as a tag created meanwhile on a snapshot that an expiration then removed (sparing the tag's files)
    is in neither the first reading of the tags nor the snapshots."""
    known = {(t.name, t.pin, t.nonce) for t in seen}
    now = int(time.time() * 1000)
    new = [t for t in list_tags(store.io).check().live(now) if (t.name, t.pin, t.nonce) not in known]
    if new:
        refs.update(layout.pin_path(t.name) if t.pin else layout.tag_path(t.name) for t in new)
        refs.update(tag_references(store, new).paths())
    return refs


def _refs_of_half_expired(store: MetaStore, sid: int, refs: set[str]) -> None:
    """Everything a snapshot below the EARLIEST hint still names and that can be read: its file, its lists,
    their manifests and every data file those list (ADD or DELETE). Missing pieces are skipped: expire deletes
    them in an order that keeps a rerun able to finish."""
    try:
        snap = store.try_snapshot(sid)
    except LakefmtError:
        refs.add(layout.snapshot_path(sid))  # unreadable: keep it, and do not guess what it names
        return
    if snap is None:
        return
    refs.add(layout.snapshot_path(sid))
    for name in snap.manifest_lists:
        refs.add(layout.manifest_list_path(name))
        try:
            metas = store.manifest_list(name)
        except MissingMetadataError:
            continue
        for m in metas:
            refs.add(layout.manifest_path(m.file_name))
            try:
                entries = store.manifest(m.file_name)
            except MissingMetadataError:
                continue
            ents.check_data_paths(entries, f"a manifest of snapshot {sid}")
            refs.update(ents.paths(entries))


def nested_table_roots(paths: Iterable[str]) -> set[str]:
    """Folders under the root that hold a table of their own (a ``<folder>/schema/schema-<n>`` file)."""
    roots = set()
    for path in paths:
        m = _NESTED_SCHEMA.match(path)
        if m is not None:
            roots.add(m.group(1))
    return roots


def remove_orphan_files(
    io: FileIO,
    store: MetaStore,
    *,
    older_than_ms: int = DEFAULT_OLDER_THAN_MS,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MaintenanceReport:
    """Delete unreferenced files older than ``older_than_ms``; return what was (or would be) deleted."""
    if older_than_ms < 0:
        raise ValueError("older_than must not be negative")
    store.latest_schema()  # NotATableError: never clean a folder that is not a table
    listing = list(io.walk())
    horizon = int(time.time() * 1000) - older_than_ms
    refs = referenced_files(store)
    report = MaintenanceReport("orphan-clean", dry_run)
    # another table inside this one's root (created before that was refused) is never cleaned as orphans
    nested = tuple(f"{r}/" for r in nested_table_roots(f.path for f in listing))
    candidates = [
        f
        for f in listing
        if not is_referenced(f.path, refs)
        and f.mtime_ms <= horizon
        and not f.path.startswith(nested)
    ]
    for done, f in enumerate(candidates, 1):
        report.add(classify(f.path), f.path, f.size)
        if not dry_run:
            io.delete(f.path)
        if progress:
            progress(done, len(candidates), f.path)
    return report
