"""Numbers for docs/reliability.md: with ``LAKEFMT_FAULT_REPORT=path`` set, fault tests record what they ran
and what happened into one JSON file (merged across tests and runs)."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["record"]


def record(section: str, key: str, value: Any) -> None:
    """Store ``value`` under ``section``/``key`` in the report file, if one was asked for."""
    path = os.environ.get("LAKEFMT_FAULT_REPORT")
    if not path:
        return
    data: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    data.setdefault(section, {})[key] = value
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
