# shellcheck shell=bash
# Stages of a long script under one failure policy: every stage runs, each
# prints a header and its elapsed time, a failed stage is remembered, and
# finish_stages prints a table of all of them and exits non-zero when any
# failed.
#
#   source scripts/lib/stages.sh
#   stage NAME COMMAND [ARGS...]   # runs COMMAND in a subshell under set -e
#   finish_stages                  # the summary; exits with the verdict
#
# A stage's exported variables (PATH, tool locations) reach later stages: a
# stage that succeeds hands its exports back to the script.

STAGE_NAMES=()
STAGE_SECONDS=()
STAGE_RESULTS=()
STAGES_STARTED=$SECONDS

stage() {
  local name=$1 started=$SECONDS exports rc
  shift
  exports=$(mktemp)
  echo "== stage: $name (started at $((SECONDS - STAGES_STARTED)) s)"
  set +e
  (
    set -euo pipefail
    "$@"
    export -p >"$exports"
  )
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    # `declare -x` would make them local to this function: -g keeps them.
    # shellcheck disable=SC1090 # what the stage exported
    source <(sed 's/^declare -x /declare -gx /' "$exports") 2>/dev/null || true
    STAGE_RESULTS+=(passed)
  else
    STAGE_RESULTS+=("FAILED ($rc)")
  fi
  rm -f "$exports"
  STAGE_NAMES+=("$name")
  STAGE_SECONDS+=($((SECONDS - started)))
  echo "== stage: $name ($((SECONDS - started)) s) ${STAGE_RESULTS[-1]}"
}

# stage_here NAME COMMAND [ARGS...]: a stage run in this shell, for one that
# must outlive its stage (a server and its EXIT trap). Its errors must be
# returned, not left to set -e.
stage_here() {
  local name=$1 started=$SECONDS
  shift
  echo "== stage: $name (started at $((SECONDS - STAGES_STARTED)) s)"
  if "$@"; then STAGE_RESULTS+=(passed); else STAGE_RESULTS+=("FAILED ($?)"); fi
  STAGE_NAMES+=("$name")
  STAGE_SECONDS+=($((SECONDS - started)))
  echo "== stage: $name ($((SECONDS - started)) s) ${STAGE_RESULTS[-1]}"
}

finish_stages() {
  local i failed=()
  echo
  echo "== summary ($((SECONDS - STAGES_STARTED)) s in all)"
  for i in "${!STAGE_NAMES[@]}"; do
    printf '%6s s  %-28s %s\n' "${STAGE_SECONDS[$i]}" "${STAGE_NAMES[$i]}" "${STAGE_RESULTS[$i]}"
    [ "${STAGE_RESULTS[$i]}" = passed ] || failed+=("${STAGE_NAMES[$i]}")
  done
  if [ "${#failed[@]}" != 0 ]; then
    echo "FAILED stages: ${failed[*]}"
    exit 1
  fi
  echo "every stage passed"
}
