#!/usr/bin/env bash
# Set up a virtualenv (first run only), install lakefmt with its test extras, lint, type-check, run the suite.
# Usage: bash tools/run-tests.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${LAKEFMT_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# a regular (not editable) install: pyspark discovers the pyspark_lakefmt data source by listing installed
# top-level modules, which an editable install's import hook hides from it
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
"$VENV/bin/python" -m pip install --quiet ".[dev]"
"$VENV/bin/ruff" check lakefmt spark tests benchmarks tools
"$VENV/bin/mypy" lakefmt
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing on purpose" >&2
    exit 1
fi
exit "$rc"
