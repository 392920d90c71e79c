# Sourced by run-demo.sh and run-tests.sh: create the virtualenv on first use and install lakefmt into it
# with the extras named in $1. A regular (not editable) install: pyspark discovers the pyspark_lakefmt data
# source by listing installed top-level modules, which an editable install's import hook hides from it.
#
# Installing is skipped when nothing changed, by two stamp files in the virtualenv:
# - .lakefmt-deps-<extras>: a hash of pyproject.toml; when it differs (or the virtualenv is new), pip is
#   upgraded and lakefmt is installed with the extras and their dependencies;
# - .lakefmt-sources: a hash of pyproject.toml and the package sources (lakefmt/, spark/pyspark_lakefmt/); when
#   only it differs, lakefmt alone is reinstalled (--no-deps), so the installed copy that Spark's workers import
#   always matches the checkout.
# LAKEFMT_REINSTALL=1 forces both steps.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
VENV="${LAKEFMT_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi

_lakefmt_hash() {
    # sha256 over the named files and every file under the named folders (caches left out), names included
    "$VENV/bin/python" - "$@" <<'EOF'
import hashlib
import sys
from pathlib import Path

digest = hashlib.sha256()
for arg in sys.argv[1:]:
    root = Path(arg)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if root.is_dir() else [root]
    for path in files:
        digest.update(path.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
print(digest.hexdigest())
EOF
}

_deps_stamp="$VENV/.lakefmt-deps-$1"
_src_stamp="$VENV/.lakefmt-sources"
_deps_hash="$(_lakefmt_hash pyproject.toml)"
_src_hash="$(_lakefmt_hash pyproject.toml lakefmt spark/pyspark_lakefmt)"
if [ "${LAKEFMT_REINSTALL:-0}" = 1 ]; then
    rm -f "$_deps_stamp" "$_src_stamp"
fi
if [ "$(cat "$_deps_stamp" 2>/dev/null)" != "$_deps_hash" ]; then
    echo "venv.sh: installing lakefmt[$1] and its dependencies into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
    "$VENV/bin/python" -m pip install --quiet ".[$1]"
    echo "$_deps_hash" > "$_deps_stamp"
    echo "$_src_hash" > "$_src_stamp"
elif [ "$(cat "$_src_stamp" 2>/dev/null)" != "$_src_hash" ]; then
    echo "venv.sh: sources changed: reinstalling lakefmt into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
    echo "$_src_hash" > "$_src_stamp"
fi
unset -f _lakefmt_hash
unset _deps_stamp _src_stamp _deps_hash _src_hash
