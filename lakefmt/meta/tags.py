"""The tag store: one JSON file per tag under ``tag/`` (``tag/tag-<name>``), created exclusively and never
changed, and the restores' pins beside them (``tag/pin-<id>``). Reading, creating and deleting them through a
FileIO; what maintenance makes of them lives in :mod:`lakefmt.maintenance.keep`."""

from __future__ import annotations

from dataclasses import dataclass

from lakefmt.errors import (
    CorruptMetadataError,
    InvalidOptionError,
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UnsupportedFormatVersionError,
)
from lakefmt.io import FileIO
from lakefmt.meta.store import MetaStore
from lakefmt.spec import Snapshot, Tag, layout
from lakefmt.spec.consumer import MAX_SNAPSHOT_ID
from lakefmt.spec.instants import format_instant
from lakefmt.spec.snapshot import check_snapshot_id
from lakefmt.spec.tag import check_tag_name, parse_pin_name, parse_tag_name
from lakefmt.units import Duration, duration_ms

__all__ = [
    "TagListing",
    "UnreadableTag",
    "check_retain",
    "create_tag",
    "delete_pin",
    "delete_tag",
    "delete_tag_if_unchanged",
    "list_tags",
    "read_tag",
    "tag_snapshot",
    "tagged_snapshot",
    "write_pin",
]


@dataclass(frozen=True)
class UnreadableTag:
    """A tag (or pin) file that exists but cannot be used: empty, truncated, malformed, or from a newer format."""

    name: str
    path: str  #: relative to the root
    error: str
    newer_format: bool = False


@dataclass(frozen=True)
class TagListing:
    """Every tag file of a table: the readable tags (by name), the restores' pins, and the unreadable files."""

    tags: tuple[Tag, ...] = ()
    pins: tuple[Tag, ...] = ()
    unreadable: tuple[UnreadableTag, ...] = ()

    def check(self) -> TagListing:
        """The listing itself; :class:`CorruptMetadataError` naming every unreadable file and the way out
        (:class:`UnsupportedFormatVersionError` if one is from a newer format version). Maintenance cannot
        know which files an unreadable tag keeps, so it deletes nothing while one is there."""
        if self.unreadable:
            errors = "; ".join(u.error for u in self.unreadable)
            names = ", ".join(repr(u.name) for u in self.unreadable)
            error = (
                UnsupportedFormatVersionError if any(u.newer_format for u in self.unreadable) else CorruptMetadataError
            )
            raise error(
                f"{errors}. Maintenance deletes nothing while a tag cannot be read (it cannot know which files "
                f"the tag keeps): repair it, or delete tag {names} (lakefmt tag delete URI NAME, or "
                "Table.delete_tag)"
            )
        return self

    def live(self, now_ms: int) -> tuple[Tag, ...]:
        """The tags and pins that keep their snapshot's files at ``now_ms`` (those not past their ``retain``)."""
        return tuple(t for t in (*self.tags, *self.pins) if not t.expired(now_ms))

    def expired(self, now_ms: int) -> tuple[Tag, ...]:
        """The tags and pins past their ``retain`` at ``now_ms``: they keep nothing, and expire deletes them."""
        return tuple(t for t in (*self.tags, *self.pins) if t.expired(now_ms))


def _path(tag: Tag) -> str:
    return layout.pin_path(tag.name) if tag.pin else layout.tag_path(tag.name)


def _read(io: FileIO, path: str, name: str, pin: bool) -> Tag | None:
    try:
        data = io.read(path)
    except FileNotFoundError:
        return None
    tag = Tag.from_json(data, what=f"tag file {path}", pin=pin)
    if tag.name != name:  # e.g. an operator's copy of another tag's file
        raise CorruptMetadataError(f"tag file {path} holds tag {tag.name!r}; a tag file's name must match its tag")
    return tag


