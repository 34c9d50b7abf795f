#!/usr/bin/env bash
# tidemark behind PgBouncer, the whole matrix: in each pool mode the storage
# conformance suite and the worker-protocol tests, each test's backends
# reaching the database through a PgBouncer of its own (migrations
# directly), as a deployment with --db-pooler does, then the history checker
# for DURATION (default 60s) through the pooler. scripts/test.sh runs a
# shorter form (the conformance suite in transaction mode only, 15 s
# checker runs); see docs/deploy.md, "Behind PgBouncer".
#
#   scripts/pooler-tests.sh [DURATION]
#
# Without DATABASE_URL it starts a throwaway Postgres, as scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/tools.sh
duration=${1:-60s}

use_test_postgres
ensure_pgbouncer
ensure_faketime

cargo build --locked -q -p tidemark-chaos -p tidemark
for mode in session transaction; do
  TIDEMARK_TEST_DB_POOLER=$mode cargo nextest run --locked --no-fail-fast \
    -E '(package(tidemark-store) & binary(postgres)) | (package(tidemark-e2e) & binary(worker_protocol) & test(/^postgres::/))'
done
for mode in session transaction; do
  target/debug/tidemark-chaos --duration "$duration" --fault-every 1s --db-pooler "$mode"
done
