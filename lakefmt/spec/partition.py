"""Partition folders: ``<k1>=<v1>/<k2>=<v2>/`` with keys and values escaped so that any value is one safe
path component. The manifest, not the path, is the source of truth for partition values: readers never parse
folder names, so escaping only has to be safe and readable, and the same value always maps to the same folder.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "HIVE_NULL_VALUE",
    "NULL_VALUE",
    "describe_partition",
    "escape_component",
    "parse_partition_value",
    "partition_path",
    "value_to_text",
]

#: the folder name of a null partition value (``dt=__null__``); also how messages and the command line spell it
NULL_VALUE = "__null__"
#: Hive's and Spark's folder name of a null partition value, accepted for one on the command line too
HIVE_NULL_VALUE = "__HIVE_DEFAULT_PARTITION__"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_MAX_COMPONENT = 200


def escape_component(text: str) -> str:
    """Percent-encode (UTF-8) every character outside ``[A-Za-z0-9._-]``, and dots too when the text is all
    dots, so the result can never be ``.``, ``..``, contain ``/``, ``=`` or ``%`` unescaped, or be empty."""
    out = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    escaped = "".join(out)
    if escaped.strip(".") == "":
        escaped = escaped.replace(".", "%2E")
    return escaped or "%"  # "" never reaches here as a component value: see value_to_text


def value_to_text(value: Any) -> str:
    """The folder text of one partition value."""
    if value is None:
        return NULL_VALUE
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    else:
        text = str(value)
    if text == "":
        return "%"  # the empty string: escape_component never yields a lone '%'
    escaped = escape_component(text)
    if escaped == NULL_VALUE:
        escaped = "%5F" + escaped[1:]
    return escaped


def describe_partition(values: Mapping[str, Any], sep: str = ",") -> str:
    """``k1=v1,k2=v2`` for messages, a null value spelled :data:`NULL_VALUE` as its folder is (and as
    ``lakefmt compact --partition`` takes it), and a text value spelled exactly as a null is
    (:data:`NULL_VALUE`, :data:`HIVE_NULL_VALUE`) with its first ``_`` escaped as its folder has it
    (``%5F_null__``), so that the two never read alike; ``(the table)`` for an unpartitioned table's one
    partition."""
    return sep.join(f"{k}={_spelled(v)}" for k, v in values.items()) or "(the table)"


def _spelled(value: Any) -> Any:
    if value is None:
        return NULL_VALUE
    if value in (NULL_VALUE, HIVE_NULL_VALUE):
        return "%5F" + value[1:]
    return value


def parse_partition_value(text: str) -> str | None:
    """The value a spelling of :func:`describe_partition` names: None for :data:`NULL_VALUE` or
    :data:`HIVE_NULL_VALUE`, the text ``__null__`` for ``%5F_null__`` (and so for Hive's), else the text."""
    if text in (NULL_VALUE, HIVE_NULL_VALUE):
        return None
    if text in ("%5F" + NULL_VALUE[1:], "%5F" + HIVE_NULL_VALUE[1:]):
        return "_" + text[3:]
    return text


def partition_path(keys: Sequence[str], values: Mapping[str, Any]) -> str:
    """``k1=v1/k2=v2`` for the given keys (empty string for an unpartitioned table)."""
    parts = []
    for key in keys:
        part = f"{escape_component(key)}={value_to_text(values.get(key))}"
        if len(part) > _MAX_COMPONENT:
            digest = hashlib.sha256(part.encode()).hexdigest()[:16]
            part = f"{part[: _MAX_COMPONENT - 18]}~{digest}"
        parts.append(part)
    return "/".join(parts)
