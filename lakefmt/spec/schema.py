"""The table schema file: columns, partition keys, options."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakefmt.errors import CorruptMetadataError, UnsupportedTypeError
from lakefmt.options import TableOptions
from lakefmt.spec.codec import FORMAT_VERSION, check_version, decode_json, encode_json
from lakefmt.spec.types import field_from_json, field_to_json

__all__ = ["PARTITION_TYPES", "TableSchema"]


def _is_partition_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_date32(t)
        or pa.types.is_boolean(t)
    )


PARTITION_TYPES = "string, integer, date32 or boolean"


@dataclass(frozen=True)
class TableSchema:
    """One version of the table's schema (``schema/schema-<id>``)."""

    id: int
    arrow_schema: pa.Schema
    partition_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    time_millis: int = 0

    @functools.cached_property
    def table_options(self) -> TableOptions:
        """The options, parsed once per schema (:class:`InvalidOptionError` names a bad one)."""
        return TableOptions.from_map(self.options)

    def __post_init__(self) -> None:
        names = self.arrow_schema.names
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise UnsupportedTypeError(f"duplicate column names: {', '.join(dupes)}")
        for key in self.partition_keys:
            if key not in names:
                raise UnsupportedTypeError(f"partition key {key!r} is not a column (columns: {', '.join(names)})")
            t = self.arrow_schema.field(key).type
            if not _is_partition_type(t):
                raise UnsupportedTypeError(
                    f"partition key {key!r} has type {t}; partition keys must be {PARTITION_TYPES}"
                )
        if len(set(self.partition_keys)) != len(self.partition_keys):
            raise UnsupportedTypeError(f"partition keys repeat: {list(self.partition_keys)}")

    @property
    def partition_schema(self) -> pa.Schema:
        """The schema of the partition columns, in partition-key order."""
        return pa.schema([self.arrow_schema.field(k) for k in self.partition_keys])

    def to_json(self) -> bytes:
        """The schema file's bytes."""
        return encode_json(
            {
                "version": FORMAT_VERSION,
                "id": self.id,
                "fields": [field_to_json(f) for f in self.arrow_schema],
                "partitionKeys": list(self.partition_keys),
                "options": dict(self.options),
                "timeMillis": self.time_millis,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, what: str = "schema file") -> TableSchema:
        """Parse a schema file; :class:`CorruptMetadataError` if it is malformed."""
        obj = decode_json(data, what)
        check_version(obj.get("version"), what)
        try:
            fields: Sequence[Any] = obj["fields"]
            if not isinstance(fields, list):
                raise TypeError("fields is not a list")
            return cls(
                id=int(obj["id"]),
                arrow_schema=pa.schema([field_from_json(f) for f in fields]),
                partition_keys=tuple(str(k) for k in obj.get("partitionKeys", [])),
                options={str(k): str(v) for k, v in (obj.get("options") or {}).items()},
                time_millis=int(obj.get("timeMillis", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadataError(f"{what} is malformed: {exc!r}") from exc
