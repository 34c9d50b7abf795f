#!/usr/bin/env bash
# Refreshes the console screenshots in docs/console/ (docs/operations.md,
# "Console"): runs the browser tests, which write them under
# target/console-screenshots/, and copies them over. Uses an SQLite store
# unless TIDEMARK_TEST_DATABASE_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tools.sh
ensure_python_env
ensure_chromium
cargo build --locked -q -p tidemark
rm -rf target/console-screenshots
TIDEMARK_BIN="$PWD/target/debug/tidemark" "$TIDEMARK_PYTHON" -m pytest -q -p no:cacheprovider \
  clients/python/tests/test_console.py
mkdir -p docs/console
cp target/console-screenshots/*.png docs/console/
ls -l docs/console/
