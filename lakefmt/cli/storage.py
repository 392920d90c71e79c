"""The CLI's storage options: ``-o key=value`` parsed into typed values, checked against what the filesystem
behind the table location takes, the CLI's S3 defaults (give up quickly), the S3 endpoint from the environment,
and the credential values an error message must not show."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from lakefmt import InvalidLocationError, InvalidStorageOptionError, normalize_uri
from lakefmt.io.storage import STRING_OPTIONS, s3_storage_options

#: options that are always strings, even when they look like numbers (an all-digit secret stays a secret),
#: deltalake's spellings of them included
_STRING_OPTIONS = STRING_OPTIONS
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
#: CLI defaults for s3fs's botocore client: fail within seconds instead of botocore's retry storm (an endpoint that
#: accepts connections and never answers waits out read_timeout, 15 s in s3fs, per attempt)
_S3_CONFIG_DEFAULTS: dict[str, Any] = {
    "connect_timeout": 3,
    "read_timeout": 5,
    "retries": {"total_max_attempts": 2, "mode": "standard"},
}
#: s3fs's own retries of a request that timed out, each with botocore's attempts (5 by default; no storage option
#: sets it): the CLI makes one try while its botocore retry default is in force
_S3FS_RETRIES = 1
_S3_EXTRA = "pip install 'lakefmt[s3]'"


class _UsageError(Exception):
    """A command line that cannot work (exit 2)."""


def _option_value(key: str, text: str) -> Any:
    """A storage option's value by its form: true/false, an integer, a decimal, a JSON object or list, or else
    the string itself."""
    stripped = text.strip()
    if key.lower() in _STRING_OPTIONS:
        return text
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    if _DECIMAL.fullmatch(stripped):
        return float(stripped)
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as exc:  # the value is not repeated: it may hold a credential
            raise argparse.ArgumentTypeError(
                f"storage option {key!r} is not valid JSON ({exc.msg} at character {exc.pos + 1})"
            ) from None
    return text


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``-o key=value`` pairs as a dict of typed values (see :func:`_option_value`)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"storage option {pair!r} is not key=value")
        out[key] = _option_value(key, value)
    return out


def _scheme(uri: str) -> str:
    """``s3`` for ``s3://`` and ``s3a://``, ``file`` for a path or ``file://``, else the URI's scheme."""
    if "://" not in uri:
        return "file"
    scheme = uri.split("://", 1)[0].lower()
    return "s3" if scheme == "s3a" else scheme


def _check_uri(uri: str) -> None:
    """Refuse a location that can name no table (exit 2)."""
    if not uri.strip():
        raise _UsageError("the table location is empty")
    try:
        normalize_uri(uri)  # a file:// URI of another host, s3:/bucket
    except InvalidLocationError as exc:
        raise _UsageError(str(exc)) from None
    if _scheme(uri) == "s3" and not uri.split("://", 1)[1].split("/", 1)[0]:
        raise _UsageError(f"{uri!r} names no bucket: write s3://bucket/path/to/table")


def _s3fs_missing() -> str | None:
    """Why S3 cannot be reached (s3fs, an optional dependency, is not installed), or None."""
    try:
        import s3fs  # noqa: F401
    except ImportError as exc:
        return f"s3:// needs the optional dependency s3fs, which cannot be imported ({exc}): {_S3_EXTRA}"
    return None


def _check_options(uri: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as the filesystem takes them (deltalake's keys translated to s3fs's: the core's rules, as in
    Python); an option it does not take is refused, naming it (exit 2). Local paths take none."""
    scheme = _scheme(uri)
    if scheme == "file":
        for key in options:
            raise _UsageError(f"unknown storage option {key!r}: local paths take no storage options")
        return options
    if scheme != "s3":
        return options  # the filesystem itself judges
    try:
        return s3_storage_options(options)
    except InvalidStorageOptionError as exc:
        raise _UsageError(str(exc)) from None


def _s3_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the CLI's short connect timeout and few retries filled in where the user set none."""
    config = options.get("config_kwargs", {})
    if not isinstance(config, dict):
        return options  # s3fs will say what is wrong with it
    merged = dict(config)
    merged.setdefault("connect_timeout", _S3_CONFIG_DEFAULTS["connect_timeout"])
    merged.setdefault("read_timeout", _S3_CONFIG_DEFAULTS["read_timeout"])
    if "retries" not in merged and not (os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE")):
        merged["retries"] = dict(_S3_CONFIG_DEFAULTS["retries"])  # a copy: botocore rewrites it in place
    return {**options, "config_kwargs": merged}


@contextlib.contextmanager
def _s3fs_retries(uri: str, options: dict[str, Any]) -> Iterator[None]:
    """While the command runs, s3fs retries a timed-out request at most :data:`_S3FS_RETRIES` times (it is a class
    attribute of ``S3FileSystem``, restored afterwards), unless the user chose botocore's retries (``-o
    config_kwargs`` with ``retries``, AWS_MAX_ATTEMPTS, AWS_RETRY_MODE): then s3fs keeps its own as well."""
    config = options.get("config_kwargs")
    ours = isinstance(config, dict) and config.get("retries") == _S3_CONFIG_DEFAULTS["retries"]
    s3fs = sys.modules.get("s3fs") if _scheme(uri) == "s3" and ours else None
    if s3fs is None:
        yield
        return
    before = s3fs.S3FileSystem.retries
    s3fs.S3FileSystem.retries = min(before, _S3FS_RETRIES)
    try:
        yield
    finally:
        s3fs.S3FileSystem.retries = before


def _env_storage_options(uri: str) -> dict[str, Any]:
    """S3 endpoint from the environment (credentials are picked up by botocore itself)."""
    if uri.startswith(("s3://", "s3a://")) and os.environ.get("AWS_ENDPOINT_URL"):
        return {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    return {}


def _secrets(options: dict[str, Any]) -> list[str]:
    """Credential values that an error message must not show."""
    found = [os.environ.get(k, "") for k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")]
    stack: list[Any] = [options]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if isinstance(v, dict):
                    stack.append(v)
                elif isinstance(v, str) and re.search(r"secret|token|password|key", str(k), re.IGNORECASE):
                    found.append(v)
    return [v for v in found if len(v) >= 4]
