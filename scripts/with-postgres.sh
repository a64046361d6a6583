#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server, for tests and CI.
#
#   scripts/with-postgres.sh CMD [ARGS...]
#
# - Finds initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin (the newest); when there are
#   none and we are root, installs Debian's `postgresql` package (without letting it create or
#   start a cluster of its own).
# - Creates a cluster in a fresh temporary directory, as a non-root user because PostgreSQL
#   refuses to run as root: the current user when not root, else the `postgres` system user the
#   package creates (or `runcore-pg`, created here, when there is none).
# - Listens on 127.0.0.1 only, on a free port, and on a unix socket inside the temporary
#   directory; local connections are trusted (the server lives for one command).
# - Creates the database `runcore_test`, exports RUNCORE_PG_URL pointing at it, runs CMD as the
#   calling user, then stops the server and deletes its directory on exit, whatever happens
#   (success, failure, Ctrl-C, TERM), and exits with CMD's status.
#
# The server trades durability for speed (fsync, synchronous_commit and full_page_writes off):
# it holds test data for one command, and the tests kill clients, not the server. Set
# RUNCORE_PG_DURABLE=1 for a server with PostgreSQL's default (durable) settings, e.g. to
# benchmark commit throughput as a production server would see it.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

say() { echo "with-postgres: $*" >&2; }

find_pg_bin() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        # The real directory: PATH may hold only symlinks to initdb and pg_ctl.
        dirname "$(readlink -f "$(command -v initdb)")"
        return 0
    fi
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
        echo "$dir"
        return 0
    fi
    return 1
}

install_postgres() {
    if [ "$(id -u)" -ne 0 ]; then
        say "initdb and pg_ctl were not found and we are not root: install PostgreSQL" \
            "(e.g. apt-get install postgresql) or put its bin directory on PATH"
        exit 1
    fi
    say "PostgreSQL is not installed; installing Debian's postgresql package"
    # The package creates and starts a cluster of its own ("main") unless told not to; we want
    # none left running. A drop-in beside createcluster.conf (which includes that directory)
    # says so without touching the package's own file.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/runcore-ci.conf
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y postgresql
    # Should a cluster have been created and started all the same, stop it: it is the
    # package's, started just now by this install, and nothing here uses it.
    if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters --no-header 2>/dev/null | while read -r version name _ status _; do
            if [ "$status" = "online" ]; then
                say "stopping the cluster $version/$name that the package started"
                pg_ctlcluster "$version" "$name" stop || true
            fi
        done
    fi
}

PG_BIN=$(find_pg_bin || true)
if [ -z "$PG_BIN" ]; then
    install_postgres
    PG_BIN=$(find_pg_bin || true)
    if [ -z "$PG_BIN" ]; then
        say "postgresql was installed but initdb/pg_ctl are still not found"
        exit 1
    fi
fi

# Who runs the server.
if [ "$(id -u)" -eq 0 ]; then
    if id -u postgres >/dev/null 2>&1; then
        PG_USER=postgres
    else
        PG_USER=runcore-pg
        if ! id -u "$PG_USER" >/dev/null 2>&1; then
            useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
        fi
    fi
    # From inside the work directory: the caller's directory may be closed to that user.
    as_pg() { (cd "$WORK" && runuser -u "$PG_USER" -- "$@"); }
else
    PG_USER=$(id -un)
    as_pg() { "$@"; }
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/runcore-pg.XXXXXX")
DATA="$WORK/data"
LOG="$WORK/server.log"
STARTED=0

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ "$STARTED" -eq 1 ]; then
        as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
            say "could not stop the server in $DATA (see $LOG)"
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" -eq 0 ]; then
    chown "$PG_USER" "$WORK"
fi
chmod 700 "$WORK"

as_pg "$PG_BIN/initdb" -D "$DATA" -U runcore --auth=trust --no-locale --encoding=UTF8 \
    --no-sync >"$WORK/initdb.log" 2>&1 || {
    cat "$WORK/initdb.log" >&2
    say "initdb failed"
    exit 1
}

SETTINGS=(-c listen_addresses=127.0.0.1 -c "unix_socket_directories=$WORK" -c max_connections=200)
if [ "${RUNCORE_PG_DURABLE:-0}" != "1" ]; then
    SETTINGS+=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
fi

# A random port in the dynamic range; another server may hold it, so try a few.
PORT=""
for _ in 1 2 3 4 5 6 7 8; do
    candidate=$((20000 + RANDOM % 40000))
    if as_pg "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
        -o "-p $candidate ${SETTINGS[*]}" start >/dev/null 2>&1; then
        PORT=$candidate
        STARTED=1
        break
    fi
done
if [ -z "$PORT" ]; then
    cat "$LOG" >&2 || true
    say "the server did not start"
    exit 1
fi

as_pg "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U runcore -d postgres \
    -c "CREATE DATABASE runcore_test" >/dev/null

export RUNCORE_PG_URL="postgresql://runcore@127.0.0.1:$PORT/runcore_test"
say "PostgreSQL $("$PG_BIN/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$PORT" \
    "(user $PG_USER, data in $DATA); RUNCORE_PG_URL=$RUNCORE_PG_URL"

set +e
"$@"
status=$?
set -e
exit "$status"
