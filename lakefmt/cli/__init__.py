"""The ``lakefmt`` command: inspect tables from a shell. Thin commands over the public API (the command table in
:mod:`lakefmt.cli.commands`, the parser and :func:`main` in :mod:`lakefmt.cli.main`); storage options (``-o``) are
parsed and checked in :mod:`lakefmt.cli.storage`; presentation (text table or ``--json``, summaries, one-line
errors) lives in :mod:`lakefmt.cli.output`.

Exit codes: 0 success, 1 failure, 2 bad usage. Either way the error is one line on stderr, never a traceback
(set ``LAKEFMT_TRACEBACK=1`` to see one for an unexpected error).
"""

from __future__ import annotations

from typing import Any

from lakefmt.cli.main import build_parser, main

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    """``_s3_defaults`` and ``_storage_options`` of :mod:`lakefmt.cli.storage`, imported on first use (it imports
    the storage layer, which ``lakefmt --help`` does not need)."""
    if name in ("_s3_defaults", "_storage_options"):
        from lakefmt.cli import storage

        return getattr(storage, name)
    raise AttributeError(f"module 'lakefmt.cli' has no attribute {name!r}")
