"""The connector's options: where the table is (:class:`TableRef`) and the small parsers every option goes through.

Spark hands a Python data source its options with lower-cased keys. Every value is a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import lakefmt

__all__ = ["TableRef", "flag", "pairs"]


def flag(options: Mapping[str, str], key: str) -> bool:
    """A boolean option (``true``/``1``/``yes``, case-insensitive); absent is False."""
    return str(options.get(key, "false")).strip().lower() in ("1", "true", "yes")


def pairs(text: str, what: str) -> dict[str, str]:
    """``k=v,k=v`` as a dict; an item that is not ``key=value`` is an error naming the option."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise lakefmt.LakefmtError(f"option {what}: {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class TableRef:
    """Where the table is and how to reach it: picklable, travels to executors and the commit worker."""

    path: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # storage options (credentials) never printed
        return f"TableRef({self.path!r})"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> TableRef:
        path = options.get("path")
        if not path:
            raise lakefmt.LakefmtError("no table path: use .save(uri), .load(uri), .start(uri) or .option('path', uri)")
        storage = {k[len("storage.") :]: v for k, v in options.items() if k.lower().startswith("storage.")}
        return cls(str(path), storage)

    def open(self) -> lakefmt.Table:
        return lakefmt.open_table(self.path, storage_options=self.storage_options)
