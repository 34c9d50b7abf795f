#!/usr/bin/env bash
# A three-member Patroni cluster on loopback, as production runs Postgres:
# etcd as the configuration store, Patroni managing PostgreSQL 15 (the
# installed binaries) with synchronous replication, and HAProxy routing to
# the primary by Patroni's REST health checks, cutting the sessions of a
# member marked down (`on-marked-down shutdown-sessions`). tidemark connects
# to HAProxy. Everything is fetched into .tools/ by the project's scripts.
#
#   scripts/ha-cluster.sh start [--dir D] [--async] [--strict] [--skew MEMBER=SECONDS]
#   scripts/ha-cluster.sh url | status | primary | wait-healthy
#   scripts/ha-cluster.sh failover [--isolate MS]   # cut the primary off from its standbys
#                                       # for MS (1000), then SIGKILL its node (Patroni and
#                                       # Postgres); wait for the new primary; bring the old one back
#   scripts/ha-cluster.sh switchover [--to MEMBER]   # planned, through Patroni's REST API
#   scripts/ha-cluster.sh member-url MEMBER          # one member directly, not through HAProxy
#   scripts/ha-cluster.sh stop
#
# The cluster's directory (default /tmp/tidemark-ha, or TIDEMARK_HA_DIR) holds
# cluster.env with DATABASE_URL. Synchronous mode is on unless --async; with
# --strict, Patroni stops writes rather than run without a synchronous
# standby. --skew runs one member (Patroni and its Postgres) on a clock that
# many seconds off (libfaketime), so a failover moves the database clock.
# failover and switchover print one line: `<kind> <old> -> <new> <ms> <t0>`:
# ms from the fault (t0, ms since the epoch: the kill, or the switchover
# request) until HAProxy routed to a writable new primary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/lib/postgres.sh
source scripts/lib/tools.sh

MEMBERS=(pg0 pg1 pg2)
DIR="${TIDEMARK_HA_DIR:-/tmp/tidemark-ha}"

