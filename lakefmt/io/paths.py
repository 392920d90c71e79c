"""Path rules shared by every backend and every layer above: the one spelling of a table location
(:func:`normalize_uri`), nothing may resolve outside the root, and the names of temporary files. One rule, in a
scalar form (a path a caller gives) and a vectorised form (a column of paths read from metadata)."""

from __future__ import annotations

import os
import re
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidLocationError, PathOutsideTableError

__all__ = [
    "BAD_RELATIVE_PATH",
    "TEMP_MARKER",
    "check_name",
    "check_relative",
    "check_relative_paths",
    "is_temp",
    "is_temp_of",
    "normalize_uri",
    "temp_name",
]

#: ``scheme:`` at the start of a URI (two characters at least, so that a drive letter is never a scheme)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
#: ``C:\x``, ``C:/x`` or ``\\server\share``: a Windows path, which on POSIX would be a folder so named
_WINDOWS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def normalize_uri(uri: str) -> str:
    """The one spelling of a table location, so that every way of writing a location names one table.

    A local table becomes an absolute path without a trailing slash, whether it was written as a plain path
    (absolute, relative to the working folder, or starting with ``~``), as ``file:/abs`` (how Spark hands over a
    SQL ``LOCATION``), ``file:///abs`` or ``file://localhost/abs``. Any other URI (``s3://``, ``s3a://``,
    ``memory://``, ...) is returned unchanged but for trailing slashes. Percent escapes are left as they are
    (Spark hands over decoded paths). Raises :class:`InvalidLocationError` for an empty location, a ``file://``
    URI naming another host, or a scheme followed by a single slash (``s3:/bucket``); and, since each would be a
    folder of that name under the working folder, for spaces at the start or end and (on POSIX) a Windows path.
    Schemes are lower-cased (``S3://b/t`` is ``s3://b/t``).
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidLocationError(f"the table location {uri!r} is empty")
    if uri != uri.strip():
        raise InvalidLocationError(f"the table location {uri!r} starts or ends with white space")
    if os.sep == "/" and _WINDOWS.match(uri):
        raise InvalidLocationError(f"{uri!r} is a Windows path; on this system write a POSIX path or a URI")
    match = _SCHEME.match(uri)
    if match is None:
        path = uri
    elif match.group(1).lower() == "file":
        path = uri[match.end() :]
        if path.startswith("//"):
            host, slash, rest = path[2:].partition("/")
            if host.lower() not in ("", "localhost"):
                raise InvalidLocationError(
                    f"{uri!r} names the host {host!r}: a file: location is on this machine "
                    "(file:///path, file:/path or a plain path)"
                )
            path = slash + rest
        if not path:
            raise InvalidLocationError(f"{uri!r} names no folder")
    else:
        scheme, rest = match.group(1), uri[match.end() :]
        if not rest.startswith("//"):
            raise InvalidLocationError(f"{uri!r} is not a location lakefmt can open; write {scheme}://{rest.lstrip('/')}")
        return f"{scheme.lower()}://{rest[2:].rstrip('/')}"
    if os.sep == "/" and _WINDOWS.match(path):  # file:C:/x
        raise InvalidLocationError(f"{uri!r} is a Windows path; on this system write a POSIX path or a URI")
    path = os.path.abspath(os.path.expanduser(path))
    return "/" + path.lstrip("/")  # POSIX keeps a leading '//' apart from '/': one table, one spelling

#: a relative path is clean unless this matches: absolute, a ``.`` or ``..`` component, an empty component
#: (``//``, a trailing ``/``), a backslash, a URL scheme, a NUL, or empty. A clean path joined to the root
#: always stays under the root.
BAD_RELATIVE_PATH = r"(^/)|(^|/)\.{1,2}(/|$)|//|/$|\\|://|\x00|^$"
_BAD = re.compile(BAD_RELATIVE_PATH)

#: temporary files of an exclusive publish sit beside their final name as ``.<name>.tmp-<32 hex>``
TEMP_MARKER = ".tmp-"


def check_relative(rel: str) -> str:
    """Return ``rel`` unchanged if it is a clean relative path; raise :class:`PathOutsideTableError` if not."""
    if not isinstance(rel, str):
        raise PathOutsideTableError(f"path {rel!r} is not a string")
    if _BAD.search(rel):
        raise PathOutsideTableError(f"path {rel!r} is not a clean path relative to the table root")
    return rel


def check_relative_paths(paths: pa.ChunkedArray | pa.Array, what: str) -> None:
    """:func:`check_relative` over a column of paths (one vectorised pass); the error names ``what``."""
    bad = pc.match_substring_regex(paths, BAD_RELATIVE_PATH)
    if pc.any(bad).as_py():
        sample = paths.filter(bad)[0].as_py()
        raise PathOutsideTableError(f"{what} lists data file {sample!r} outside the table")


def check_name(name: str, what: str) -> str:
    """A bare file name (no folder): refuse anything that could name a file elsewhere."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise PathOutsideTableError(f"{what} names {name!r}, which is not a file name inside the table")
    return name


def temp_name(final: str) -> str:
    """A fresh temporary name beside ``final`` (a path or a bare name)."""
    head, _, name = final.rpartition("/")
    tmp = f".{name}{TEMP_MARKER}{uuid.uuid4().hex}"
    return f"{head}/{tmp}" if head else tmp


def is_temp_of(final: str, candidate: str) -> bool:
    """Whether ``candidate`` is a temporary file of an exclusive publish of ``final``."""
    head, _, name = final.rpartition("/")
    prefix = f"{head}/.{name}{TEMP_MARKER}" if head else f".{name}{TEMP_MARKER}"
    return candidate.startswith(prefix) and "/" not in candidate[len(prefix) :]


def is_temp(path: str) -> bool:
    """Whether ``path`` names a temporary file (of any final name)."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and TEMP_MARKER in name