def read_tag(io: FileIO, name: str) -> Tag | None:
    """One tag, or None if the table has no tag ``name`` (expired ones too: the caller decides);
    :class:`CorruptMetadataError` (or :class:`UnsupportedFormatVersionError`) if its file cannot be used."""
    return _read(io, layout.tag_path(check_tag_name(name)), name, pin=False)


def list_tags(io: FileIO) -> TagListing:
    """Every tag and pin (one LIST, then one read each). Other names in ``tag/`` (temp files of interrupted
    writes) are skipped; a tag file that cannot be read is listed as unreadable, never skipped."""
    tags: list[Tag] = []
    pins: list[Tag] = []
    bad: list[UnreadableTag] = []
    for file_name in io.list(layout.TAG_DIR):
        name, pin = parse_tag_name(file_name), False
        if name is None:
            name, pin = parse_pin_name(file_name), True
        if name is None:
            continue
        path = f"{layout.TAG_DIR}/{file_name}"
        try:
            tag = _read(io, path, name, pin)
        except (CorruptMetadataError, UnsupportedFormatVersionError) as exc:
            bad.append(UnreadableTag(name, path, str(exc), isinstance(exc, UnsupportedFormatVersionError)))
            continue
        if tag is not None:  # deleted since the listing
            (pins if pin else tags).append(tag)
    return TagListing(tuple(sorted(tags, key=lambda t: t.name)), tuple(sorted(pins, key=lambda t: t.name)), tuple(bad))


def check_retain(retain: Duration) -> int:
    """A tag's ``retain`` (a ``timedelta``, a duration string such as ``"30d"``, or seconds) in milliseconds:
    :class:`InvalidOptionError` naming it unless it is a positive duration whose milliseconds fit in a signed
    64-bit integer (a tag file with another would be refused by its own reader and stop maintenance)."""
    try:
        ms = duration_ms(retain, "retain")
    except InvalidOptionError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:  # NaN, infinity, a negative number, a list, a bool
        raise InvalidOptionError(
            f"retain must be a positive duration (a timedelta, a string like '30d', or seconds), got {retain!r}: {exc}"
        ) from None
    _check_retain_ms(ms, repr(retain))
    return ms


def _check_retain_ms(ms: int, given: str) -> None:
    if not 0 < ms <= MAX_SNAPSHOT_ID:
        raise InvalidOptionError(
            f"retain must be a positive duration of at most {MAX_SNAPSHOT_ID} ms (about 292 million years), got {given}"
        )


def create_tag(io: FileIO, tag: Tag, *, sync: bool = True) -> None:
    """Create ``tag``'s file exclusively: :class:`TagAlreadyExistsError` if the name is taken (of two racing
    creates of one name, exactly one wins). :class:`InvalidOptionError` for a ``retain`` its own reader would
    refuse (not a positive number of milliseconds that fits in a signed 64-bit integer): such a file would stop
    maintenance."""
    check_tag_name(tag.name)
    if tag.retain_millis is not None:
        _check_retain_ms(tag.retain_millis, f"{tag.retain_millis} ms")
    if not io.publish(_path(tag), tag.to_json(), sync=sync):
        raise TagAlreadyExistsError(
            f"{io.uri} already has a tag {tag.name!r}; delete it first to give the name to another snapshot"
        )


def write_pin(io: FileIO, pin: Tag, *, sync: bool = True) -> None:
    """Create a restore's pin (its id is fresh: a taken one is an error)."""
    if not pin.pin:
        raise ValueError("write_pin takes a pin (Tag with pin=True)")
    create_tag(io, pin, sync=sync)


def delete_tag(io: FileIO, name: str) -> None:
    """Delete a tag's file (a missing one is not an error here; the caller decides)."""
    io.delete(layout.tag_path(check_tag_name(name)))


def delete_pin(io: FileIO, pin_id: str) -> None:
    """Delete a restore's pin (best effort for the caller: a pin left behind expires by its ``retain``)."""
    io.delete(layout.pin_path(check_tag_name(pin_id)))


