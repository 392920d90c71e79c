"""Relative-path hygiene shared by every backend: nothing may resolve outside the root."""

from __future__ import annotations

from lakefmt.errors import PathOutsideTableError

__all__ = ["check_relative"]


def check_relative(rel: str) -> str:
    """Return ``rel`` unchanged if it is a clean relative path; raise :class:`PathOutsideTableError` if not.

    Clean means: not empty, not absolute, no URL scheme, no backslash, no ``.`` or ``..`` component and no
    empty component. Such a path joined to the root always stays under the root.
    """
    if not isinstance(rel, str) or not rel:
        raise PathOutsideTableError(f"empty or non-string path {rel!r}")
    if rel.startswith("/") or "\\" in rel or "://" in rel or "\x00" in rel:
        raise PathOutsideTableError(f"path {rel!r} is not relative to the table root")
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            raise PathOutsideTableError(f"path {rel!r} would resolve outside the table root")
    return rel
