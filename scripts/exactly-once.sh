#!/usr/bin/env bash
# The exactly-once checker (SPEC §12 X4, docs/spark.md "Exactly once"):
# real Spark reading real Paimon tables into tidemark's sinks while a fault
# loop kills drivers inside foreachBatch, deletes checkpoints, restarts
# tidemark and makes zombie queries; then compares the sinks with the tables.
#
#   scripts/exactly-once.sh [--duration SECONDS] [--sink postgres|paimon] [--seed N]
#                           [--mutant skip_position_check|skip_epoch_check] [--keep]
#
# Without --duration each fault kind runs once (what CI runs). A Postgres is
# started for the Postgres sink when DATABASE_URL is not set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/tools.sh

use_test_postgres
ensure_python_env
if [[ -z "${TIDEMARK_BIN:-}" ]]; then
  cargo build --locked -q -p tidemark
  export TIDEMARK_BIN="$PWD/target/debug/tidemark"
fi
"$TIDEMARK_PYTHON" scripts/exactly_once.py "$@"
