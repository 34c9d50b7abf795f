#!/usr/bin/env bash
# Proves the checks can fail: runs the test suites that must catch each
# deliberate bug of crates/tidemark-core/src/mutant.rs with that bug switched
# on (TIDEMARK_MUTANT), and prints `mutant | caught by | time`, ending with
# `N of M mutants caught`. Exits non-zero when a mutant survives.
#
# The mutants are compiled into the test build once (tidemark-store's
# dev-dependency enables tidemark-core's `mutants` feature), so no mutant
# costs a build. Needs DATABASE_URL (scripts/test.sh provides one).
#
#   scripts/mutants.sh            every mutant
#   scripts/mutants.sh NAME...    only these
set -euo pipefail
cd "$(dirname "$0")/.."

# Each mutant and the tests that must catch it (a nextest filterset).
declare -A CHECKS=(
  [lease_ignores_epoch]="package(tidemark-core) | package(tidemark-store)"
  [lease_ignores_expiry]="package(tidemark-core) | package(tidemark-store)"
  [fence_ignores_pins]="package(tidemark-core) | package(tidemark-store)"
  [recovery_ignores_expired]="package(tidemark-core) | package(tidemark-store)"
  [store_skips_version_check]="package(tidemark-store)"
)

# Every mutant the code defines must have its checks here, and back.
defined=$(grep -oE '^        "[a-z_]+",$|^    \("[a-z_]+",' crates/tidemark-core/src/mutant.rs | grep -oE '[a-z_]+' | sort)
listed=$(printf '%s\n' "${!CHECKS[@]}" | sort)
if [ "$defined" != "$listed" ]; then
  echo "mutants defined in mutant.rs and listed here differ:" >&2
  diff <(echo "$defined") <(echo "$listed") >&2 || true
  exit 2
fi

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || mapfile -t wanted < <(echo "$listed")

cargo nextest run --workspace --locked --no-run >/dev/null 2>&1 || cargo nextest run --workspace --locked --no-run
printf '%-28s | %-70s | %s\n' mutant "caught by" time
caught=0
for mutant in "${wanted[@]}"; do
  filter=${CHECKS[$mutant]:?unknown mutant $mutant}
  started=$(date +%s)
  log=$(mktemp)
  if TIDEMARK_MUTANT="$mutant" PROPTEST_DISABLE_FAILURE_PERSISTENCE=1 cargo nextest run --workspace --locked --no-fail-fast -E "$filter" >"$log" 2>&1; then
    by="NOT CAUGHT: every check passed"
  else
    failed=$(grep -E '^\s+FAIL \[' "$log" | sed -E 's/.*\) //' | sort -u)
    count=$(echo "$failed" | grep -c . || true)
    by="$count failing, e.g. $(echo "$failed" | head -n 2 | tr '\n' ';' | sed 's/;$//')"
    [ "$count" -gt 0 ] && caught=$((caught + 1)) || by="NOT CAUGHT: the run failed without a failing test (see $log)"
  fi
  printf '%-28s | %-70s | %ss\n' "$mutant" "${by:0:70}" "$(($(date +%s) - started))"
  rm -f "$log"
done
echo "$caught of ${#wanted[@]} mutants caught"
[ "$caught" -eq "${#wanted[@]}" ]
