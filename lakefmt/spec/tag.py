"""The tag file (``tag/tag-<name>``): a named version of the table that outlives the expiration of its snapshot
(Apache Paimon's tags, Iceberg's named refs).

A tag holds a copy of its snapshot's JSON, so it still reads after the snapshot file has expired, plus when it
was created and, optionally, how long it is kept (``retain``). It is created exclusively (put-if-absent: of two
racing creates of one name, one wins) and never changed; deleting it is the only way to move a name.

The same file, under ``tag/pin-<id>``, is a *pin*: a short-lived tag that a restore holds on its target while it
commits, so that maintenance running meanwhile keeps the target's files (it is not listed as a user's tag).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from lakefmt.errors import CorruptMetadataError, InvalidTagNameError
from lakefmt.spec.codec import decode_json, decode_metadata, encode_json
from lakefmt.spec.consumer import MAX_SNAPSHOT_ID
from lakefmt.spec.layout import PIN_PREFIX, TAG_PREFIX
from lakefmt.spec.names import MAX_NAME_LENGTH, check_name, is_valid, name_after
from lakefmt.spec.snapshot import Snapshot

__all__ = ["MAX_TAG_NAME_LENGTH", "Tag", "check_tag_name", "parse_pin_name", "parse_tag_name"]

#: the longest tag name: ``.tag-<name>.tmp-<32 hex>`` (a local publish's temp name) must fit in 255 bytes
MAX_TAG_NAME_LENGTH = MAX_NAME_LENGTH


def check_tag_name(name: Any) -> str:
    """Return ``name`` if it can name a tag file, else raise :class:`InvalidTagNameError`: the rule of
    :mod:`lakefmt.spec.names` (the rule of consumer ids). Case-sensitive."""
    return check_name(name, "tag name", InvalidTagNameError)


def parse_tag_name(file_name: str) -> str | None:
    """``tag-month-end`` -> ``month-end``; None for any other name in ``tag/`` (pins, temp files)."""
    return name_after(file_name, TAG_PREFIX)


def parse_pin_name(file_name: str) -> str | None:
    """``pin-<id>`` -> ``<id>``; None for any other name."""
    return name_after(file_name, PIN_PREFIX)


@dataclass(frozen=True)
class Tag:
    """A named snapshot: ``snapshot`` (a full copy), created at ``time_millis`` (epoch ms, the creator's clock),
    kept for ``retain_millis`` after that (None: until deleted). ``pin`` marks a restore's pin (``tag/pin-<id>``),
    which is not a user's tag; it is not stored in the file (its path says it). ``nonce`` makes the bytes of
    each creation unique (two creates of one name for one snapshot in one millisecond must not both win)."""

    name: str
    snapshot: Snapshot
    time_millis: int
    retain_millis: int | None = None
    pin: bool = False
    #: makes the file's bytes unique to one creation, so a creator can tell its own file from a racing one's
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex, compare=True)

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def expires_millis(self) -> int | None:
        """When the tag stops protecting its snapshot (epoch ms), or None if it never does."""
        return None if self.retain_millis is None else self.time_millis + self.retain_millis

    def expired(self, now_ms: int) -> bool:
        """Whether the tag is past its ``retain`` time at ``now_ms``: maintenance then ignores it and ``expire``
        deletes its file. A tag created in the future (a fast clock) is not expired."""
        expires = self.expires_millis
        return expires is not None and now_ms > expires

    def to_json(self) -> bytes:
        """The tag file's bytes."""
        obj: dict[str, Any] = {
            "version": self.snapshot.version,  # the table's version when it was tagged
            "tagName": self.name,
            "timeMillis": self.time_millis,
        }
        if self.retain_millis is not None:
            obj["retainMillis"] = self.retain_millis
        obj["nonce"] = self.nonce
        obj["snapshot"] = decode_json(self.snapshot.to_json(), "snapshot")
        return encode_json(obj)

    @classmethod
    def from_json(cls, data: bytes, what: str = "tag file", *, pin: bool = False) -> Tag:
        """Parse a tag file. Unknown fields are ignored; a newer format version (of the tag or of the snapshot
        it holds) is refused; anything malformed is :class:`CorruptMetadataError`."""
        obj, _ = decode_metadata(data, what)
        name, time_millis, retain = obj.get("tagName"), obj.get("timeMillis"), obj.get("retainMillis")
        if not is_valid(name):
            raise CorruptMetadataError(f"{what} is malformed: tagName {name!r} is not a tag name")
        for key, value in (("timeMillis", time_millis), ("retainMillis", retain)):
            if key == "retainMillis" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SNAPSHOT_ID:
                raise CorruptMetadataError(f"{what} is malformed: {key} {value!r} is not a non-negative integer")
        snap = obj.get("snapshot")
        if not isinstance(snap, dict):
            raise CorruptMetadataError(f"{what} is malformed: no snapshot object")
        snapshot = Snapshot.from_json(encode_json(snap), what=f"the snapshot in {what}")
        return cls(name, snapshot, time_millis, retain, pin, str(obj.get("nonce", "")))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (for ``--json`` output and display)."""
        return {
            "tag": self.name,
            "snapshot_id": self.snapshot.id,
            "snapshot_time_millis": self.snapshot.time_millis,
            "created_millis": self.time_millis,
            "retain_millis": self.retain_millis,
            "expires_millis": self.expires_millis,
            "rows": self.snapshot.total_record_count,
            "files": self.snapshot.total_file_count,
        }
