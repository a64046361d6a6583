#!/usr/bin/env bash
# The test command (README): every Rust test of the workspace, then the Python package's tests
# against the package as `pip install ./bindings/python` installs it, in a virtual environment
# this script creates (target/python-venv), so nothing installed by hand is relied on.
#
# Without python3 the Python tests are skipped with a note, except under CI=true, where that is
# a failure. Cargo and maturin run one after the other: both take the target directory's lock.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace

if ! command -v python3 >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        echo "scripts/test.sh: python3 is required in CI for the Python package's tests" >&2
        exit 1
    fi
    echo "note: python3 is not installed; the Python package's tests were skipped"
    exit 0
fi

venv=target/python-venv
if ! "$venv/bin/python" -c "import sys" >/dev/null 2>&1; then
    rm -rf "$venv"
    python3 -m venv "$venv"
fi
# The test runner and mypy (it checks that the shipped stub types real code) from PyPI; then the package exactly as the README installs it
# (`pip install ./bindings/python`: pip fetches maturin into an isolated build environment and
# maturin builds the extension in release), reinstalled on every run.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pytest>=7" "mypy>=1.10,<2"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
    --no-deps ./bindings/python

# pytest exits 5 when it collected no test: that is a failure here, as any other non-zero.
RUNCORE_BIN="$PWD/target/debug/runcore" "$venv/bin/python" -m pytest bindings/python/tests
