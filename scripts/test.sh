#!/usr/bin/env bash
# Runs every test of the workspace. The README's second command; .ci/run calls it too.
# Anything the tests need beyond the Rust toolchain is installed and started by
# scripts/test-deps.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# --no-fail-fast: one failing binary must not hide the results of the others.
cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line over all test binaries (cargo prints one per binary, the last often a
# doc-test run with nothing in it).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
exit "$status"
