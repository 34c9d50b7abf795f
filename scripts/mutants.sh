#!/usr/bin/env bash
# Proves the checks can fail: runs the test suites that must catch each
# deliberate bug of crates/tidemark-core/src/mutant.rs with that bug switched
# on (TIDEMARK_MUTANT), and prints `mutant | caught by | time`, ending with
# `N of M mutants caught`. Exits non-zero when a mutant survives.
#
# The mutants are compiled into the test build once (tidemark-store's
# dev-dependency enables tidemark-core's `mutants` feature), so no mutant
# costs a build. Needs DATABASE_URL and FAKETIME_LIB (scripts/test.sh provides
# both; alone: source scripts/lib/tools.sh; ensure_faketime).
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
  [recovery_accepts_any_lease]="package(tidemark-core) | package(tidemark-store)"
  [cache_skips_version_check]="package(tidemark-store)"
  [ack_before_commit]="package(tidemark-store) | package(tidemark-e2e)"
  [group_commit_busy_as_written]="package(tidemark-store)"
  [expiry_by_replica_clock]="package(tidemark-store)"
  [mirror_before_durable]="package(tidemark-e2e) & binary(paimon)"
  # The database's own: only the history checker runs a database it crashes.
  [database_acks_before_flush]=""
)

# Mutants the history checker must catch too: a short run against
# replicas built with the mutants (it judges only what clients saw).
# The value: the fault kinds its run injects ("all", or a list). A short
# run fits four or five faults, so a mutant's run is given the faults that
# expose it, each several times, rather than a draw from all twelve (with
# `all`, ack_before_commit went uncaught in one run of two): leases
# expiring while their holders still act (a paused worker or replica) for
# lease_ignores_expiry; a crash right after acknowledgements go out (a
# replica killed, the database restarted) for ack_before_commit.
declare -A CHAOS=(
  [lease_ignores_expiry]=pause-worker,pause-replica,pause-replica-and-cut-database
  [ack_before_commit]=kill-replica,postgres-restart
  [database_acks_before_flush]=postgres-restart,kill-replica
  [expiry_by_replica_clock]=jump-replica-clock,pause-worker
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
needs_chaos=0
for mutant in "${wanted[@]}"; do [ -n "${CHAOS[$mutant]:-}" ] && needs_chaos=1; done
if [ "$needs_chaos" = 1 ]; then
  # The replicas of the history checker: the binary with the mutants in
  # (scripts/test.sh builds it again without them afterwards).
  cargo build --locked -q -p tidemark-chaos
  cargo build --locked -q -p tidemark --features tidemark-core/mutants
  grep -q TIDEMARK_MUTANT target/debug/tidemark || { echo "the mutants build carries no mutants" >&2; exit 2; }
fi
printf '%-28s | %s | %s\n' mutant "caught by" time
caught=0
for mutant in "${wanted[@]}"; do
  [ -n "${CHECKS[$mutant]+known}" ] || { echo "unknown mutant $mutant" >&2; exit 2; }
  filter=${CHECKS[$mutant]}
  started=$(date +%s)
  log=$(mktemp)
  verdicts=()
  missed=0
  if [ -n "$filter" ]; then
    if TIDEMARK_MUTANT="$mutant" PROPTEST_DISABLE_FAILURE_PERSISTENCE=1 \
      cargo nextest run --workspace --locked --no-fail-fast -E "$filter" >"$log" 2>&1; then
      verdicts+=("NOT CAUGHT by the suites: every check passed")
      missed=1
    else
      failed=$(grep -E '^\s+FAIL \[' "$log" | sed -E 's/.*\) //' | sort -u)
      count=$(echo "$failed" | grep -c . || true)
      if [ "$count" -gt 0 ]; then
        verdicts+=("$count failing tests, e.g. $(echo "$failed" | head -n 1)")
      else
        verdicts+=("NOT CAUGHT: the suites failed without a failing test")
        missed=1
      fi
    fi
  fi
  if [ -n "${CHAOS[$mutant]:-}" ]; then
    # The history checker with faults, replicas running the mutant: caught
    # when it reports violations (not when it merely fails to run).
    faults=()
    [ "${CHAOS[$mutant]}" = all ] || faults=(--faults "${CHAOS[$mutant]}")
    TIDEMARK_MUTANT="$mutant" target/debug/tidemark-chaos --duration 20s --fault-every 1s "${faults[@]}" \
      --tidemark-bin target/debug/tidemark >"$log" 2>&1 || true
    violations=$(grep -oE '^invariant violations: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
    linearizability=$(grep -oE '[0-9]+ failed, [0-9]+ inconclusive' "$log" | head -n 1 || true)
    lost=$(grep -oE 'lost: [0-9]+' "$log" | head -n 1 || true)
    if [ "${violations:-0}" -gt 0 ]; then
      verdicts+=("history checker: $violations violations (${lost:-lost: ?}; linearizability: ${linearizability:-?})")
    else
      verdicts+=("NOT CAUGHT by the history checker")
      missed=1
    fi
  fi
  [ "$missed" = 0 ] && caught=$((caught + 1))
  by=$(printf '%s; ' "${verdicts[@]}")
  printf '%-28s | %s | %ss\n' "$mutant" "${by%; }" "$(($(date +%s) - started))"
  rm -f "$log"
done
echo "$caught of ${#wanted[@]} mutants caught"
[ "$caught" -eq "${#wanted[@]}" ]
