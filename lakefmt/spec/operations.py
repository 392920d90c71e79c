"""What a snapshot did, in words: the snapshot property ``lakefmt.operation`` and the vocabulary it uses. The one
place that names them; every write path records its operation (and its parameters) through :func:`properties`,
and history reads them back through :func:`operation_of` and :func:`parameters_of`.

A snapshot's kind (APPEND, OVERWRITE, COMPACT) says how readers and conflicts must treat it; the operation says
what the user asked for (a delete and a restore are both OVERWRITEs; an upsert and a schema change both APPENDs).
The property holds a lower-case token (``write``, ``overwrite``, ``delete``, ``compact``, ``restore``,
``schema-change``, ``upsert``, ``merge``, ``upgrade``); the operation's parameters are properties of their own,
``lakefmt.operation.<name>`` (``predicate``, ``partition``, ``mode``). What the operation counted (a MERGE's rows
updated, inserted and deleted: deltalake's ``operationMetrics``) is recorded in properties ``lakefmt.metric.<name>``
holding a whole number (:func:`metrics`, read back by :func:`metrics_of`). A snapshot written before operations
were recorded, or with a token this version does not know, reads as the operation its kind implies.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "COMPACT",
    "DELETE",
    "MERGE",
    "METRIC_PREFIX",
    "OPERATION_PROPERTY",
    "OVERWRITE",
    "PARAMETER_PREFIX",
    "RESTORE",
    "RESTORED_SNAPSHOT_PROPERTY",
    "RESTORED_TAG_PROPERTY",
    "SCHEMA_CHANGE",
    "UPGRADE",
    "UPSERT",
    "WRITE",
    "Operation",
    "metrics",
    "metrics_of",
    "operation_of",
    "parameters_of",
    "properties",
    "show_partition",
]

#: the snapshot property naming the operation (its token)
OPERATION_PROPERTY = "lakefmt.operation"
#: the prefix of the operation's parameters (``lakefmt.operation.predicate``)
PARAMETER_PREFIX = OPERATION_PROPERTY + "."
#: the prefix of what the operation counted (``lakefmt.metric.num_target_rows_updated``)
METRIC_PREFIX = "lakefmt.metric."
#: a restore's parameters, properties of their own since restores were first recorded
RESTORED_SNAPSHOT_PROPERTY = "lakefmt.restored-snapshot"
RESTORED_TAG_PROPERTY = "lakefmt.restored-tag"
_NAMED = {RESTORED_SNAPSHOT_PROPERTY: "snapshot", RESTORED_TAG_PROPERTY: "tag"}

# the tokens the property holds
WRITE = "write"
OVERWRITE = "overwrite"
DELETE = "delete"
COMPACT = "compact"
RESTORE = "restore"
SCHEMA_CHANGE = "schema-change"
UPSERT = "upsert"
MERGE = "merge"
UPGRADE = "upgrade"


class Operation(enum.Enum):
    """What a snapshot did, as history shows it (deltalake's names)."""

    WRITE = "WRITE"
    OVERWRITE = "OVERWRITE"
    DELETE = "DELETE"
    COMPACT = "COMPACT"
    RESTORE = "RESTORE"
    SCHEMA_CHANGE = "SCHEMA CHANGE"
    UPSERT = "UPSERT"
    MERGE = "MERGE"
    UPGRADE = "UPGRADE"

    def __str__(self) -> str:
        return self.value


_BY_TOKEN = {
    WRITE: Operation.WRITE,
    "append": Operation.WRITE,
    OVERWRITE: Operation.OVERWRITE,
    DELETE: Operation.DELETE,
    COMPACT: Operation.COMPACT,
    RESTORE: Operation.RESTORE,
    SCHEMA_CHANGE: Operation.SCHEMA_CHANGE,
    UPSERT: Operation.UPSERT,
    MERGE: Operation.MERGE,
    UPGRADE: Operation.UPGRADE,
}
#: the operation a snapshot kind implies when no (known) token says more
_BY_KIND = {"APPEND": Operation.WRITE, "OVERWRITE": Operation.OVERWRITE, "COMPACT": Operation.COMPACT}


def properties(token: str, **parameters: Any) -> dict[str, str]:
    """The snapshot properties that record operation ``token`` with ``parameters`` (those that are None are left
    out; others are written as text)."""
    out = {OPERATION_PROPERTY: token}
    for name, value in parameters.items():
        if value is not None:
            out[PARAMETER_PREFIX + name] = str(value)
    return out


def metrics(counts: Mapping[str, int]) -> dict[str, str]:
    """The snapshot properties that record an operation's ``counts`` (name -> whole number)."""
    return {METRIC_PREFIX + name: str(int(value)) for name, value in counts.items()}


def metrics_of(props: Mapping[str, str]) -> dict[str, int]:
    """The operation's counts recorded in ``props`` (``{"num_target_rows_updated": 3}``); a value that is not a
    whole number (written by another tool) is left out."""
    n = len(METRIC_PREFIX)
    out = {}
    for key, value in props.items():
        if key.startswith(METRIC_PREFIX):
            try:
                out[key[n:]] = int(value)
            except ValueError:
                continue
    return dict(sorted(out.items()))


def operation_of(props: Mapping[str, str], kind: str) -> Operation:
    """The operation of a snapshot with properties ``props`` and kind ``kind`` (``"APPEND"``, ...)."""
    token = props.get(OPERATION_PROPERTY)
    if token is not None and token.lower() in _BY_TOKEN:
        return _BY_TOKEN[token.lower()]
    return _BY_KIND.get(kind, Operation.WRITE)


def parameters_of(props: Mapping[str, str]) -> dict[str, str]:
    """The operation's parameters recorded in ``props`` (``{"predicate": "id > 3"}``)."""
    n = len(PARAMETER_PREFIX)
    out = {_NAMED[k]: v for k, v in props.items() if k in _NAMED}
    out.update((k[n:], v) for k, v in props.items() if k.startswith(PARAMETER_PREFIX))
    return dict(sorted(out.items()))


def show_partition(partition: Mapping[str, Any]) -> str:
    """Partition values as a parameter: compact JSON, keys in order (dates and other values as text)."""
    return json.dumps(dict(partition), default=str, separators=(",", ":"))
