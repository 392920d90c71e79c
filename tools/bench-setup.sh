#!/usr/bin/env bash
# Set up the benchmarks: lakefmt's virtualenv with the bench extras, and the peers of the commit_speed
# benchmark (pypaimon, deltalake, pyiceberg), each in a virtualenv of its own under benchmarks/.venvs/, never
# in lakefmt's: pypaimon pins pyarrow < 20, lakefmt runs on a newer one.
# deltalake and pyiceberg both accept lakefmt's pyarrow, so they share one virtualenv.
# Idempotent: a virtualenv whose .bench-ready marker already names the same pins is left alone.
# Needs only PyPI. Usage: bash tools/bench-setup.sh   (PYTHON=python3.11 to choose the interpreter)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
VENVS=benchmarks/.venvs

# setup NAME PACKAGE...: create $VENVS/NAME if needed and pip-install the exact pins into it.
setup() {
    local name=$1 venv="$VENVS/$1" marker="$VENVS/$1/.bench-ready"
    shift
    if [ -f "$marker" ] && [ "$(cat "$marker")" = "$*" ] && [ -x "$venv/bin/python" ]; then
        echo "$name: up to date"
        return
    fi
    rm -f "$marker"
    [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    echo "$*" > "$marker"  # benchmarks/peers.python_for() uses a virtualenv only once this exists
    echo "$name: installed"
}

# lakefmt's own virtualenv (.venv, as for the tests) with the benchmark extras: matplotlib for the plots,
# s3fs + moto for the S3 request count, pyspark for the sink benchmark.
( source tools/venv.sh "dev,bench" )

mkdir -p "$VENVS"
setup paimon "pypaimon==2.1.0" "pyarrow==19.0.1"
setup delta-iceberg "deltalake==1.6.6" "pyiceberg[sql-sqlite,pyarrow]==0.12.0" "pyarrow==26.0.1"

# Print what each virtualenv actually holds.
for pair in paimon:pypaimon delta-iceberg:deltalake delta-iceberg:pyiceberg; do
    "$VENVS/${pair%%:*}/bin/python" - "${pair#*:}" <<'EOF'
import sys
from importlib.metadata import version
print(f"{sys.argv[1]} {version(sys.argv[1])} (pyarrow {version('pyarrow')}, python {sys.version.split()[0]})")
EOF
done
