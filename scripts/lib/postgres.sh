# shellcheck shell=bash
# Throwaway Postgres cluster from the installed PostgreSQL binaries.
#
#   source scripts/lib/postgres.sh
#   start_throwaway_postgres      # exports DATABASE_URL, registers cleanup
#
# initdb refuses to run as root, so as root the cluster runs as the
# `postgres` user (or `nobody` when there is none).

find_pg_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return; fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$dir" ]; then
    echo "no PostgreSQL binaries found (set PG_BIN or DATABASE_URL)" >&2
    return 1
  fi
  echo "$dir"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_throwaway_postgres [extra postgres -c settings...]
start_throwaway_postgres() {
  local pg_bin run_as=() owner
  pg_bin=$(find_pg_bin) || return 1
  TIDEMARK_PG_DIR=$(mktemp -d /tmp/tidemark-pg.XXXXXX)
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id -u postgres >/dev/null 2>&1 || owner=nobody
    chown "$owner" "$TIDEMARK_PG_DIR"
    run_as=(runuser -u "$owner" --)
  fi
  local port
  port=$(free_port)
  "${run_as[@]}" "$pg_bin/initdb" -D "$TIDEMARK_PG_DIR/data" -U tidemark --auth=trust -E UTF8 \
    >"$TIDEMARK_PG_DIR/initdb.log" 2>&1 || { cat "$TIDEMARK_PG_DIR/initdb.log" >&2; return 1; }
  # pg_stat_statements: tests count the statements a page costs.
  local opts="-p $port -k $TIDEMARK_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_preload_libraries=pg_stat_statements"
  local setting
  for setting in "$@"; do opts="$opts -c $setting"; done
  "${run_as[@]}" "$pg_bin/pg_ctl" -D "$TIDEMARK_PG_DIR/data" -o "$opts" -l "$TIDEMARK_PG_DIR/server.log" -w start \
    >/dev/null || { cat "$TIDEMARK_PG_DIR/server.log" >&2; return 1; }
  TIDEMARK_PG_STOP=("${run_as[@]}" "$pg_bin/pg_ctl" -D "$TIDEMARK_PG_DIR/data" -m immediate -w stop)
  export DATABASE_URL="postgres://tidemark@127.0.0.1:$port/postgres"
  export TIDEMARK_PG_DIR
  trap stop_throwaway_postgres EXIT
  echo "throwaway Postgres on 127.0.0.1:$port ($TIDEMARK_PG_DIR)" >&2
}

stop_throwaway_postgres() {
  if [ -n "${TIDEMARK_PG_DIR:-}" ] && [ -d "$TIDEMARK_PG_DIR" ]; then
    "${TIDEMARK_PG_STOP[@]}" >/dev/null 2>&1 || true
    rm -rf "$TIDEMARK_PG_DIR"
  fi
}

# fresh_postgres_database PREFIX: creates a new, empty database named
# PREFIX_<random> on DATABASE_URL's server and prints its URL. It never
# touches a database it did not create: the name is new, and the databases
# it created are recorded for drop_created_databases (scripts/test.sh runs it
# on exit). Fails when the server does not allow it.
fresh_postgres_database() {
  local name pg_bin url
  name="$1_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  pg_bin=$(find_pg_bin) || return 1
  url=$(python3 - "$DATABASE_URL" "$name" <<'PY'
import sys, urllib.parse
parts = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.urlunsplit(parts._replace(path="/" + sys.argv[2])))
PY
) || return 1
  PGOPTIONS="--client-min-messages=warning" "$pg_bin/psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" \
    -c "CREATE DATABASE $name" >/dev/null || return 1
  echo "$name" >>"$(created_databases_file)"
  echo "$url"
}

# Where fresh_postgres_database records what it created ($$ is the
# top-level shell's, also in command substitutions).
created_databases_file() {
  echo "${TMPDIR:-/tmp}/tidemark-created-databases.$$"
}

# Drops the databases fresh_postgres_database created, and only those.
drop_created_databases() {
  local file pg_bin name
  file=$(created_databases_file)
  [ -f "$file" ] || return 0
  pg_bin=$(find_pg_bin) || return 0
  while read -r name; do
    PGOPTIONS="--client-min-messages=warning" "$pg_bin/psql" -q "$DATABASE_URL" \
      -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1 || true
  done <"$file"
  rm -f "$file"
}

# use_test_postgres: the Postgres a test run uses. Without DATABASE_URL, a
# throwaway cluster that trades durability for speed (benchmarks use their
# own), removed on exit; with it, that server, of which only the databases
# the run creates are dropped on exit. Sets the EXIT trap.
use_test_postgres() {
  if [ -z "${DATABASE_URL:-}" ]; then
    start_throwaway_postgres fsync=off synchronous_commit=off full_page_writes=off
    trap 'drop_created_databases; stop_throwaway_postgres' EXIT
  else
    trap drop_created_databases EXIT
  fi
}
