#!/usr/bin/env bash
# The test command (README): every Rust test of the workspace, then the Python package's tests
# against the package as `pip install ./bindings/python` installs it, in a virtual environment
# this script creates (target/python-venv), so nothing installed by hand is relied on; then the
# Node package's tests against the package as bindings/node/README.md builds it
# (`npm ci && npm run build` inside bindings/node), with node's own test runner.
#
# Without python3 (or node and npm) those tests are skipped with a note, except under CI=true,
# where that is a failure. Cargo, maturin and the npm build run one after the other: all take
# the target directory's lock.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every test a fresh machine can run, the real servers' included: without a PostgreSQL named
# by RUNCORE_PG_URL, this same script runs beside a throwaway one (scripts/with-postgres.sh
# installs and starts it); without RUNCORE_RESTATE_SERVER, beside the Restate server from the
# npm registry (scripts/with-restate.sh). Only a bare `cargo test` skips them.
if [ -z "${RUNCORE_TEST_INNER:-}" ]; then
    export RUNCORE_TEST_INNER=1
    wrappers=()
    if [ -z "${RUNCORE_PG_URL:-}" ]; then wrappers+=(scripts/with-postgres.sh); fi
    if [ -z "${RUNCORE_RESTATE_SERVER:-}" ]; then wrappers+=(scripts/with-restate.sh); fi
    if [ "${#wrappers[@]}" -gt 0 ]; then
        exec "${wrappers[@]}" "$0" "$@"
    fi
fi

# Cargo's own idea of the target directory (CARGO_TARGET_DIR, a config file, or ./target).
target_dir=$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null \
    || echo "${CARGO_TARGET_DIR:-$PWD/target}")
export RUNCORE_BIN="$target_dir/debug/runcore"

cargo test --workspace --no-fail-fast

if ! command -v python3 >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        echo "scripts/test.sh: python3 is required in CI for the Python package's tests" >&2
        exit 1
    fi
    echo "note: python3 is not installed; the Python package's tests were skipped"
else
    venv="$target_dir/python-venv"
    if ! "$venv/bin/python" -c "import sys" >/dev/null 2>&1; then
        rm -rf "$venv"
        python3 -m venv "$venv"
    fi
    # The test runner and mypy (it checks that the shipped stub types real code) from PyPI, with
    # the test-only dependencies: httpx (the asyncio example's provider mode, against a
    # loopback server) and the official SDKs `openai` and `anthropic` (the differential test of
    # the codecs against their stream accumulators); then the package exactly as the README installs it
    # (`pip install ./bindings/python`: pip fetches maturin into an isolated build environment and
    # maturin builds the extension in release), reinstalled on every run.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pytest>=7" "mypy>=1.10,<2" \
        httpx openai anthropic
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
        --no-deps ./bindings/python

    # pytest exits 5 when it collected no test: that is a failure here, as any other non-zero.
    "$venv/bin/python" -m pytest bindings/python/tests
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        echo "scripts/test.sh: node and npm are required in CI for the Node package's tests" >&2
        exit 1
    fi
    echo "note: node or npm is not installed; the Node package's tests were skipped"
    exit 0
fi
# Exactly as bindings/node/README.md installs it: the pinned dev dependencies (TypeScript, for
# the type checks) from the lock file, then the native module built by cargo in release.
(cd bindings/node && npm ci --no-audit --no-fund && npm run build)
# The scenario tests compare with target/debug/runcore (CARGO_TARGET_DIR respected), built by
# `cargo test --workspace` above.
node --test bindings/node/test/
