#!/usr/bin/env bash
# Runs every tidemark test: formatting, the structure check and clippy
# first (cheap, before any download), then the whole Rust suite (unit,
# property, storage conformance on SQLite and Postgres, end-to-end gRPC with
# the Rust client and grpcurl, several replicas, a Postgres restart, behind
# PgBouncer), the mutants that prove the checks can fail, the benchmark's
# smoke runs, the fuzzers, the history checker (chaos, a rollout, a Patroni
# failover), the Kubernetes manifests, the Python SDK, the end-to-end tests
# with real Spark reading real Paimon tables, and the exactly-once checker.
#
# Every stage runs even when an earlier one failed; each prints
# `== stage: NAME (N s) passed|FAILED`, and a closing summary lists them all
# and names the failed ones (the exit status is non-zero when any failed).
#
# Without DATABASE_URL it starts a throwaway Postgres from the installed
# PostgreSQL binaries and removes it afterwards. Arguments go to the main
# nextest run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/tools.sh
source scripts/lib/stages.sh

# A fresh clone gains nothing from incremental compilation, which would
# roughly double the target directory's size on a disk shared with others
# (a CI run once failed with "No space left on device").
if [[ -n "${CI:-}" ]]; then
  export CARGO_INCREMENTAL=0
fi
df -h . | tail -1 | awk '{print "disk: " $4 " free on " $6}'

# --- cheap checks, before anything is downloaded
stage fmt cargo fmt --all -- --check
stage structure python3 scripts/check-structure.py
stage clippy cargo clippy --workspace --all-targets --locked -- -D warnings

# --- every tool a test needs; any that cannot be had fails its stage
test_tools() {
  ensure_grpcurl
  ensure_etcd
  ensure_faketime
  ensure_promtool
  ensure_pgbouncer
  ensure_chromium
  ensure_haproxy
}
python_tools() {
  ensure_python_env
  ensure_wheelhouse
}
stage debian-tools ensure_debian_tools
stage nextest-tool ensure_nextest
stage test-tools test_tools
stage python-env python_tools
stage_here postgres use_test_postgres

# --- the Rust suite
stage nextest cargo nextest run --workspace --locked --no-fail-fast "$@"
stage doctests cargo test --workspace --locked --doc

# Behind PgBouncer (Debian's 1.18): the worker-protocol tests in each pool
# mode, and the storage conformance suite in transaction mode (the one that
# changes how every statement is sent), each test's backends reaching the
# database through a PgBouncer of its own (migrations directly), as a
# deployment with --db-pooler does. Both suites in both modes, and longer
# checker runs: scripts/pooler-tests.sh.
pooler_tests() {
  TIDEMARK_TEST_DB_POOLER=session cargo nextest run --locked --no-fail-fast \
    -E 'package(tidemark-e2e) & binary(worker_protocol) & test(/^postgres::/)'
  TIDEMARK_TEST_DB_POOLER=transaction cargo nextest run --locked --no-fail-fast \
    -E '(package(tidemark-store) & binary(postgres)) | (package(tidemark-e2e) & binary(worker_protocol) & test(/^postgres::/))'
}
stage pooler pooler_tests

# Proof that the checks can fail: deliberate bugs (tidemark-core's mutant
# module, compiled into the test build) each switched on in turn must fail
# the suites that guard them. A reduced set here; every mutant:
# scripts/mutants.sh (docs/reliability.md).
stage mutants scripts/mutants.sh fence_ignores_pins recovery_ignores_expired store_skips_version_check \
  lease_ignores_epoch lease_ignores_expiry group_commit_busy_as_written database_acks_before_flush

build_binaries() {
  cargo build --locked -q -p tidemark -p tidemark-bench -p tidemark-fuzz -p tidemark-chaos
  # The binary (built without test features, as a release is) carries none.
  if grep -q TIDEMARK_MUTANT target/debug/tidemark; then
    echo "the tidemark binary carries the test-only mutants" >&2
    return 1
  fi
}
stage binaries build_binaries
export TIDEMARK_BIN="$PWD/target/debug/tidemark"

# The benchmark, as a smoke run (debug build, tiny sizes): every scenario
# against every peer completes without errors. Real figures: scripts/bench.sh.
# Then the database-bound mode (Postgres in a CPU cgroup of half a core): it
# confines, accounts Postgres's CPU from the cgroup, reports WAL per commit,
# and removes its cgroup (docs/performance.md).
bench_smoke() {
  target/debug/tidemark-bench --quick --duration 300ms --warmup 100ms --concurrency 1,4 \
    --fence-consumers 2000 --live-leases 200 --keeper-consumers 500 --keeper-refresh 2s >/dev/null
  local bench_json
  bench_json=$(mktemp)
  target/debug/tidemark-bench --quick --duration 500ms --warmup 200ms --concurrency 4 --scenarios commit \
    --db-cpu 0.5 --json "$bench_json" >/dev/null
  python3 scripts/check-db-cpu-bench.py "$bench_json" 0.5
  rm -f "$bench_json"
}
stage bench-smoke bench_smoke

