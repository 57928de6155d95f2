#!/usr/bin/env bash
# Install and start a throw-away PostgreSQL server on 127.0.0.1:55432 for the gradebook tests,
# then print the database URL. Idempotent: an already running server is reused.
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >&2
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
DATA=/tmp/course-ci-postgres
PORT=55432
run_as_postgres() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/bash -c "$1"; else sudo -u postgres bash -c "$1"; fi; }
if ! "$BIN/pg_isready" -h 127.0.0.1 -p "$PORT" -q; then
  rm -rf "$DATA"; $SUDO mkdir -p "$DATA"; $SUDO chown postgres "$DATA"
  run_as_postgres "$BIN/initdb -D $DATA -A trust -U postgres >/dev/null"
  run_as_postgres "$BIN/pg_ctl -D $DATA -o '-p $PORT -k /tmp -c listen_addresses=127.0.0.1' -l $DATA/log -w start >/dev/null"
fi
echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
