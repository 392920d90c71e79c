# Sourced by run-demo.sh and run-tests.sh: create the virtualenv on first use and install lakefmt into it
# with the extras named in $1. A regular (not editable) install: pyspark discovers the pyspark_lakefmt data
# source by listing installed top-level modules, which an editable install's import hook hides from it.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
VENV="${LAKEFMT_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
"$VENV/bin/python" -m pip install --quiet ".[$1]"