die() { echo "ha-cluster: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

load_env() {
  [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR (start one first)"
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
}

rest_port() { local var="REST_PORT_$1"; echo "${!var}"; }
pg_port() { local var="PG_PORT_$1"; echo "${!var}"; }

# The cluster as Patroni reports it, from any member that answers.
cluster_json() {
  local m
  for m in "${MEMBERS[@]}"; do
    if curl -fsS --max-time 1 "http://127.0.0.1:$(rest_port "$m")/cluster" 2>/dev/null; then return 0; fi
  done
  return 1
}

# The current leader's name (empty when there is none).
leader() {
  cluster_json 2>/dev/null | python3 -c '
import json, sys
try:
    members = json.load(sys.stdin)["members"]
except Exception:
    sys.exit(0)
print(next((m["name"] for m in members if m["role"] == "leader" and m["state"] == "running"), ""))'
}

# Whether HAProxy routes to a writable primary right now.
writable_through_haproxy() {
  PGCONNECT_TIMEOUT=1 psql -qtAX "$DATABASE_URL" -c "SELECT NOT pg_is_in_recovery()" 2>/dev/null | grep -qx t
}

# Healthy: a running leader, and every other member streaming from it (one
# of them a synchronous standby in synchronous mode), and HAProxy routing.
healthy() {
  cluster_json 2>/dev/null | SYNC="$SYNCHRONOUS" python3 -c '
import json, os, sys
members = json.load(sys.stdin)["members"]
leaders = [m for m in members if m["role"] == "leader" and m["state"] == "running"]
standbys = [m for m in members if m["role"] in ("replica", "sync_standby") and m["state"] == "streaming"]
syncs = [m for m in standbys if m["role"] == "sync_standby"]
ok = len(leaders) == 1 and len(standbys) == len(members) - 1 == 2
if os.environ["SYNC"] == "on":
    ok = ok and len(syncs) >= 1
sys.exit(0 if ok else 1)' && writable_through_haproxy
}

wait_healthy() {
  local limit="${1:-120}" start
  start=$(date +%s)
  until healthy; do
    if [ $(($(date +%s) - start)) -ge "$limit" ]; then
      status >&2 || true
      die "the cluster is not healthy after ${limit}s (logs in $DIR)"
    fi
    sleep 0.3
  done
}

start_member() {
  local m="$1" env=()
  if [ -n "${SKEW_MEMBER:-}" ] && [ "$m" = "$SKEW_MEMBER" ]; then
    env=(LD_PRELOAD="$FAKETIME_LIB" FAKETIME="$SKEW_SECONDS" FAKETIME_DONT_FAKE_MONOTONIC=1)
  fi
  local as=()
  [ "$(id -u)" = 0 ] && as=(setpriv --reuid postgres --regid postgres --init-groups --)
  # Its own session (setsid execs in place: $! is Patroni's pid), so a
  # crash can take the whole node at once.
  "${as[@]}" env "${env[@]}" setsid "$PATRONI" "$DIR/$m.yml" >>"$DIR/$m.log" 2>&1 &
  echo $! >"$DIR/$m.pid"
}

# SIGKILL a member's Patroni and its Postgres (postmaster and backends): the
# node is gone, as when its host dies.
kill_member() {
  local m="$1" pid postmaster
  pid=$(cat "$DIR/$m.pid" 2>/dev/null || true)
  postmaster=$(head -n 1 "$DIR/$m/data/postmaster.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null || true
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  if [ -n "$postmaster" ]; then
    pkill -KILL -P "$postmaster" 2>/dev/null || true
    kill -KILL "$postmaster" 2>/dev/null || true
  fi
}

write_member_config() {
  local m="$1" dcs
  # The documented settings (deploy/examples/patroni/patroni-dcs.yaml), with
  # the replication mode this cluster was asked for and loopback sizes.
  dcs=$("$(dirname "$PATRONI")/python" - "$ROOT/deploy/examples/patroni/patroni-dcs.yaml" "$SYNCHRONOUS" "$STRICT" <<'PY'
import json, sys, yaml
dcs = yaml.safe_load(open(sys.argv[1]))
dcs["synchronous_mode"] = sys.argv[2] == "on"
dcs["synchronous_mode_strict"] = sys.argv[3] == "on"
dcs["postgresql"]["parameters"].update(
    {"max_connections": 300, "max_wal_senders": 10, "max_replication_slots": 10, "wal_keep_size": "256MB"}
)
print(json.dumps(dcs))
PY
  )
  cat >"$DIR/$m.yml" <<YAML
scope: tidemark
name: $m
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$m")
  connect_address: 127.0.0.1:$(rest_port "$m")
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs: $dcs
  initdb:
    - encoding: UTF8
    - data-checksums
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$m")
  connect_address: 127.0.0.1:$(pg_port "$m")
  data_dir: $DIR/$m/data
  bin_dir: $PG_BIN_DIR
  pgpass: $DIR/$m/pgpass
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: tidemark
      password: tidemark
    replication:
      username: replicator
      password: replicator
    rewind:
      username: tidemark
      password: tidemark
  parameters:
    unix_socket_directories: $DIR/$m
tags: {}
YAML
}

# The documented configuration (deploy/examples/patroni/haproxy.cfg) on
# this cluster's loopback ports.
write_haproxy_config() {
  {
    grep -v '^  server ' "$ROOT/deploy/examples/patroni/haproxy.cfg" | grep -v '^#' |
      sed "s/^  bind \*:5000\$/  bind 127.0.0.1:$HAPROXY_PORT/"
    local m
    for m in "${MEMBERS[@]}"; do
      echo "  server $m 127.0.0.1:$(pg_port "$m") maxconn 500 check port $(rest_port "$m")"
    done
  } >"$DIR/haproxy.cfg"
  grep -q "bind 127.0.0.1:$HAPROXY_PORT" "$DIR/haproxy.cfg" || die "the example haproxy.cfg has no 'bind *:5000'"
}

start() {
  local synchronous=on strict=off skew=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) DIR="$2"; shift 2 ;;
      --async) synchronous=off; shift ;;
      --strict) strict=on; shift ;;
      --skew) skew="$2"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [ "$strict" = on ] && [ "$synchronous" = off ] && die "--strict needs synchronous mode"
  if [ -f "$DIR/cluster.env" ]; then stop_cluster; fi
  ensure_etcd || die "cannot fetch etcd (Debian's etcd-server)"
  ensure_haproxy || die "cannot fetch haproxy (Debian's haproxy)"
  ensure_patroni || die "cannot install Patroni ($PATRONI_REQUIREMENT)"
  local pg_bin
  pg_bin=$(find_pg_bin) || die "no PostgreSQL binaries"
  local skew_member="" skew_seconds=""
  if [ -n "$skew" ]; then
    skew_member="${skew%%=*}"
    skew_seconds="${skew#*=}"
    [[ " ${MEMBERS[*]} " == *" $skew_member "* ]] || die "--skew: no member $skew_member"
    [[ "$skew_seconds" =~ ^[+-][0-9]+$ ]] || die "--skew: seconds as +N or -N, not $skew_seconds"
    ensure_faketime || die "cannot fetch libfaketime for --skew"
  fi
  mkdir -p "$DIR"
  rm -rf "${DIR:?}"/*
  [ "$(id -u)" = 0 ] && chown postgres: "$DIR"
  {
    echo "SYNCHRONOUS=$synchronous"
    echo "STRICT=$strict"
    echo "PG_BIN_DIR=$pg_bin"
    echo "ETCD_PORT=$(free_port)"
    echo "ETCD_PEER_PORT=$(free_port)"
    echo "HAPROXY_PORT=$(free_port)"
    local m
    for m in "${MEMBERS[@]}"; do
      echo "PG_PORT_$m=$(free_port)"
      echo "REST_PORT_$m=$(free_port)"
    done
    echo "SKEW_MEMBER=$skew_member"
    echo "SKEW_SECONDS=$skew_seconds"
    echo "FAKETIME_LIB=${FAKETIME_LIB:-}"
    echo "PATRONI=$PATRONI"
    echo "HAPROXY=$HAPROXY"
  } >"$DIR/cluster.env"
  load_env
  echo "DATABASE_URL=postgres://tidemark:tidemark@127.0.0.1:$HAPROXY_PORT/postgres" >>"$DIR/cluster.env"
  load_env

  "$ETCD_BIN" --name ha --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "ha=http://127.0.0.1:$ETCD_PEER_PORT" >"$DIR/etcd.log" 2>&1 &
  echo $! >"$DIR/etcd.pid"
  local m
  for m in "${MEMBERS[@]}"; do
    mkdir -p "$DIR/$m"
    chmod 700 "$DIR/$m"
    [ "$(id -u)" = 0 ] && chown postgres: "$DIR/$m"
    write_member_config "$m"
  done
  write_haproxy_config
  "$HAPROXY" -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid" >"$DIR/haproxy.log" 2>&1 || die "haproxy did not start"
  # The first member bootstraps; the others clone it.
  start_member pg0
  local t=0
  until [ "$(leader)" = pg0 ]; do
    sleep 0.5
    t=$((t + 1))
    [ $t -lt 120 ] || { tail -n 30 "$DIR/pg0.log" >&2; die "pg0 did not bootstrap"; }
  done
  start_member pg1
  start_member pg2
  wait_healthy 180
  echo "Patroni cluster up: $DIR (synchronous=$synchronous strict=$strict${skew:+ skew $skew})" >&2
  echo "$DATABASE_URL"
}

stop_cluster() {
  load_env 2>/dev/null || return 0
  local m
  for m in "${MEMBERS[@]}"; do kill_member "$m"; done
  # Whatever else still runs from this directory (a member restarted by hand).
  pkill -KILL -f "patroni $DIR/" 2>/dev/null || true
  pkill -KILL -f "$DIR/pg[0-9]/data" 2>/dev/null || true
  [ -f "$DIR/haproxy.pid" ] && kill "$(cat "$DIR/haproxy.pid")" 2>/dev/null || true
  [ -f "$DIR/etcd.pid" ] && kill "$(cat "$DIR/etcd.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "${DIR:?}"/*
}

status() {
  load_env
  cluster_json | python3 -c '
import json, sys
for m in json.load(sys.stdin)["members"]:
    print("%-5s %-13s %-10s timeline %s lag %s" % (m["name"], m["role"], m["state"], m.get("timeline", "-"), m.get("lag", 0)))'
}

# Waits until a member other than OLD leads and HAProxy routes writes to
# it (at most 120 s from T0, ms); prints its name.
wait_for_new_primary() {
  local old="$1" t0="$2" new
  until new=$(leader) && [ -n "$new" ] && [ "$new" != "$old" ] && writable_through_haproxy; do
    [ $(($(now_ms) - t0)) -lt 120000 ] || die "no new primary within 120 s"
    sleep 0.1
  done
  echo "$new"
}

# The member's standbys stop hearing from it (its WAL senders frozen), as
# when its node loses the network before it dies; it keeps running and, with
# asynchronous replication, acknowledging commits.
isolate_member() {
  local m="$1" postmaster pid
  postmaster=$(head -n 1 "$DIR/$m/data/postmaster.pid" 2>/dev/null) || return 0
  for pid in $(ps -o pid=,args= --ppid "$postmaster" | awk '/walsender/ {print $1}'); do
    kill -STOP "$pid" 2>/dev/null || true
  done
}

# failover: the primary's node is cut off from its standbys for a moment
# (--isolate MS, default 1000; 0 for none), then dies (SIGKILL of Patroni
# and Postgres); Patroni promotes a standby once the leader key expires; the
# old node comes back and rejoins.
failover() {
  load_env
  local isolate=1000
  while [ $# -gt 0 ]; do
    case "$1" in
      --isolate) isolate="$2"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  wait_healthy 120
  local old new t0 t1
  old=$(leader)
  [ -n "$old" ] || die "no leader"
  if [ "$isolate" -gt 0 ]; then
    isolate_member "$old"
    sleep "$(awk -v ms="$isolate" 'BEGIN { print ms / 1000 }')"
  fi
  kill_member "$old"
  t0=$(now_ms)
  new=$(wait_for_new_primary "$old" "$t0") || exit 1
  t1=$(now_ms)
  start_member "$old"
  echo "failover $old -> $new $((t1 - t0)) $t0"
  wait_healthy 180
}

# switchover: a planned change of primary through Patroni's REST API.
switchover() {
  load_env
  local to=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --to) to="$2"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  wait_healthy 120
  local old t0 t1 new i
  old=$(leader)
  if [ -z "$to" ]; then
    for i in 0 1 2; do
      if [ "${MEMBERS[$i]}" = "$old" ]; then to="${MEMBERS[$(((i + 1) % 3))]}"; fi
    done
  fi
  t0=$(now_ms)
  curl -fsS --max-time 60 -XPOST "http://127.0.0.1:$(rest_port "$old")/switchover" \
    -d "{\"leader\": \"$old\", \"candidate\": \"$to\"}" >"$DIR/switchover.out" 2>&1 ||
    { cat "$DIR/switchover.out" >&2; die "switchover $old -> $to refused"; }
  new=$(wait_for_new_primary "$old" "$t0") || exit 1
  t1=$(now_ms)
  [ "$new" = "$to" ] || die "switchover to $to, but $new is the primary"
  echo "switchover $old -> $new $((t1 - t0)) $t0"
  wait_healthy 180
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop_cluster ;;
  url) load_env; echo "$DATABASE_URL" ;;
  member-url) load_env; echo "postgres://tidemark:tidemark@127.0.0.1:$(pg_port "${2:?member}")/postgres" ;;
  status) status ;;
  primary) load_env; leader ;;
  wait-healthy) load_env; wait_healthy "${2:-120}" ;;
  failover) shift; failover "$@" ;;
  switchover) shift; switchover "$@" ;;
  *) sed -n '2,25p' "$0" >&2; exit 2 ;;
esac
