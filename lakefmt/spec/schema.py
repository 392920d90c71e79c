"""The table schema file: columns, partition keys, options."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakefmt.errors import CorruptMetadataError, UnsupportedTypeError
from lakefmt.options import TableOptions
from lakefmt.spec.codec import BASE_FORMAT_VERSION, FORMAT_VERSION, decode_metadata, encode_json
from lakefmt.spec.fields import FieldNode, annotate, assign_ids, flat_ids, index_nodes, make_nodes, walk
from lakefmt.spec.keys.hashing import KEY_TYPES, is_key_type
from lakefmt.spec.types import field_from_json, field_to_json, type_family

__all__ = ["PARTITION_TYPES", "TableSchema"]


def _is_partition_type(t: pa.DataType) -> bool:
    return type_family(t) in ("string", "integer", "boolean") or pa.types.is_date32(t)


PARTITION_TYPES = "string, integer, date32 or boolean"


@dataclass(frozen=True)
class TableSchema:
    """One version of the table's schema (``schema/schema-<id>``).

    ``field_ids`` are the ids of every field, nested ones included, in pre-order (see :mod:`lakefmt.spec.fields`);
    empty means fresh ones (1, 2, ... in column order: a version-1 schema's implied ids). ``highest_field_id`` is
    the highest id the table ever assigned (0: the highest of ``field_ids``); a new field takes the next one.
    ``format_version`` is the table's format version while this is its current schema: a version-1 schema file
    stores no ids, and a version-1 table's writers write version-1 files.

    ``primary_keys`` (format version 3) make a key table: at most one live row per key, rows in buckets by key
    (:mod:`lakefmt.spec.keys.hashing`), changes by upsert and deletion vectors. The key columns are non-null, and the
    partition keys are among them (as in Paimon): a key never moves between partitions."""

    id: int
    arrow_schema: pa.Schema
    partition_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    time_millis: int = 0
    field_ids: tuple[int, ...] = ()
    highest_field_id: int = 0
    format_version: int = BASE_FORMAT_VERSION
    primary_keys: tuple[str, ...] = ()

    @functools.cached_property
    def table_options(self) -> TableOptions:
        """The options, parsed once per schema (:class:`InvalidOptionError` names a bad one)."""
        return TableOptions.from_map(self.options)

    @functools.cached_property
    def nodes(self) -> tuple[FieldNode, ...]:
        """The top-level fields with their ids (and their children's)."""
        return make_nodes(self.arrow_schema, self.field_ids)

    @functools.cached_property
    def by_id(self) -> dict[int, tuple[tuple[str, ...], FieldNode]]:
        """Every field by id, with its path of names."""
        return index_nodes(self.nodes)

    @functools.cached_property
    def column_ids(self) -> dict[str, int]:
        """Top-level column name -> field id."""
        return {n.name: n.id for n in self.nodes}

    @property
    def stats_ids(self) -> dict[str, int] | None:
        """How manifests written under this schema key column statistics: by field id (version 2, see
        :func:`~lakefmt.spec.manifest.manifest_schema`), or None: by column name (version 1)."""
        return self.column_ids if self.format_version >= 2 else None

    @functools.cached_property
    def id_schema(self) -> pa.Schema:
        """The Arrow schema with each field's id as ``PARQUET:field_id`` metadata: what version-2 data files are
        written with."""
        return annotate(self.nodes)

    def __post_init__(self) -> None:
        if self.format_version not in range(1, FORMAT_VERSION + 1):
            raise CorruptMetadataError(f"schema {self.id}: unknown format version {self.format_version}")
        if not self.field_ids:
            object.__setattr__(self, "field_ids", tuple(flat_ids(assign_ids(list(self.arrow_schema)))))
        else:
            object.__setattr__(self, "field_ids", tuple(self.field_ids))
        try:
            nodes = make_nodes(self.arrow_schema, self.field_ids)
        except ValueError as exc:
            raise CorruptMetadataError(f"schema {self.id}: field ids do not match its fields ({exc})") from exc
        ids = [n.id for n in walk(nodes)]
        if len(set(ids)) != len(ids) or any(i < 1 for i in ids):
            raise CorruptMetadataError(f"schema {self.id}: field ids must be unique and positive, got {ids}")
        highest = max(ids, default=0)
        if self.highest_field_id == 0:
            object.__setattr__(self, "highest_field_id", highest)
        elif self.highest_field_id < highest:
            raise CorruptMetadataError(
                f"schema {self.id}: highestFieldId {self.highest_field_id} is below a field's id ({highest})"
            )
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
        object.__setattr__(self, "primary_keys", tuple(self.primary_keys))
        if self.primary_keys:
            self._check_primary_keys()

    def _check_primary_keys(self) -> None:
        names = self.arrow_schema.names
        keys = self.primary_keys
        if self.format_version < 3:
            raise CorruptMetadataError(f"schema {self.id}: a primary key needs format version 3")
        if len(set(keys)) != len(keys):
            raise UnsupportedTypeError(f"primary key columns repeat: {list(keys)}")
        for key in keys:
            if key not in names:
                raise UnsupportedTypeError(f"primary key {key!r} is not a column (columns: {', '.join(names)})")
            f = self.arrow_schema.field(key)
            if not is_key_type(f.type):
                raise UnsupportedTypeError(f"primary key {key!r} has type {f.type}; key columns must be {KEY_TYPES}")
            if f.nullable:
                raise UnsupportedTypeError(
                    f"primary key {key!r} is nullable; key columns are non-null (declare the field with "
                    "nullable=False; create_table does so for you)"
                )
        missing = [k for k in self.partition_keys if k not in keys]
        if missing:
            raise UnsupportedTypeError(
                f"the primary key ({', '.join(keys)}) must include every partition key (missing: "
                f"{', '.join(missing)}), so that a key never moves between partitions: add "
                f"{', '.join(missing)} to primary_key"
            )

    @property
    def bucket_keys(self) -> tuple[str, ...]:
        """The columns a key table's rows are bucketed by: the primary key without the partition keys."""
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @property
    def has_primary_key(self) -> bool:
        """Whether this is a key table's schema."""
        return bool(self.primary_keys)

    @property
    def deletion_vectors(self) -> bool:
        """Whether row-level changes mark deletion vectors (format version 3: key tables, and tables created
        with ``write.delete.mode=merge-on-read``) rather than rewrite files."""
        return self.format_version >= 3

    @property
    def partition_schema(self) -> pa.Schema:
        """The schema of the partition columns, in partition-key order."""
        return pa.schema([self.arrow_schema.field(k) for k in self.partition_keys])

    def to_json(self) -> bytes:
        """The schema file's bytes (version 1: no field ids; version 2: an ``id`` in every field object and the
        table's ``highestFieldId``)."""
        fields = [field_to_json(f) for f in self.arrow_schema]
        obj: dict[str, Any] = {"version": self.format_version, "id": self.id, "fields": fields}
        if self.format_version >= 2:
            ids = iter(self.field_ids)
            for f in fields:
                _put_ids(f, ids)
            obj["highestFieldId"] = self.highest_field_id
        if self.primary_keys:
            obj["primaryKeys"] = list(self.primary_keys)
        obj.update(
            {
                "partitionKeys": list(self.partition_keys),
                "options": dict(self.options),
                "timeMillis": self.time_millis,
            }
        )
        return encode_json(obj)

    @classmethod
    def from_json(cls, data: bytes, what: str = "schema file") -> TableSchema:
        """Parse a schema file; :class:`CorruptMetadataError` if it is malformed."""
        obj, version = decode_metadata(data, what)
        try:
            fields: Sequence[Any] = obj["fields"]
            if not isinstance(fields, list):
                raise TypeError("fields is not a list")
            ids: list[int] = []
            highest = 0
            if version >= 2:
                for f in fields:
                    _take_ids(f, ids)
                highest = _int(obj["highestFieldId"])
            return cls(
                id=int(obj["id"]),
                arrow_schema=pa.schema([field_from_json(f) for f in fields]),
                partition_keys=tuple(str(k) for k in obj.get("partitionKeys", [])),
                options={str(k): str(v) for k, v in (obj.get("options") or {}).items()},
                time_millis=int(obj.get("timeMillis", 0)),
                field_ids=tuple(ids),
                highest_field_id=highest,
                format_version=version,
                primary_keys=tuple(str(k) for k in obj.get("primaryKeys", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadataError(f"{what} is malformed: {exc!r}") from exc


def _nested(j: dict[str, Any]) -> list[dict[str, Any]]:
    """The field objects nested in a field object's type, in :func:`~lakefmt.spec.fields.child_fields` order."""
    t = j.get("type")
    if not isinstance(t, dict):
        return []
    kind = t.get("type")
    if kind == "struct":
        return list(t["fields"])
    if kind in ("list", "large_list"):
        return [t["element"]]
    if kind == "map":
        return [t["key"], t["value"]]
    return []


def _put_ids(j: dict[str, Any], ids: Any) -> None:
    j["id"] = next(ids)
    for child in _nested(j):
        _put_ids(child, ids)


def _take_ids(j: Any, out: list[int]) -> None:
    if not isinstance(j, dict):
        raise TypeError(f"field {j!r} is not an object")
    out.append(_int(j["id"]))
    for child in _nested(j):
        _take_ids(child, out)


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v
