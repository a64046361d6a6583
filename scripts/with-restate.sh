#!/usr/bin/env bash
# Runs a command with the Restate server at hand, for tests, CI and the README walk-through.
#
#   scripts/with-restate.sh CMD [ARGS...]
#   scripts/with-restate.sh --start [--register URL] CMD [ARGS...]
#
# - Installs the server from the npm registry when it is missing: `npm ci` in
#   runtimes/restate (package.json pins @restatedev/restate-server, package-lock.json pins
#   every file; install scripts are not run, the package needs none). It needs npm; under
#   CI=true without npm (as root), Debian's `npm` package is installed first.
# - Exports RUNCORE_RESTATE_SERVER: the server's native binary (not the package's node
#   wrapper, so that a test's SIGKILL reaches the server itself).
# - Without --start it runs CMD: the end-to-end test (runtimes/restate/tests/e2e.rs) starts,
#   SIGKILLs and restarts the server itself on one directory, so it needs only the binary.
# - With --start it also starts one server on free loopback ports in a fresh temporary base
#   directory, waits until it is healthy, registers the deployment at URL when --register is
#   given (the workers must be listening), exports RUNCORE_RESTATE_INGRESS and
#   RUNCORE_RESTATE_ADMIN (http://127.0.0.1:PORT), runs CMD, then stops the server it started
#   (by its PID) and deletes the directory, whatever happens, and exits with CMD's status.
set -euo pipefail

say() { echo "with-restate: $*" >&2; }

START=0
REGISTER=""
while [ "$#" -gt 0 ]; do
    case "$1" in
    --start) START=1; shift ;;
    --register) REGISTER="$2"; START=1; shift 2 ;;
    *) break ;;
    esac
done
if [ "$#" -eq 0 ]; then
    echo "usage: $0 [--start [--register URL]] CMD [ARGS...]" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG="$ROOT/runtimes/restate"

case "$(uname -m)" in
x86_64) ARCH=x64 ;;
aarch64 | arm64) ARCH=arm64 ;;
*) ARCH=$(uname -m) ;;
esac
case "$(uname -s)" in
Linux) OS=linux ;;
Darwin) OS=darwin ;;
*) OS=$(uname -s) ;;
esac
BIN="$PKG/node_modules/@restatedev/restate-server-$OS-$ARCH/bin/restate-server"

if [ ! -x "$BIN" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
            say "npm is not installed; installing Debian's npm package"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update
            apt-get install -y npm
        else
            say "npm is required to install the Restate server (npm ci in runtimes/restate)"
            exit 1
        fi
    fi
    say "installing @restatedev/restate-server with npm ci in runtimes/restate"
    (cd "$PKG" && SCARF_ANALYTICS=false npm ci --ignore-scripts --no-audit --no-fund >&2)
    if [ ! -x "$BIN" ]; then
        say "npm ci finished but $BIN is missing (no build of the server for $OS-$ARCH?)"
        exit 1
    fi
fi
export RUNCORE_RESTATE_SERVER="$BIN"
say "restate-server $("$BIN" --version | awk '{print $2}') at $BIN"

if [ "$START" -eq 0 ]; then
    exec "$@"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/runcore-restate.XXXXXX")
PID=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    # A free port in the dynamic range: nothing listens on it now (loopback only).
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}
INGRESS=$(free_port)
ADMIN=$(free_port)
FABRIC=$(free_port)

RESTATE_LISTEN_MODE=tcp \
    RESTATE_DISABLE_TELEMETRY=true \
    RESTATE_INGRESS__BIND_ADDRESS="127.0.0.1:$INGRESS" \
    RESTATE_ADMIN__BIND_ADDRESS="127.0.0.1:$ADMIN" \
    RESTATE_BIND_ADDRESS="127.0.0.1:$FABRIC" \
    RESTATE_ADVERTISED_ADDRESS="http://127.0.0.1:$FABRIC/" \
    "$BIN" --base-dir "$WORK/data" --node-name n1 --no-logo --default-num-partitions 2 \
    >"$WORK/server.log" 2>&1 &
PID=$!

healthy=0
for _ in $(seq 1 300); do
    if ! kill -0 "$PID" 2>/dev/null; then
        cat "$WORK/server.log" >&2 || true
        say "the server exited during start"
        exit 1
    fi
    if curl -sf "http://127.0.0.1:$ADMIN/health" >/dev/null 2>&1 &&
        curl -sf "http://127.0.0.1:$INGRESS/restate/health" >/dev/null 2>&1; then
        healthy=1
        break
    fi
    sleep 0.1
done
if [ "$healthy" -ne 1 ]; then
    tail -n 50 "$WORK/server.log" >&2 || true
    say "the server did not become healthy in 30 s"
    exit 1
fi
export RUNCORE_RESTATE_INGRESS="http://127.0.0.1:$INGRESS"
export RUNCORE_RESTATE_ADMIN="http://127.0.0.1:$ADMIN"
say "server (pid $PID) ingress $RUNCORE_RESTATE_INGRESS admin $RUNCORE_RESTATE_ADMIN, data in $WORK/data"

if [ -n "$REGISTER" ]; then
    curl -sf -X POST "$RUNCORE_RESTATE_ADMIN/deployments" -H 'content-type: application/json' \
        -d "{\"uri\":\"$REGISTER\"}" >/dev/null || {
        say "registering the deployment $REGISTER failed (are the workers listening?)"
        exit 1
    }
    say "registered the deployment $REGISTER"
fi

set +e
"$@"
status=$?
set -e
exit "$status"