# Every request decoder and validator, fuzzed through a real server for a
# short while (long runs: see docs/reliability.md), then the same through
# the Postgres store: group-commit statements and the admin SQL under fuzzed
# input. The seed is printed.
fuzz() {
  target/debug/tidemark-fuzz --duration 20s
  local fuzz_db
  fuzz_db=$(fresh_postgres_database tidemark_fuzz)
  target/debug/tidemark-fuzz --duration 15s --database-url "$fuzz_db"
}
stage fuzz fuzz

# The history checker: workers against two replicas on a private durable
# Postgres, with faults injected; every recorded request is checked against
# the SPEC's invariants (long runs: --soak, see docs/reliability.md); then
# the same through PgBouncer in each pool mode, shorter (longer runs:
# scripts/pooler-tests.sh).
chaos() {
  target/debug/tidemark-chaos --duration 40s --fault-every 1s
  target/debug/tidemark-chaos --duration 15s --fault-every 1s --db-pooler session
  target/debug/tidemark-chaos --duration 15s --fault-every 1s --db-pooler transaction
}
stage chaos chaos
# A rollout and a rollback: the previous release (built from its pinned
# commit) and this build on one Postgres, replicas replaced one by one
# under the checker's workers and faults; then the proof that a contract
# step under a rollout fails it. Long runs: scripts/rollout.sh (10 of each).
rollout() {
  scripts/rollout.sh --rollouts 1 -- --fault-every 1s
  scripts/rollout.sh --prove
}
stage rollout rollout
# The same checker against a three-member Patroni cluster (etcd, synchronous
# replication, HAProxy routing by Patroni's health checks): a failover (the
# primary's node cut off from its standbys, then SIGKILLed) and a
# switchover among the other faults; 0 violations and 0 acknowledged
# commits lost, and what the workers waited, are printed. It fetches etcd,
# HAProxy and Patroni itself and fails when it cannot. Long runs (>= 10
# primary changes), asynchronous replication, a skewed member:
# scripts/ha-chaos.sh, see docs/reliability.md.
stage ha-chaos scripts/ha-chaos.sh --duration 100s

# The Python suite runs the real binary against Postgres, in two groups
# side by side, each with a database of its own: the Spark tests
# (clients/python/tests/test_spark_*.py, one local Spark between them) in
# the background, and the others (servers, object stores, the package) with
# the Kubernetes manifest tests in the foreground. Most of either group's
# time is spent waiting (triggers, leases, mirror intervals), so together
# they take little longer than the Spark tests alone; the Spark group's
# output is printed by its own stage when it ends.
spark_log=$(mktemp)
spark_rc=$(mktemp -u)
spark_started=$SECONDS
if spark_db=$(fresh_postgres_database tidemark_spark); then
  (
    set +e
    TIDEMARK_TEST_DATABASE_URL="$spark_db" "${TIDEMARK_PYTHON:-false}" -m pytest -q -p no:cacheprovider \
      clients/python/tests/test_spark_*.py >"$spark_log" 2>&1
    echo $? >"$spark_rc"
  ) &
else
  echo 1 >"$spark_rc"
fi
# Kubernetes manifests: rendered with kubectl kustomize, validated strictly;
# the monitoring component's alert rules checked and unit-tested with
# promtool; every pod started as the kubelet would.
stage deploy "$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider deploy/tests
python_tests() {
  local python_db
  python_db=$(fresh_postgres_database tidemark_python)
  TIDEMARK_TEST_DATABASE_URL="$python_db" "$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider \
    --ignore-glob='*/test_spark_*.py' clients/python/tests
}
stage python python_tests
# The exactly-once checker (SPEC §12 X4), beside the Spark tests: real Spark
# into both sinks (Postgres and Paimon) while drivers are SIGKILLed before
# and after the sinks' commit and at random, a checkpoint is lost, tidemark
# restarts and a zombie query is made, each kind once in a fixed order;
# every row exactly once, no zombie row. Long runs and the two mutants that
# must fail it: docs/reliability.md.
stage exactly-once scripts/exactly-once.sh --seed 1
spark_tests() {
  while [ ! -f "$spark_rc" ]; do sleep 2; done
  echo "--- the Spark tests (clients/python/tests/test_spark_*.py), $((SECONDS - spark_started)) s since they started:"
  cat "$spark_log"
  return "$(cat "$spark_rc")"
}
stage spark spark_tests
rm -f "$spark_log" "$spark_rc"

finish_stages
