#!/usr/bin/env bash
# Runs every tidemark test: formatting, clippy, and the whole test suite
# (unit, property, storage conformance on SQLite and Postgres, end-to-end
# gRPC with the Rust client and grpcurl, several replicas, a Postgres
# restart), then the Kubernetes manifests (rendered and validated), the
# Python SDK tests and the end-to-end tests with real Spark reading real
# Paimon tables.
#
# Without DATABASE_URL it starts a throwaway Postgres from the installed
# PostgreSQL binaries and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/tools.sh

# A fresh clone gains nothing from incremental compilation, which would
# roughly double the target directory's size on a disk shared with others
# (a CI run once failed with "No space left on device").
if [[ -n "${CI:-}" ]]; then
  export CARGO_INCREMENTAL=0
fi
df -h . | tail -1 | awk '{print "disk: " $4 " free on " $6}'

use_test_postgres
# Every tool a test needs; any that cannot be fetched fails the run.
ensure_grpcurl
ensure_python_env
ensure_wheelhouse
ensure_etcd
ensure_faketime
ensure_promtool
ensure_pgbouncer
ensure_chromium
ensure_haproxy

cargo fmt --all -- --check
python3 scripts/check-structure.py
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --no-fail-fast "$@"
cargo test --workspace --locked --doc

# Behind PgBouncer (Debian's 1.18): the worker-protocol tests in each pool
# mode, and the storage conformance suite in transaction mode (the one that
# changes how every statement is sent), each test's backends reaching the
# database through a PgBouncer of its own (migrations directly), as a
# deployment with --db-pooler does. Both suites in both modes, and longer
# checker runs: scripts/pooler-tests.sh.
TIDEMARK_TEST_DB_POOLER=session cargo nextest run --locked --no-fail-fast \
  -E 'package(tidemark-e2e) & binary(worker_protocol) & test(/^postgres::/)'
TIDEMARK_TEST_DB_POOLER=transaction cargo nextest run --locked --no-fail-fast \
  -E '(package(tidemark-store) & binary(postgres)) | (package(tidemark-e2e) & binary(worker_protocol) & test(/^postgres::/))'

# Proof that the checks can fail: deliberate bugs (tidemark-core's mutant
# module, compiled into the test build) each switched on in turn must fail
# the suites that guard them. A reduced set here; every mutant:
# scripts/mutants.sh (docs/reliability.md).
scripts/mutants.sh fence_ignores_pins recovery_ignores_expired store_skips_version_check lease_ignores_epoch \
  lease_ignores_expiry group_commit_busy_as_written database_acks_before_flush

cargo build --locked -q -p tidemark -p tidemark-bench -p tidemark-fuzz -p tidemark-chaos
export TIDEMARK_BIN="$PWD/target/debug/tidemark"
# The binary (built without test features, as a release is) carries none.
if grep -q TIDEMARK_MUTANT "$TIDEMARK_BIN"; then
  echo "the tidemark binary carries the test-only mutants" >&2
  exit 1
fi

# The benchmark, as a smoke run (debug build, tiny sizes): every scenario
# against every peer completes without errors. Real figures: scripts/bench.sh.
target/debug/tidemark-bench --quick --duration 300ms --warmup 100ms --concurrency 1,4 \
  --fence-consumers 2000 --live-leases 200 --keeper-consumers 500 --keeper-refresh 2s >/dev/null
# The database-bound mode (Postgres in a CPU cgroup of half a core): it
# confines, accounts Postgres's CPU from the cgroup, reports WAL per commit,
# and removes its cgroup (docs/performance.md).
bench_json=$(mktemp)
target/debug/tidemark-bench --quick --duration 500ms --warmup 200ms --concurrency 4 --scenarios commit \
  --db-cpu 0.5 --json "$bench_json" >/dev/null
python3 scripts/check-db-cpu-bench.py "$bench_json" 0.5
rm -f "$bench_json"

# Every request decoder and validator, fuzzed through a real server for a
# short while (long runs: see docs/reliability.md). The seed is printed.
target/debug/tidemark-fuzz --duration 20s
# The same through the Postgres store: group-commit statements and the admin
# SQL under fuzzed input.
fuzz_db=$(fresh_postgres_database tidemark_fuzz)
target/debug/tidemark-fuzz --duration 15s --database-url "$fuzz_db"

# The history checker: workers against two replicas on a private durable
# Postgres, with faults injected; every recorded request is checked against
# the SPEC's invariants (long runs: --soak, see docs/reliability.md).
target/debug/tidemark-chaos --duration 40s --fault-every 1s
# The same through PgBouncer in each pool mode, shorter (longer runs:
# scripts/pooler-tests.sh).
target/debug/tidemark-chaos --duration 15s --fault-every 1s --db-pooler session
target/debug/tidemark-chaos --duration 15s --fault-every 1s --db-pooler transaction
# A rollout and a rollback: the previous release (built from its pinned
# commit) and this build on one Postgres, replicas replaced one by one
# under the checker's workers and faults; then the proof that a contract
# step under a rollout fails it. Long runs: scripts/rollout.sh (10 of each).
scripts/rollout.sh --rollouts 1 -- --fault-every 1s
scripts/rollout.sh --prove
# The same checker against a three-member Patroni cluster (etcd, synchronous
# replication, HAProxy routing by Patroni's health checks): a failover (the
# primary's node cut off from its standbys, then SIGKILLed) and a
# switchover among the other faults; 0 violations and 0 acknowledged
# commits lost, and what the workers waited, are printed. It fetches etcd,
# HAProxy and Patroni itself and fails when it cannot. Long runs (>= 10
# primary changes), asynchronous replication, a skewed member:
# scripts/ha-chaos.sh, see docs/reliability.md.
scripts/ha-chaos.sh --duration 100s

# The Python suite runs the real binary against Postgres, in two groups
# side by side, each with a database of its own: the Spark tests
# (clients/python/tests/test_spark_*.py, one local Spark between them) in
# the background, and the others (servers, object stores, the package) with
# the Kubernetes manifest tests in the foreground. Most of either group's
# time is spent waiting (triggers, leases, mirror intervals), so together
# they take little longer than the Spark tests alone; the Spark group's
# output is printed when it ends.
spark_db=$(fresh_postgres_database tidemark_spark)
python_db=$(fresh_postgres_database tidemark_python)
spark_log=$(mktemp)
TIDEMARK_TEST_DATABASE_URL="$spark_db" "$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider \
  clients/python/tests/test_spark_*.py >"$spark_log" 2>&1 &
spark_tests=$!
failed=0
# Kubernetes manifests: rendered with kubectl kustomize, validated strictly;
# the monitoring component's alert rules checked and unit-tested with
# promtool; every pod started as the kubelet would.
"$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider deploy/tests || failed=1
TIDEMARK_TEST_DATABASE_URL="$python_db" "$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider \
  --ignore-glob='*/test_spark_*.py' clients/python/tests || failed=1
# The exactly-once checker (SPEC §12 X4), beside the Spark tests: real Spark
# into both sinks (Postgres and Paimon) while drivers are SIGKILLed before
# and after the sinks' commit and at random, a checkpoint is lost, tidemark
# restarts and a zombie query is made, each kind once in a fixed order;
# every row exactly once, no zombie row. Long runs and the two mutants that
# must fail it: docs/reliability.md.
scripts/exactly-once.sh --seed 1 || failed=1
wait "$spark_tests" || failed=1
echo "--- the Spark tests (clients/python/tests/test_spark_*.py):"
cat "$spark_log"
rm -f "$spark_log"
exit "$failed"
