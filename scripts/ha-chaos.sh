#!/usr/bin/env bash
# The history checker against a Patroni cluster (scripts/ha-cluster.sh):
# two tidemark replicas through HAProxy, simulated workers, the primary
# failed over (SIGKILL of its node) and switched over every other fault,
# the other faults in between; then every recorded call is checked against
# the SPEC's invariants and the linearizability model. Prints operations
# checked, primary changes, violations, acknowledged commits lost, and how
# long workers waited for their first acknowledged commit after each change.
#
#   scripts/ha-chaos.sh                      # synchronous replication, 6 minutes (>= 10 changes)
#   scripts/ha-chaos.sh --duration 110s      # the short form scripts/test.sh runs
#   scripts/ha-chaos.sh --async              # asynchronous replication: shows what it can lose
#   scripts/ha-chaos.sh --skew pg2=+3        # one member's clock 3 s ahead
#   scripts/ha-chaos.sh --strict --release --json out.json -- --workers 10
#
# Exits non-zero on any violation, except with --async, where losing
# acknowledged commits is the finding being measured.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tools.sh

duration=360s
cluster_args=()
chaos_args=()
profile=debug
asynchronous=""
slack=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --async) asynchronous=1; cluster_args+=(--async); shift ;;
    --strict) cluster_args+=(--strict); shift ;;
    --skew)
      cluster_args+=(--skew "$2")
      # The checker allows the database's clock that far from the workers'.
      seconds="${2#*=}"; seconds="${seconds#[+-]}"
      slack="$((seconds * 1000 + 50))ms"
      shift 2 ;;
    --release) profile=release; shift ;;
    --json) chaos_args+=(--json "$2"); shift 2 ;;
    --) shift; chaos_args+=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

cargo_flags=(--locked -q -p tidemark -p tidemark-chaos)
[ "$profile" = release ] && cargo_flags+=(--release)
cargo build "${cargo_flags[@]}"
ensure_faketime
export TIDEMARK_BIN="$PWD/target/$profile/tidemark"

TIDEMARK_HA_DIR=$(mktemp -d /tmp/tidemark-ha.XXXXXX)
export TIDEMARK_HA_DIR
trap 'scripts/ha-cluster.sh stop; rm -rf "$TIDEMARK_HA_DIR"' EXIT
url=$(scripts/ha-cluster.sh start "${cluster_args[@]}")
psql -qX -v ON_ERROR_STOP=1 "$url" -c "CREATE DATABASE tidemark_chaos" >/dev/null
database="${url%/postgres}/tidemark_chaos"

# Migrations are the replicas' first act; a run of `migrate` through the
# balancer first, then against a standby directly, which must refuse.
"$TIDEMARK_BIN" migrate --database-url "$database" --wait-for-database 30s
standby=""
for member in pg0 pg1 pg2; do
  [ "$(scripts/ha-cluster.sh primary)" = "$member" ] || { standby=$member; break; }
done
standby_url=$(scripts/ha-cluster.sh member-url "$standby")
if "$TIDEMARK_BIN" migrate --database-url "${standby_url%/postgres}/tidemark_chaos" --wait-for-database 0s \
  2>"$TIDEMARK_HA_DIR/standby-migrate.err"; then
  echo "tidemark migrate succeeded against the standby $standby" >&2
  exit 1
fi
grep -q "standby in recovery" "$TIDEMARK_HA_DIR/standby-migrate.err" || {
  cat "$TIDEMARK_HA_DIR/standby-migrate.err" >&2
  echo "tidemark migrate against the standby $standby failed, but not for being a standby" >&2
  exit 1
}
echo "tidemark migrate against the standby $standby: refused, as it must be"

run=(target/"$profile"/tidemark-chaos --database-url "$database" --cluster-control scripts/ha-cluster.sh
  --duration "$duration" --fault-every 1s)
[ -n "$slack" ] && run+=(--clock-slack "$slack")
run+=("${chaos_args[@]}")
if [ -n "$asynchronous" ]; then
  status=0
  "${run[@]}" || status=$?
  echo "asynchronous replication: the checker exited $status (non-zero: it found what failovers lost; see above)"
else
  "${run[@]}"
fi
