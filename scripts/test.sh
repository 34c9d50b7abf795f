#!/usr/bin/env bash
# Runs every tidemark test: formatting, clippy, and the whole test suite
# (unit, property, storage conformance on SQLite and Postgres, end-to-end
# gRPC with the Rust client and grpcurl).
#
# Without DATABASE_URL it starts a throwaway Postgres from the installed
# PostgreSQL binaries and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/tools.sh

if [ -z "${DATABASE_URL:-}" ]; then
  # The test cluster trades durability for speed; benchmarks use their own.
  start_throwaway_postgres fsync=off synchronous_commit=off full_page_writes=off
fi
ensure_grpcurl

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --no-fail-fast "$@"
cargo test --workspace --locked --doc
