"""The one rule for names that users give to files of a table (consumer ids, tag names): 1 to 200 characters of
``A-Z a-z 0-9 . _ -``, the first a letter, a digit or ``_``. So never empty, no ``/`` or ``\\``, no ``.``/``..``,
no control character, no space, no glob character, no hidden file, nothing a command line would take for an
option; and ``.<prefix><name>.tmp-<32 hex>`` (a local publish's temp name) fits the 255 bytes a file name may
have on common local filesystems. Names are case-sensitive."""

from __future__ import annotations

import re
from typing import Any

from lakefmt.errors import LakefmtError

__all__ = ["MAX_NAME_LENGTH", "check_name", "is_valid", "name_after"]

MAX_NAME_LENGTH = 200

_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_NAME_LENGTH - 1}}}", re.ASCII)


def is_valid(name: Any) -> bool:
    """Whether ``name`` follows the rule."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(name: Any, what: str, error: type[LakefmtError]) -> str:
    """Return ``name`` if it follows the rule, else raise ``error`` naming ``what`` ("tag name", "consumer id")."""
    if not isinstance(name, str):
        raise error(f"a {what} must be a string, got {type(name).__name__}")
    if not _NAME.fullmatch(name):
        raise error(
            f"{what} {name!r} is invalid: use 1 to {MAX_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -, "
            "starting with a letter, a digit or _"
        )
    return name


def name_after(file_name: str, prefix: str) -> str | None:
    """``<prefix><name>`` -> ``<name>``; None for a file name without the prefix or whose name breaks the rule
    (a temp file, a hint)."""
    if not file_name.startswith(prefix):
        return None
    name = file_name[len(prefix) :]
    return name if _NAME.fullmatch(name) else None
