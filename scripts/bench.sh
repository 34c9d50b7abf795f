#!/usr/bin/env bash
# Benchmarks tidemark against raw Postgres and etcd doing the same work, side
# by side in one run (see docs/performance.md). Builds in release mode, fetches
# etcd from Debian's etcd-server package into .tools/, and starts a private
# durable Postgres unless BENCH_DATABASE_URL is set.
#
#   scripts/bench.sh                 # the full run (~15 min)
#   scripts/bench.sh --quick         # a smoke run (~2 min)
#   scripts/bench.sh --json out.json # also write the results as JSON
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tools.sh
ensure_etcd || echo "could not fetch etcd: the etcd peer is skipped" >&2
cargo build --release --locked -q -p tidemark -p tidemark-bench
# The fleet scenario holds 1,000 client connections (and the server as
# many): raise the open-file limit as far as this shell may.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec target/release/tidemark-bench "$@"
