#!/usr/bin/env bash
# Change without downtime, as Kubernetes makes it: the previous release and
# this one serving one Postgres at the same time. Old replicas serve; a new
# replica starts (it migrates), serves; the old ones are drained (SIGTERM)
# and stopped one by one, each replaced by a new one; then a rollback (the
# new replicas replaced by old ones, serving the migrated schema). The
# history checker's workers call whichever replicas are up the whole time,
# with its usual faults (connection cuts, a Postgres restart, a slow
# database) injected during the steps; then every recorded call is checked
# against the SPEC's invariants. Prints `invariant violations: N`,
# `acknowledged commits: N (lost: N)` and the worker-visible errors by code;
# passes with 0 violations, 0 lost, and no worker-visible error but
# retried UNAVAILABLE.
#
#   scripts/rollout.sh                 # 10 rollouts and 10 rollbacks under load (~6 minutes)
#   scripts/rollout.sh --rollouts 1    # the short form scripts/test.sh runs
#   scripts/rollout.sh --build-only    # only build the previous release's binary
#   scripts/rollout.sh --prove         # proof it can fail: a contract step (a column the
#                                      # previous release reads, dropped once the current
#                                      # build serves) must fail the run
#   scripts/rollout.sh --rollouts 3 -- --workers 10 --keep /tmp/rollout
#
# The previous release's binary is built from its commit (below) with this
# checkout's target directory, so its dependencies come from the cache and
# only tidemark's own crates compile; the clone must have that commit.
set -euo pipefail
cd "$(dirname "$0")/.."

# The previous release: main as it was before the change-without-downtime
# issue (its schema ends at postgres/0008, sqlite/0007). Move it forward
# when a release lands; crates/tidemark-store/tests/migration_rule.rs reads
# it to refuse a contract step this release still needs.
PREVIOUS_RELEASE=872e1abd3f5c04d32fd11a3d3ec22eab57ca104a

rollouts=10
build_only=""
prove=""
chaos_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rollouts) rollouts="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --prove) prove=1; shift ;;
    --) shift; chaos_args+=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

previous_dir="$PWD/target/previous-release"
previous_bin="$previous_dir/tidemark-${PREVIOUS_RELEASE:0:12}"
if [ ! -x "$previous_bin" ]; then
  if ! git cat-file -e "${PREVIOUS_RELEASE}^{commit}" 2>/dev/null; then
    echo "rollout: this clone lacks the previous release's commit $PREVIOUS_RELEASE (pinned in $0):" \
      "fetch it (git fetch --unshallow, or git fetch origin $PREVIOUS_RELEASE)" >&2
    exit 1
  fi
  echo "rollout: building the previous release's tidemark (${PREVIOUS_RELEASE:0:12})"
  # Its sources stay at one path (build scripts keep the path they were
  # built at), extracted with new times so cargo never takes a build from
  # another path for fresh.
  source_dir="$previous_dir/src-${PREVIOUS_RELEASE:0:12}"
  rm -rf "$source_dir"
  mkdir -p "$source_dir"
  git archive "$PREVIOUS_RELEASE" | tar -x -m -C "$source_dir"
  # The shared target directory reuses every dependency already built. Its
  # own crates get a version of their own: cargo names a workspace's units
  # by package, version and path within the workspace, so the two trees'
  # crates would otherwise overwrite each other's builds. (The lock file
  # changes only for them; --offline keeps every dependency as locked.)
  sed -i '0,/^version = "\(.*\)"$/s//version = "\1-previous"/' "$source_dir/Cargo.toml"
  grep -q -- '-previous"$' "$source_dir/Cargo.toml" || { echo "rollout: cannot set the previous release's version" >&2; exit 1; }
  # Building it links target/debug/tidemark to the old build, so nothing
  # may run that binary meanwhile; the current one is linked back below.
  CARGO_TARGET_DIR="$PWD/target" cargo build --offline -q \
    --manifest-path "$source_dir/Cargo.toml" -p tidemark --bin tidemark
  cp target/debug/tidemark "$previous_bin.tmp"
  mv "$previous_bin.tmp" "$previous_bin"
fi
cargo build --locked -q -p tidemark -p tidemark-chaos
case "$("$previous_bin" --version)" in
  *-previous) ;;
  *) echo "rollout: $previous_bin is not the previous release's build" >&2; exit 1 ;;
esac
if cmp -s "$previous_bin" target/debug/tidemark; then
  echo "rollout: target/debug/tidemark is still the previous release's build" >&2
  exit 1
fi
[ -n "$build_only" ] && exit 0

if [ -n "$prove" ]; then
  log=$(mktemp)
  if target/debug/tidemark-chaos --previous-bin "$previous_bin" --rollouts 1 --fault-every 1s \
    --tidemark-bin target/debug/tidemark \
    --contract-sql "ALTER TABLE consumer_keys DROP COLUMN lease_holder" "${chaos_args[@]}" >"$log" 2>&1; then
    grep -v '^replica-' "$log"
    echo "rollout: a contract step under a rollout went unnoticed" >&2
    exit 1
  fi
  grep -E '^(a contract step|rollouts:|worker-visible|invariant violations)|^  [A-Z][A-Za-z]+/' "$log"
  if ! grep -qE '^invariant violations: [1-9]' "$log"; then
    echo "rollout: the run failed, but not by finding the contract step:" >&2
    grep -v '^replica-' "$log" | tail -20 >&2
    exit 1
  fi
  echo "rollout: the contract step failed the run, as it must"
  exit 0
fi
target/debug/tidemark-chaos --previous-bin "$previous_bin" --rollouts "$rollouts" \
  --tidemark-bin target/debug/tidemark "${chaos_args[@]}"