def delete_tag_if_unchanged(io: FileIO, tag: Tag) -> bool:
    """Delete a tag's (or pin's) file only if it still holds exactly ``tag`` (not deleted and created anew for
    another snapshot since it was read); whether it was deleted."""
    path = _path(tag)
    try:
        current = _read(io, path, tag.name, tag.pin)
    except (CorruptMetadataError, UnsupportedFormatVersionError):
        return False
    if current != tag:
        return False
    io.delete(path)
    return True


def tagged_snapshot(io: FileIO, name: str, now_ms: int) -> Tag:
    """The live tag ``name`` (to read its snapshot): :class:`TagNotFoundError` if the table has no such tag or it
    is past its ``retain`` time (maintenance may have deleted its files)."""
    tag = read_tag(io, name)
    if tag is None:
        known = ", ".join(repr(t.name) for t in list_tags(io).tags) or "none"
        raise TagNotFoundError(f"{io.uri} has no tag {name!r} (its tags: {known})")
    if tag.expired(now_ms):
        raise TagNotFoundError(
            f"tag {name!r} (snapshot {tag.snapshot_id}) expired at {format_instant(tag.expires_millis or 0)} (its "
            "retain time passed): maintenance no longer keeps its files"
        )
    return tag


def tag_snapshot(
    store: MetaStore, name: str, snapshot: Snapshot, *, retain_ms: int | None, now_ms: int, sync: bool = True
) -> Tag:
    """Create tag ``name`` for ``snapshot`` (a retained snapshot, as just read) and return it.

    :class:`TagAlreadyExistsError` if the name is taken. After the tag file is created, the snapshot must still
    be retained with no expiration announced past it (the ``EARLIEST`` hint, which expiration writes before it
    deletes anything, and it reads the tags after that): otherwise an expiration may be deleting its files, the
    new tag is deleted again and :class:`SnapshotNotFoundError` raised."""
    tag = Tag(check_tag_name(name), snapshot, now_ms, retain_ms)
    create_tag(store.io, tag, sync=sync)
    try:
        still = store.try_snapshot(snapshot.id)
        earliest = store.read_hint(layout.EARLIEST)
    except BaseException:
        delete_tag_if_unchanged(store.io, tag)
        raise
    if still is None or still.nonce != snapshot.nonce or (earliest is not None and earliest > snapshot.id):
        delete_tag_if_unchanged(store.io, tag)
        raise SnapshotNotFoundError(
            f"snapshot {snapshot.id} expired while tag {name!r} was being created (the earliest snapshot is now "
            f"{earliest}); no tag was created"
        )
    return tag


def delete_tag_named(io: FileIO, name: str, uri: str) -> None:
    """Delete tag ``name`` (also an unreadable or expired one); :class:`TagNotFoundError` naming the table
    (``uri``) and its tags if there is none."""
    check_tag_name(name)
    try:
        io.read(layout.tag_path(name))
    except FileNotFoundError:
        known = ", ".join(repr(t.name) for t in list_tags(io).tags) or "none"
        raise TagNotFoundError(f"{uri} has no tag {name!r} (its tags: {known})") from None
    delete_tag(io, name)


def tag_version(
    store: MetaStore, name: str, snapshot_id: int | None, *, retain: Duration | None, now_ms: int, sync: bool = True
) -> Tag:
    """:meth:`lakefmt.Table.create_tag`: tag ``name`` for snapshot ``snapshot_id`` (the latest by default), kept
    ``retain`` after its creation (None: until deleted); see :func:`tag_snapshot`."""
    check_tag_name(name)
    if snapshot_id is None:
        snap = store.latest_snapshot()
        if snap is None:
            raise SnapshotNotFoundError(f"{store.io.uri} has no snapshot to tag yet")
    else:
        snap = store.snapshot(check_snapshot_id(snapshot_id))
    retain_ms = None if retain is None else check_retain(retain)
    return tag_snapshot(store, name, snap, retain_ms=retain_ms, now_ms=now_ms, sync=sync)
