#!/usr/bin/env bash
# Set up a virtualenv and install lakefmt with Spark (first run only; later runs reinstall lakefmt only when
# its sources or pyproject.toml changed, see venv.sh), and run the main streaming job: a Spark
# Structured Streaming query writes event micro-batches exactly-once into a lakefmt table on local disk, then
# the table is read back with PyArrow. Run it again and the query resumes from its checkpoint.
# Usage: bash tools/run-demo.sh [table-path] [--batches N] [--rows N] [--replay-last]
# Needs Java 17 or 21 (for Spark). tools/demo.py is the same demo with PyArrow only (no JVM), into a table of
# its own (./demo-table-pyarrow; this one writes ./demo-table).
set -euo pipefail
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    echo "run-demo: Spark needs Java 17 or 21 (java not found; set JAVA_HOME or install a JDK)." >&2
    echo "run-demo: without Java, try the PyArrow-only demo: python tools/demo.py" >&2
    exit 1
fi
source "$(dirname "$0")/venv.sh" spark
exec "$VENV/bin/python" spark/jobs/stream_events.py "$@"
