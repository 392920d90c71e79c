"""Storage options and storage failures as every interface meets them (Python, the CLI, Spark): one place.

* :func:`s3_storage_options`: the options of an ``s3://`` table for s3fs. deltalake's (delta-rs's) keys, as its
  users type them (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_REGION``, ``AWS_ALLOW_HTTP``, ... in upper or lower case) are translated to s3fs's (``endpoint_url``,
  ``key``, ``secret``, ``token``, ``client_kwargs={"region_name": ...}``); a key s3fs does not take is refused
  naming it (:class:`InvalidStorageOptionError`) instead of botocore's ``TypeError``.
* :func:`storage_error`: botocore's and s3fs's failures (no credentials, an endpoint that refuses connections or
  never answers, s3fs not installed) as lakefmt errors that say what to do.

Messages name option keys, never their values (a value may be a secret).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from lakefmt.errors import (
    InvalidStorageOptionError,
    LakefmtError,
    MissingDependencyError,
    StorageCredentialsError,
    StorageUnreachableError,
)

__all__ = ["STRING_OPTIONS", "explains_storage_errors", "s3_storage_options", "storage_error", "storage_errors"]

#: where a deltalake key goes in s3fs's options (a path into nested dicts), by its lower-case spelling
_DELTA_KEYS: dict[str, tuple[str, ...]] = {
    "aws_access_key_id": ("key",),
    "access_key_id": ("key",),
    "aws_secret_access_key": ("secret",),
    "secret_access_key": ("secret",),
    "aws_session_token": ("token",),
    "session_token": ("token",),
    "aws_token": ("token",),
    "aws_endpoint_url": ("endpoint_url",),
    "aws_endpoint": ("endpoint_url",),
    "endpoint": ("endpoint_url",),
    "aws_region": ("client_kwargs", "region_name"),
    "aws_default_region": ("client_kwargs", "region_name"),
    "region": ("client_kwargs", "region_name"),
    "region_name": ("client_kwargs", "region_name"),
    "aws_profile": ("profile",),
    "aws_skip_signature": ("anon",),
    "skip_signature": ("anon",),
    "aws_virtual_hosted_style_request": ("config_kwargs", "s3", "addressing_style"),
    "virtual_hosted_style_request": ("config_kwargs", "s3", "addressing_style"),
}
#: deltalake keys that are true or false
_BOOLEAN_KEYS = frozenset(
    {"aws_allow_http", "allow_http", "aws_skip_signature", "skip_signature"}
    | {"aws_virtual_hosted_style_request", "virtual_hosted_style_request"}
)
#: deltalake keys with nothing to translate to: plain http follows from the endpoint's scheme, and lakefmt commits
#: with S3's conditional writes, so delta-rs's ways to commit (unsafe renames, a DynamoDB lock) are not needed
_DROPPED_KEYS = frozenset(
    {"aws_allow_http", "allow_http", "aws_s3_allow_unsafe_rename", "aws_s3_locking_provider", "aws_conditional_put"}
    | {"conditional_put", "aws_copy_if_not_exists", "copy_if_not_exists", "dynamo_lock_table_name"}
    | {"delta_dynamo_table_name", "aws_s3_lock_table_name"}
)
#: s3fs options that are always strings, and the deltalake keys that become one of them (lower case)
STRING_OPTIONS = frozenset(
    {"key", "secret", "token", "username", "password", "profile", "endpoint_url"}
    | {k for k, path in _DELTA_KEYS.items() if k not in _BOOLEAN_KEYS}
)
#: options every fsspec filesystem takes (instance and listings caches)
_FSSPEC_OPTIONS = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})
_S3_EXTRA = "pip install 'lakefmt[s3]'"


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidStorageOptionError(f"storage option {key!r} must be true or false")
    return text == "true"


def _put(out: dict[str, Any], path: tuple[str, ...], value: Any, key: str, given: dict[tuple[str, ...], str]) -> None:
    """Set ``out[path[0]][path[1]]... = value``, refusing a second spelling of one option with another value."""
    node = out
    for part in path[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise InvalidStorageOptionError(f"storage option {part!r} must be a dict (it takes {key!r})")
        node = child
    leaf = path[-1]
    if leaf in node and node[leaf] != value:
        other = given.get(path, ".".join(path))
        raise InvalidStorageOptionError(
            f"storage options {other!r} and {key!r} set one option to different values: give one of them"
        )
    node[leaf] = value
    given.setdefault(path, key)


def s3_storage_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` for s3fs: deltalake's keys translated (see the module), s3fs's own kept; the dicts given
    (``client_kwargs``, ``config_kwargs``) are copied, never changed."""
    out: dict[str, Any] = {}
    given: dict[tuple[str, ...], str] = {}
    for key, value in options.items():  # s3fs's own first, so a translated key merges into them
        if str(key).lower() in _DELTA_KEYS or str(key).lower() in _DROPPED_KEYS:
            continue
        if isinstance(value, dict):
            value = {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
        out[key] = value
        given[(key,)] = key
    for key, value in options.items():
        low = str(key).lower()
        if low in _BOOLEAN_KEYS:
            value = _boolean(key, value)
        if low in _DROPPED_KEYS:
            continue
        path = _DELTA_KEYS.get(low)
        if path is None:
            continue
        if value is None:  # unset, as deltalake takes None: never the text "None" as a key or an endpoint
            continue
        if path[-1] == "addressing_style":
            value = "virtual" if value else "path"
        elif low not in _BOOLEAN_KEYS:
            value = str(value)
        _put(out, path, value, str(key), given)
    check_s3_options(out)
    return out


def _parameters(func: Any) -> set[str]:
    """The names a callable takes as keywords (``self`` and ``**kwargs`` aside)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in inspect.signature(func).parameters.values() if p.kind in kinds and p.name != "self"}


def known_s3_options() -> set[str] | None:
    """The options s3fs takes (those of ``S3FileSystem``, fsspec's and ``aiobotocore.AioSession``'s, where s3fs
    hands the rest), or None when s3fs cannot be imported (its ImportError then comes where it is used)."""
    try:
        s3fs = importlib.import_module("s3fs")
    except ImportError:
        return None
    known = _parameters(s3fs.S3FileSystem.__init__) | _FSSPEC_OPTIONS
    with contextlib.suppress(ImportError, AttributeError):
        known |= _parameters(importlib.import_module("aiobotocore.session").AioSession.__init__)
    return known


def check_s3_options(options: Mapping[str, Any]) -> None:
    """Refuse an option s3fs does not take (:class:`InvalidStorageOptionError` naming it and the closest)."""
    known = known_s3_options()
    if known is None:
        return
    for key in options:
        if key in known:
            continue
        hint = ""
        if difflib.get_close_matches(str(key).lower(), ["region", "region_name", "aws_region"], n=1):
            hint = ' (the region goes in region, AWS_REGION or client_kwargs={"region_name": "..."})'
        elif close := difflib.get_close_matches(str(key), sorted(known | set(_DELTA_KEYS)), n=3):
            hint = f" (did you mean {' or '.join(close)}?)"
        raise InvalidStorageOptionError(f"unknown storage option {key!r} for s3://{hint}")


def _endpoint(exc: BaseException, options: Mapping[str, Any]) -> str:
    """scheme://host:port of the endpoint a botocore connection error names."""
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url") or options.get("endpoint_url") or "")
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else (url or "the S3 endpoint")


def _scheme(uri: str) -> str:
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else "file"
    return "s3" if scheme == "s3a" else scheme


def storage_error(exc: BaseException, uri: str, options: Mapping[str, Any]) -> LakefmtError | None:
    """The lakefmt error that explains ``exc``, a failure of the storage client behind ``uri``, or None when it
    is none that lakefmt knows."""
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, ImportError) and _scheme(uri) == "s3":
        return MissingDependencyError(f"s3:// needs the optional dependency s3fs ({exc}): {_S3_EXTRA}")
    if names & {"NoCredentialsError", "PartialCredentialsError"}:
        return StorageCredentialsError(
            f"no usable credentials for {uri} ({exc}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
            "AWS_PROFILE, or pass the storage options key and secret (-o key=... -o secret=... on the command "
            "line); anon=true reads a public bucket"
        )
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ProxyConnectionError"}:
        return StorageUnreachableError(
            f"cannot connect to {_endpoint(exc, options)} ({type(exc).__name__}); check the storage option endpoint_url"
        )
    if "ReadTimeoutError" in names:
        return StorageUnreachableError(
            f"no answer from {_endpoint(exc, options)} within the read timeout ({type(exc).__name__}); check the "
            'storage option endpoint_url, or allow longer with config_kwargs={"read_timeout": 60}'
        )
    if names & {"ProfileNotFound"}:
        return StorageCredentialsError(
            f"no usable credentials for {uri} ({exc}): the AWS profile named by AWS_PROFILE or the storage option "
            "profile is not in the AWS config files"
        )
    if names & {"InvalidRegionError"}:
        return InvalidStorageOptionError(f"the region given for {uri} is not a region name ({exc})")
    if names & {"EndpointResolutionError"} or (isinstance(exc, ValueError) and "Invalid endpoint" in str(exc)):
        return InvalidStorageOptionError(
            f"the storage option endpoint_url for {uri} is not a URL ({exc}): write it as http://host:port or "
            "https://host"
        )
    if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
        key = str(exc).split("unexpected keyword argument", 1)[1].strip(" '\"")
        return InvalidStorageOptionError(f"unknown storage option {key!r} for {uri.split('://', 1)[0]}://")
    return None


