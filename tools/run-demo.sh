#!/usr/bin/env bash
# Set up a virtualenv (first run only), install lakefmt, and run the demo job against a table on local disk.
# Usage: bash tools/run-demo.sh [table-path]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${LAKEFMT_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
"$VENV/bin/python" -m pip install --quiet ".[spark]"
exec "$VENV/bin/python" tools/demo.py "${1:-demo-table}"
