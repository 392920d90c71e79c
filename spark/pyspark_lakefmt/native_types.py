"""The Spark schema of a native read (:mod:`.native`): lakefmt's schema with each field's Parquet field id in its
``parquet.field.id`` metadata, so that Spark's Parquet reader (``spark.sql.parquet.fieldId.read.enabled``) matches
the files' columns by id, as lakefmt's own reader does: a column renamed since a file was written reads under its
new name, one dropped and re-added under the same name reads as nulls from files of the old one, and one added
since reads as nulls.

Types Spark's reader cannot read as ``Table.scan(...).to_arrow()`` reads them (unsigned integers, half floats,
times of day, nanosecond timestamps, the null type) make :func:`native_unsupported` say why; the native read
refuses them with that reason (pyspark's Arrow types have none of them, so the Python data source cannot either).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

import lakefmt

__all__ = ["FIELD_ID_KEY", "native_unsupported", "spark_schema"]

#: the StructField metadata key Spark's Parquet reader matches field ids by
FIELD_ID_KEY = "parquet.field.id"
_ARROW_ID_KEY = b"PARQUET:field_id"


def _unsupported_type(t: pa.DataType) -> str | None:
    if pa.types.is_unsigned_integer(t) or pa.types.is_float16(t) or pa.types.is_time(t) or pa.types.is_null(t):
        return str(t)
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return str(t)
    if pa.types.is_struct(t):
        for child in t:
            found = _unsupported_type(child.type)
            if found:
                return found
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _unsupported_type(t.value_type)
    if pa.types.is_map(t):
        return _unsupported_type(t.key_type) or _unsupported_type(t.item_type)
    return None


def native_unsupported(schema: pa.Schema) -> str | None:
    """Why Spark's Parquet reader cannot read a table of this schema as lakefmt reads it (None: it can)."""
    for f in schema:
        found = _unsupported_type(f.type)
        if found:
            return f"column {f.name} holds {found}, which Spark's Parquet reader does not read as lakefmt does"
    return None


def _field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(_ARROW_ID_KEY)
    return int(raw) if raw is not None else None


def _spark_type(t: pa.DataType, with_ids: bool) -> DataType:
    if pa.types.is_struct(t):
        return StructType([_spark_field(child, with_ids) for child in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ArrayType(_spark_type(t.value_type, with_ids), containsNull=t.value_field.nullable)
    if pa.types.is_map(t):
        return MapType(
            _spark_type(t.key_type, with_ids), _spark_type(t.item_type, with_ids), t.item_field.nullable
        )
    return from_arrow_type(t)


def _spark_field(f: pa.Field, with_ids: bool) -> StructField:
    fid = _field_id(f) if with_ids else None
    metadata = {FIELD_ID_KEY: fid} if fid is not None else None
    return StructField(f.name, _spark_type(f.type, with_ids), nullable=f.nullable, metadata=metadata)


def spark_schema(schema: lakefmt.TableSchema, *, with_ids: bool = True) -> StructType:
    """The Spark schema of ``schema``'s columns, each field (nested ones too) carrying its field id when
    ``with_ids`` (files written under format version 1 carry none and are read by name)."""
    arrow = schema.id_schema if with_ids else schema.arrow_schema
    return StructType([_spark_field(f, with_ids) for f in arrow])
