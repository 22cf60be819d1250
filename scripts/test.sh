#!/usr/bin/env bash
# Runs every test of the workspace. The README's second command; .ci/run calls it too.
# Anything the tests need beyond the Rust toolchain is installed and started by
# scripts/test-deps.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh
cargo test --workspace --locked "$@"
