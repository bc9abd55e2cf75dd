#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests, on loopback only, with fsync off.
#
#   scripts/postgres.sh start DIR [PORT]   initdb into DIR (new or empty), start the server,
#                                          create role and database "lakelog" (trust auth,
#                                          CREATEDB so tests can make a database each), and
#                                          print the URL: postgresql://lakelog@127.0.0.1:PORT/lakelog
#   scripts/postgres.sh stop DIR           stop the server and remove DIR
#
# initdb refuses to run as root: as root, the server runs as the `postgres` user (which
# Debian's package creates) and DIR is handed to it. Any other user runs it as themselves.
set -euo pipefail

die() { echo "postgres.sh: $*" >&2; exit 1; }

bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$dir/initdb" ] && { echo "$dir"; return; }
  done
  dir=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
  [ -x "$dir/initdb" ] && { echo "$dir"; return; }
  die "no PostgreSQL server binaries (initdb) found; install Debian's postgresql package"
}

as_server() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
  local dir=$1 port=${2:-} bin
  bin=$(bindir)
  [ -n "$port" ] || port=$(free_port)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  mkdir -p "$dir/data" "$dir/sock"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the postgres user"
    chown -R postgres: "$dir"
    # The server must reach DIR through its parents (mktemp makes them 0700).
    chmod 755 "$dir"
  fi
  chmod 700 "$dir/data"
  as_server "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/sock -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
        -c shared_buffers=64MB" >/dev/null \
    || { cat "$dir/server.log" >&2; die "the server did not start"; }
  as_server "$bin/psql" -X -q -h "$dir/sock" -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE lakelog LOGIN CREATEDB" \
    -c "CREATE DATABASE lakelog OWNER lakelog" >/dev/null
  echo "postgresql://lakelog@127.0.0.1:$port/lakelog"
}

stop() {
  local dir=$1 bin
  [ -d "$dir" ] || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    bin=$(bindir)
    as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [PORT]"; start "$2" "${3:-}" ;;
  stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 start DIR [PORT] | stop DIR" ;;
esac
