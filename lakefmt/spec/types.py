"""Arrow types <-> the JSON type grammar of the format spec (docs/format.md, "Types")."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakefmt.errors import CorruptMetadataError, UnsupportedTypeError

__all__ = ["DOC_KEY", "field_from_json", "field_to_json", "type_family", "type_from_json", "type_to_json"]


#: the families of flat types that lakefmt's type rules (key, partition and statistics columns) are written in
_FAMILIES = {
    "integer": (pa.types.is_integer,),
    "float": (pa.types.is_floating,),
    "decimal": (pa.types.is_decimal,),
    "string": (pa.types.is_string, pa.types.is_large_string),
    "binary": (pa.types.is_binary, pa.types.is_large_binary),
    "boolean": (pa.types.is_boolean,),
    "date": (pa.types.is_date,),
    "time": (pa.types.is_time,),
    "timestamp": (pa.types.is_timestamp,),
}


def type_family(t: pa.DataType) -> str | None:
    """The family of Arrow type ``t``: ``integer``, ``float``, ``decimal``, ``string`` (string or large_string),
    ``binary`` (binary or large_binary), ``boolean``, ``date``, ``time`` or ``timestamp``; None for any other type
    (nested, view, dictionary, null)."""
    return next((name for name, tests in _FAMILIES.items() if any(test(t) for test in tests)), None)

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "date32": pa.date32(),
}
_PRIMITIVE_NAMES = {t: name for name, t in _PRIMITIVES.items()}


def type_to_json(t: pa.DataType) -> Any:
    """The JSON form of an Arrow type; :class:`UnsupportedTypeError` for types the format does not store."""
    name = _PRIMITIVE_NAMES.get(t)
    if name is not None:
        return name
    if pa.types.is_timestamp(t):
        return {"type": "timestamp", "unit": t.unit, "tz": t.tz}
    if pa.types.is_time(t):
        return {"type": "time", "unit": t.unit}
    if pa.types.is_decimal(t):
        return {"type": "decimal", "precision": t.precision, "scale": t.scale, "bitWidth": t.bit_width}
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed_binary", "width": t.byte_width}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {
            "type": "large_list" if pa.types.is_large_list(t) else "list",
            "element": field_to_json(t.value_field),
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "key": field_to_json(t.key_field),
            "value": field_to_json(t.item_field),
            "keysSorted": t.keys_sorted,
        }
    if pa.types.is_struct(t):
        if t.num_fields == 0:  # Parquet cannot store it: refuse at create_table, not at the first write
            raise UnsupportedTypeError(f"Arrow type {t} (a struct with no fields) is not supported by lakefmt tables")
        return {"type": "struct", "fields": [field_to_json(t.field(i)) for i in range(t.num_fields)]}
    raise UnsupportedTypeError(f"Arrow type {t} is not supported by lakefmt tables")


def type_from_json(j: Any) -> pa.DataType:
    """Inverse of :func:`type_to_json`; :class:`CorruptMetadataError` on anything it does not recognise."""
    if isinstance(j, str):
        if j in _PRIMITIVES:
            return _PRIMITIVES[j]
        raise CorruptMetadataError(f"unknown type {j!r} in schema")
    if not isinstance(j, dict) or "type" not in j:
        raise CorruptMetadataError(f"malformed type {j!r} in schema")
    kind = j["type"]
    try:
        if kind == "timestamp":
            return pa.timestamp(j["unit"], tz=j.get("tz"))
        if kind == "time":
            return pa.time32(j["unit"]) if j["unit"] in ("s", "ms") else pa.time64(j["unit"])
        if kind == "decimal":
            widths = {32: pa.decimal32, 64: pa.decimal64, 256: pa.decimal256}
            make = widths.get(j.get("bitWidth", 128), pa.decimal128)
            return make(j["precision"], j["scale"])
        if kind == "fixed_binary":
            return pa.binary(j["width"])
        if kind in ("list", "large_list"):
            element = field_from_json(j["element"])
            return pa.large_list(element) if kind == "large_list" else pa.list_(element)
        if kind == "map":
            return pa.map_(field_from_json(j["key"]), field_from_json(j["value"]), j.get("keysSorted", False))
        if kind == "struct":
            return pa.struct([field_from_json(f) for f in j["fields"]])
    except (KeyError, TypeError, ValueError, pa.ArrowInvalid) as exc:
        raise CorruptMetadataError(f"malformed {kind} type {j!r} in schema: {exc}") from exc
    raise CorruptMetadataError(f"unknown type {kind!r} in schema")


#: the Arrow field metadata key of a field's documentation (pyiceberg's too); stored as the field's ``doc``
DOC_KEY = b"doc"


def field_to_json(f: pa.Field) -> dict[str, Any]:
    """The JSON form of a (nested) Arrow field: name, type, nullable, and its ``doc`` if it has one."""
    out = {"name": f.name, "type": type_to_json(f.type), "nullable": f.nullable}
    doc = (f.metadata or {}).get(DOC_KEY)
    if doc:
        out["doc"] = doc.decode("utf-8", "replace")
    return out


def field_from_json(j: Any) -> pa.Field:
    """Inverse of :func:`field_to_json`."""
    if not isinstance(j, dict) or not isinstance(j.get("name"), str) or "type" not in j:
        raise CorruptMetadataError(f"malformed field {j!r} in schema")
    doc = j.get("doc")
    if doc is not None and not isinstance(doc, str):
        raise CorruptMetadataError(f"malformed doc {doc!r} of field {j['name']!r} in schema")
    metadata = {DOC_KEY: doc.encode()} if doc else None
    return pa.field(j["name"], type_from_json(j["type"]), nullable=bool(j.get("nullable", True)), metadata=metadata)
