"""The ``lakefmt`` command: inspect tables from a shell. Thin commands over the public API (the command table,
the parser and :func:`main` in :mod:`lakefmt.cli.commands`); storage options (``-o``) are parsed and checked in
:mod:`lakefmt.cli.storage`; presentation (text table or ``--json``, summaries, one-line errors) lives in
:mod:`lakefmt.cli.output`.

Exit codes: 0 success, 1 failure, 2 bad usage. Either way the error is one line on stderr, never a traceback
(set ``LAKEFMT_TRACEBACK=1`` to see one for an unexpected error).
"""

from __future__ import annotations

from lakefmt.cli.commands import build_parser, main
from lakefmt.cli.storage import _s3_defaults as _s3_defaults
from lakefmt.cli.storage import _storage_options as _storage_options

__all__ = ["build_parser", "main"]