@contextlib.contextmanager
def storage_errors(uri: str, options: Mapping[str, Any], *, opening: bool = True) -> Iterator[None]:
    """Within the block, a storage client's failure that :func:`storage_error` explains is raised as that
    lakefmt error (the original chained as its cause); lakefmt's own errors and the rest pass unchanged.
    ``opening=False`` (an open table's calls): only the client's own failures (credentials, connections,
    timeouts) are explained, never a ``TypeError`` or an ``ImportError``, which there are no option's fault."""
    try:
        yield
    except LakefmtError:
        raise
    except Exception as exc:
        if not opening and isinstance(exc, TypeError | ImportError):
            raise
        explained = storage_error(exc, uri, options)
        if explained is None:
            raise
        raise explained from exc


_T = TypeVar("_T")


def explains_storage_errors(cls: type[_T]) -> type[_T]:
    """Class decorator: the public methods of ``cls`` (whose objects hold their FileIO in ``io`` or ``_io``) raise
    a storage client's failure as the lakefmt error that explains it (:class:`StorageUnreachableError` for an
    endpoint that went away after the table was opened, ...), as opening the table does. A generator method is
    wrapped as it runs."""
    for name, value in list(vars(cls).items()):
        if (name.startswith("_") and name != "__arrow_c_stream__") or not inspect.isfunction(value):
            continue
        setattr(cls, name, _explained(value))
    return cls


def _errors_of(obj: Any) -> contextlib.AbstractContextManager[None]:
    io = getattr(obj, "io", None) or obj._io
    return io.explained()  # type: ignore[no-any-return]


def _explained(func: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def run_generator(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            with _errors_of(self):
                yield from func(self, *args, **kwargs)

        return run_generator

    @functools.wraps(func)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _errors_of(self):
            return func(self, *args, **kwargs)

    return run
