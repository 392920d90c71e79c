"""``python -m lakefmt.cli``: the ``lakefmt`` command."""

from __future__ import annotations

import sys

from lakefmt.cli import main

if __name__ == "__main__":
    sys.exit(main())
