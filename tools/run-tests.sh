#!/usr/bin/env bash
# Set up a virtualenv (first run only), install lakefmt with its test extras, lint, type-check, run the suite.
# Usage: bash tools/run-tests.sh [pytest args...]
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev
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
