#!/usr/bin/env bash
# Runs every test of the workspace. The README's second command; .ci/run calls it too.
# Anything the tests need beyond the Rust toolchain is installed and started by
# scripts/test-deps.sh first.
#
# Tests that need PostgreSQL, Redis or Chromium and Node carry `#[ignore = "needs ..."]`, so
# that plain `cargo test` (the fast tier) leaves them out; here they run with the rest
# (`--include-ignored`), and a missing service fails them.
#
# Arguments go to `cargo test`; those after a `--` go to the test binaries, after
# `--include-ignored`:
#   scripts/test.sh --test it multinode:: -- --nocapture
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh

cargo_args=()
test_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then
    shift
    test_args=("$@")
    break
  fi
  cargo_args+=("$1")
  shift
done
# The test binaries refuse --include-ignored twice, or with --ignored.
include_ignored=(--include-ignored)
for arg in ${test_args[@]+"${test_args[@]}"}; do
  case "$arg" in
  --ignored | --include-ignored) include_ignored=() ;;
  esac
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# --no-fail-fast: one failing binary must not hide the results of the others.
cargo test --workspace --locked --no-fail-fast ${cargo_args[@]+"${cargo_args[@]}"} -- \
  ${include_ignored[@]+"${include_ignored[@]}"} ${test_args[@]+"${test_args[@]}"} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line over all test binaries (cargo prints one per binary, the last often a
# doc-test run with nothing in it).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
exit "$status"
