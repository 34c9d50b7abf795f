#!/usr/bin/env bash
# Long libFuzzer runs outside CI (docs/reliability.md): installs cargo-fuzz
# when missing and fuzzes the in-process handlers for the given seconds
# (default 600). Needs the nightly toolchain; the first build with the
# sanitizer takes several minutes.
#
#   scripts/libfuzz.sh          # 10 minutes
#   scripts/libfuzz.sh 3600     # an hour
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
cd fuzz
exec cargo +nightly fuzz run handlers -- -max_total_time="${1:-600}" -print_final_stats=1
