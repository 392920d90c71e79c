#!/usr/bin/env bash
# Set up a virtualenv (first run only), install lakefmt with its test extras (again when pyproject.toml changed;
# lakefmt alone when its sources changed, so Spark's workers import this checkout: see venv.sh), lint,
# type-check, run the suite.
# Usage: bash tools/run-tests.sh [pytest args...]
# pytest runs in LAKEFMT_TEST_WORKERS worker processes (pytest-xdist; default 2): much of the suite waits on JVM
# starts, fsyncs and child processes, so two workers on two cores take well under half the serial time.
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev
"$VENV/bin/ruff" check lakefmt spark tests benchmarks tools
"$VENV/bin/mypy" lakefmt
set +e
"$VENV/bin/python" -m pytest -n "${LAKEFMT_TEST_WORKERS:-2}" --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing on purpose" >&2
    exit 1
fi
exit "$rc"
