#!/usr/bin/env bash
# Installs and starts what the test suite needs beyond the Rust toolchain. Idempotent.
# Today: nothing but the toolchain's own components. Later issues add PostgreSQL, Redis and
# Chromium here (from Debian packages), so that a fresh machine needs no manual step.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "test-deps: cargo is missing; install Rust ($(grep -m1 rust-version Cargo.toml))" >&2
  exit 1
fi
if ! need python3; then
  apt-get update -qq && apt-get install -y -qq python3 >/dev/null
fi
