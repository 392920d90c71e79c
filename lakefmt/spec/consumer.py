"""The consumer file (``consumer/consumer-<id>``): how far one reader of the table has got, so that snapshot
expiration keeps what it still needs (Paimon's ``consumer-id``). The only metadata file that is overwritten
in place: each new position replaces the last, atomically."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefmt.errors import CorruptMetadataError, InvalidConsumerIdError
from lakefmt.spec.codec import decode_metadata, encode_json
from lakefmt.spec.layout import CONSUMER_PREFIX
from lakefmt.spec.names import MAX_NAME_LENGTH, check_name, is_valid, name_after

__all__ = ["MAX_CONSUMER_ID_LENGTH", "MAX_SNAPSHOT_ID", "Consumer", "check_consumer_id", "parse_consumer_name"]

#: the longest consumer id: ``.consumer-<id>.tmp-<32 hex>`` (a local write's temp name) must fit the 255 bytes
#: a file name may have on common local filesystems
MAX_CONSUMER_ID_LENGTH = MAX_NAME_LENGTH
#: the largest id a consumer may record (a signed 64-bit integer, as every id of the format)
MAX_SNAPSHOT_ID = (1 << 63) - 1

#: consumer files are the same in every format version: written as version 1, so that a version-1 reader of a
#: version-1 table reads them
CONSUMER_FILE_VERSION = 1

def check_consumer_id(consumer_id: Any) -> str:
    """Return ``consumer_id`` if it can name a consumer file, else raise :class:`InvalidConsumerIdError`: the
    rule of :mod:`lakefmt.spec.names`. Ids are case-sensitive (on a case-insensitive filesystem two ids that
    differ only in case share one file: do not use such pairs)."""
    return check_name(consumer_id, "consumer id", InvalidConsumerIdError)


def parse_consumer_name(name: str) -> str | None:
    """``consumer-silver`` -> ``silver``; None for a name that is not a consumer file (a temp file, a hint, a
    name whose id breaks the id rules)."""
    return name_after(name, CONSUMER_PREFIX)


@dataclass(frozen=True)
class Consumer:
    """A reader's recorded position: ``next_snapshot`` is the first snapshot it has not finished reading, so
    expiration keeps every snapshot from it on; ``time_millis`` is when the position was recorded (epoch ms),
    which ``consumer.expiration-time`` counts from."""

    consumer_id: str
    next_snapshot: int
    time_millis: int

    def expired(self, expiration_ms: int | None, now_ms: int) -> bool:
        """Whether the record is older than ``expiration_ms`` at ``now_ms`` (never, when it is None): an
        expired consumer no longer holds snapshots back. A record from the future is not expired."""
        return expiration_ms is not None and now_ms - self.time_millis > expiration_ms

    def to_json(self) -> bytes:
        """The consumer file's bytes."""
        return encode_json(
            {
                "version": CONSUMER_FILE_VERSION,
                "consumerId": self.consumer_id,
                "nextSnapshot": self.next_snapshot,
                "timeMillis": self.time_millis,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, what: str = "consumer file") -> Consumer:
        """Parse a consumer file. Unknown fields are ignored; a newer format version is refused; a negative,
        non-integer or out-of-range position is corrupt."""
        obj, _ = decode_metadata(data, what)
        consumer_id, next_snapshot, time_millis = obj.get("consumerId"), obj.get("nextSnapshot"), obj.get("timeMillis")
        if not is_valid(consumer_id):
            raise CorruptMetadataError(f"{what} is malformed: consumerId {consumer_id!r} is not a consumer id")
        for key, value in (("nextSnapshot", next_snapshot), ("timeMillis", time_millis)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SNAPSHOT_ID:
                raise CorruptMetadataError(f"{what} is malformed: {key} {value!r} is not a non-negative integer")
        return cls(consumer_id, next_snapshot, time_millis)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (for ``--json`` output and display)."""
        return {"consumer_id": self.consumer_id, "next_snapshot": self.next_snapshot, "time_millis": self.time_millis}
