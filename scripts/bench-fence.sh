#!/usr/bin/env bash
# Times GetRetentionFence's query on a branch with many consumers, on Postgres
# (a throwaway cluster with fsync on, unless DATABASE_URL is set) and SQLite.
#   scripts/bench-fence.sh [--consumers 100000] [--runs 50]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
if [ -z "${DATABASE_URL:-}" ]; then
  start_throwaway_postgres
fi
cargo run --release --locked -q -p tidemark-store --example fence -- "$@"
