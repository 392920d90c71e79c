"""The snapshot file (``snapshot/snapshot-<n>``): one committed version of the table."""

from __future__ import annotations

import datetime
import enum
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lakefmt.errors import CorruptMetadataError, InvalidSnapshotIdError
from lakefmt.spec.codec import FORMAT_VERSION, decode_metadata, encode_json
from lakefmt.spec.operations import Operation, operation_of, parameters_of

__all__ = ["CommitKind", "Snapshot", "UserMark"]


class CommitKind(enum.Enum):
    """What a snapshot did to the table."""

    APPEND = "APPEND"
    OVERWRITE = "OVERWRITE"
    COMPACT = "COMPACT"


class UserMark(NamedTuple):
    """What a snapshot remembers of one commit user: its last identifier, and the wall-clock time (ms) at
    which a committer recorded it (a JSON array ``[identifier, timeMillis]``)."""

    identifier: int
    time_millis: int


@dataclass(frozen=True)
class Snapshot:
    """A committed version of the table. JSON field names follow Paimon's snapshot v3 where they overlap.

    ``commit_users`` maps each recently seen commit user to ``[last identifier, time millis]``; it is carried
    forward by every commit, so exactly-once dedup is one read of the latest snapshot and survives expiration.
    ``nonce`` makes the file's bytes unique to one commit attempt, so a publisher can recognise its own write.
    """

    id: int
    schema_id: int
    base_manifest_list: str
    base_manifest_list_size: int
    delta_manifest_list: str
    delta_manifest_list_size: int
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int
    delta_record_count: int
    total_file_count: int = 0
    watermark: int | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    commit_users: Mapping[str, UserMark] = field(default_factory=dict)
    nonce: str = ""
    version: int = FORMAT_VERSION
    #: the changelog files the commit stored (``changelog-producer=lookup``; Paimon's field): a manifest list of
    #: their ADD entries, read by the change feed instead of deriving the changes; None: nothing stored
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int = 0
    changelog_record_count: int = 0
    #: whether the commit deleted or replaced rows that were live before it (``removesRows``): it removed data
    #: files holding rows, or marked rows of files it did not add in deletion vectors (an upsert that replaced a
    #: key's row, a delete, a row-kind delete of a live key, a MERGE, an overwrite). False for a commit that only
    #: added rows, and for a compaction (it moves rows unchanged). None: not recorded (a snapshot written before
    #: the field; :func:`lakefmt.read.removals.removes_rows` judges it from its delta)
    removes_rows: bool | None = None

    def to_json(self) -> bytes:
        """The snapshot file's bytes."""
        obj: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "schemaId": self.schema_id,
            "baseManifestList": self.base_manifest_list,
            "baseManifestListSize": self.base_manifest_list_size,
            "deltaManifestList": self.delta_manifest_list,
            "deltaManifestListSize": self.delta_manifest_list_size,
            "commitUser": self.commit_user,
            "commitIdentifier": self.commit_identifier,
            "commitKind": self.commit_kind.value,
            "timeMillis": self.time_millis,
            "totalRecordCount": self.total_record_count,
            "deltaRecordCount": self.delta_record_count,
            "totalFileCount": self.total_file_count,
        }
        if self.watermark is not None:
            obj["watermark"] = self.watermark
        if self.properties:
            obj["properties"] = dict(self.properties)
        obj["commitUsers"] = {u: list(v) for u, v in self.commit_users.items()}
        obj["nonce"] = self.nonce
        if self.changelog_manifest_list is not None:
            obj["changelogManifestList"] = self.changelog_manifest_list
            obj["changelogManifestListSize"] = self.changelog_manifest_list_size
            obj["changelogRecordCount"] = self.changelog_record_count
        if self.removes_rows is not None:
            obj["removesRows"] = self.removes_rows
        return encode_json(obj)

    @classmethod
    def from_json(cls, data: bytes, what: str = "snapshot") -> Snapshot:
        """Parse a snapshot file. Unknown fields are ignored; a newer format version is refused."""
        obj, version = decode_metadata(data, what)
        try:
            users = obj.get("commitUsers") or {}
            return cls(
                version=version,
                id=_int(obj["id"]),
                schema_id=_id(obj["schemaId"], "schemaId"),
                base_manifest_list=_str(obj["baseManifestList"]),
                base_manifest_list_size=_int(obj.get("baseManifestListSize", 0)),
                delta_manifest_list=_str(obj["deltaManifestList"]),
                delta_manifest_list_size=_int(obj.get("deltaManifestListSize", 0)),
                commit_user=_str(obj["commitUser"]),
                commit_identifier=_int(obj["commitIdentifier"]),
                commit_kind=CommitKind(obj["commitKind"]),
                time_millis=_int(obj["timeMillis"]),
                total_record_count=_int(obj["totalRecordCount"]),
                delta_record_count=_int(obj["deltaRecordCount"]),
                total_file_count=_int(obj.get("totalFileCount", 0)),
                watermark=None if obj.get("watermark") is None else _int(obj["watermark"]),
                properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
                commit_users={str(u): UserMark(_int(v[0]), _int(v[1])) for u, v in users.items()},
                nonce=str(obj.get("nonce", "")),
                changelog_manifest_list=(
                    None if obj.get("changelogManifestList") is None else _str(obj["changelogManifestList"])
                ),
                changelog_manifest_list_size=_int(obj.get("changelogManifestListSize", 0)),
                changelog_record_count=_int(obj.get("changelogRecordCount", 0)),
                removes_rows=None if obj.get("removesRows") is None else _bool(obj["removesRows"], "removesRows"),
            )
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CorruptMetadataError(f"{what} is malformed: missing or invalid field {exc}") from exc

    @property
    def manifest_lists(self) -> tuple[str, ...]:
        """Every manifest list the snapshot names: its base and delta lists, and its changelog list if it has one
        (what maintenance keeps or deletes with it; the table's rows are in the first two alone)."""
        lists = (self.base_manifest_list, self.delta_manifest_list)
        return lists if self.changelog_manifest_list is None else (*lists, self.changelog_manifest_list)

    @property
    def operation(self) -> Operation:
        """What the snapshot did (``WRITE``, ``DELETE``, ...: :mod:`lakefmt.spec.operations`); a snapshot that does
        not record it reads as the operation its kind implies."""
        return operation_of(self.properties, self.commit_kind.value)

    @property
    def operation_parameters(self) -> dict[str, str]:
        """The parameters its operation recorded (``predicate``, ``partition``, ``mode``)."""
        return parameters_of(self.properties)

    def __repr__(self) -> str:
        when = datetime.datetime.fromtimestamp(self.time_millis / 1000, datetime.UTC).isoformat(timespec="seconds")
        return (
            f"Snapshot(id={self.id}, {self.operation.value}, kind={self.commit_kind.value}, "
            f"time={when.replace('+00:00', 'Z')}, rows={self.total_record_count} ({self.delta_record_count:+d}), "
            f"files={self.total_file_count}, user={self.commit_user!r}, identifier={self.commit_identifier})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (for ``--json`` output and display)."""
        return {
            "id": self.id,
            "schema_id": self.schema_id,
            "commit_kind": self.commit_kind.value,
            "operation": self.operation.value,
            "commit_user": self.commit_user,
            "commit_identifier": self.commit_identifier,
            "time_millis": self.time_millis,
            "total_record_count": self.total_record_count,
            "delta_record_count": self.delta_record_count,
            "total_file_count": self.total_file_count,
            "watermark": self.watermark,
        }


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name}: expected true or false, got {v!r}")
    return v


def _id(v: Any, name: str) -> int:
    n = _int(v)
    if n < 0:
        raise ValueError(f"{name} {n} is negative")
    return n


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def check_snapshot_id(value: object, what: str = "snapshot_id", minimum: int = 1) -> int:
    """``value`` as a snapshot id, checked before any metadata is read: a whole number (``TypeError``
    otherwise) of at least ``minimum`` (:class:`InvalidSnapshotIdError` otherwise). Snapshot ids start at 1;
    ``minimum=0`` is for the start of an incremental range (``from_snapshot=0``: from the first commit)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be a whole number (a snapshot id), got {value!r}")
    sid = int(value)
    if sid < minimum:
        zero = " (0 means from the start of the table)" if minimum == 0 else ""
        raise InvalidSnapshotIdError(f"{what} {sid} is invalid: snapshot ids start at 1{zero}")
    return sid
