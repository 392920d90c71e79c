"""What maintenance keeps beyond the retained snapshots, without holding any snapshot back.

* **Tags** (:mod:`lakefmt.meta.tags`): every live tag (and every restore's pin) keeps its snapshot's manifest
  lists, their manifests, the data files live in it and the changelog files it stored, also after the snapshot
  file itself expired. Unlike a
  consumer's hold, a tag does not stop the expiration of other snapshots (Paimon's semantics): a month-end tag
  never stops a stream's table from expiring. A tag past its ``retain`` time keeps nothing. Deleting a tag
  leaves the files only it kept to orphan-clean: expiration has already passed them.
* **Paths added again by a restore** (:mod:`lakefmt.commit.restore`): the one case where a data file DELETEd by
  one snapshot is live again in a later one. Expiration deletes the files DELETEd in the expired window; it
  spares those that a restore after the window's first snapshot ADDs again (restores are rare: reading their
  delta manifests is cheap).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lakefmt.commit.restore import is_restore
from lakefmt.errors import CorruptMetadataError, PathOutsideTableError
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot, Tag, layout

__all__ = ["Kept", "changelog_paths", "readded_paths", "tag_references"]


@dataclass(frozen=True)
class Kept:
    """Files kept on behalf of tags (and of restores): data file paths, manifest and manifest-list names."""

    data: frozenset[str] = frozenset()
    manifests: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    tags: tuple[Tag, ...] = field(default=())

    def paths(self) -> set[str]:
        """Every kept file as a path relative to the root."""
        out = set(self.data)
        out.update(layout.manifest_path(n) for n in self.manifests)
        out.update(layout.manifest_list_path(n) for n in self.lists)
        return out


def tag_references(store: MetaStore, tags: Sequence[Tag], *, data: bool = True) -> Kept:
    """What ``tags`` keep: each one's snapshot's manifest lists, their manifests, and (``data``) the data files live
    in it. A tag whose metadata is missing raises :class:`MissingMetadataError`: maintenance stops rather than
    guess. Tags of one snapshot are read once."""
    files: set[str] = set()
    manifests: set[str] = set()
    lists: set[str] = set()
    seen: set[tuple[int, str]] = set()
    for tag in tags:
        snap = tag.snapshot
        if (snap.id, snap.nonce) in seen:
            continue
        seen.add((snap.id, snap.nonce))
        try:
            for name in snap.manifest_lists:
                lists.add(name)
                manifests.update(m.file_name for m in store.manifest_list(name))
            if data:
                files.update(ents.paths(ents.live_entries(store, snap)))
                files.update(changelog_paths(store, snap))
        except (CorruptMetadataError, PathOutsideTableError) as exc:  # name the tag: it is the way out
            what = "a restore's pin" if tag.pin else f"tag {tag.name!r}"
            raise type(exc)(
                f"{what} (snapshot {snap.id}) cannot be read: {exc}. Maintenance deletes nothing while a tag cannot "
                "be read (it cannot know which files the tag keeps)"
                + ("" if tag.pin else f": delete tag {tag.name!r} (lakefmt tag delete URI NAME, or Table.delete_tag)")
            ) from exc
    return Kept(frozenset(files), frozenset(manifests), frozenset(lists), tuple(tags))


def changelog_paths(store: MetaStore, snap: Snapshot) -> dict[str, int]:
    """The changelog files ``snap`` stored (``changelog-producer=lookup``) and their sizes, paths checked; none
    when it stored none."""
    if snap.changelog_manifest_list is None:
        return {}
    metas = store.manifest_list(snap.changelog_manifest_list)
    if not metas:
        return {}
    added = ents.adds(ents.concat_entries([store.manifest(m.file_name) for m in metas]))
    ents.check_changelog_paths(added, f"the changelog manifests of snapshot {snap.id}")
    return dict(zip(ents.paths(added), added.column(ents.FILE_SIZE).to_pylist(), strict=True))


def readded_paths(store: MetaStore, snapshots: Iterable[Snapshot]) -> set[str]:
    """The data file paths the restores among ``snapshots`` ADD (again)."""
    out: set[str] = set()
    for snap in snapshots:
        if not is_restore(snap):
            continue
        for meta in store.manifest_list(snap.delta_manifest_list):
            if meta.num_added_files:
                added = ents.adds(store.manifest(meta.file_name))
                ents.check_data_paths(added, f"a manifest of snapshot {snap.id}")
                out.update(ents.paths(added))
    return out
