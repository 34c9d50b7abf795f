#!/usr/bin/env bash
# Throughput of the tidemark_paimon Spark source against pypaimon's own read
# of the same snapshots (docs/spark.md): a 10-million-row append table by
# default, 5 rounds, medians and ratios printed. Bench-only (not in CI).
#
#   scripts/bench-spark-read.sh
#   scripts/bench-spark-read.sh --rows 1000000 --rounds 3 --json out.json
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tools.sh
ensure_python_env
# The server answers a handful of calls per query (lease, recovery, commit):
# the debug build is enough, and it is the one the tests already built.
cargo build --locked -q -p tidemark
TIDEMARK_BIN="$PWD/target/debug/tidemark" exec "$TIDEMARK_PYTHON" clients/python/bench/stream_read.py "$@"
