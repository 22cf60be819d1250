#!/usr/bin/env bash
# Installs and starts what the test suite needs beyond the Rust toolchain. Idempotent, and
# silent when everything is present.
# - python3 (scripts).
# - For the end-to-end browser test (crates/marquee/tests/browser.rs): Chromium from Debian's
#   `chromium` package (/usr/bin/chromium); a check for Node.js >= 20 with npm; the test's Node
#   dependencies (playwright-core, pinned in tests/browser/package-lock.json) with `npm ci`.
#   Playwright never downloads a browser here: the test drives Debian's Chromium.
# Later issues add PostgreSQL and Redis here (from Debian packages), so that a fresh machine
# needs no manual step.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "test-deps: cargo is missing; install Rust ($(grep -m1 rust-version Cargo.toml))" >&2
  exit 1
fi

# Debian packages, with one `apt-get update` at most per run.
apt_updated=
apt_install() {
  if ! need apt-get; then
    echo "test-deps: $* missing and no apt-get to install it with" >&2
    exit 1
  fi
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! need python3; then
  apt_install python3
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "test-deps: installing chromium (Debian) for the browser test" >&2
  apt_install chromium
fi
# Node.js 20 or newer with npm (playwright-core needs it). The machine image brings it; Debian
# bookworm's own nodejs is 18, too old, so it is not installed from there.
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ] || ! need npm; then
  echo "test-deps: the browser test needs Node.js >= 20 with npm (found: $(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none))" >&2
  exit 1
fi

# The browser test's driver: playwright-core exactly as locked.
browser=tests/browser
if [ ! -d "$browser/node_modules/playwright-core" ] ||
  [ "$browser/package-lock.json" -nt "$browser/node_modules/.package-lock.json" ]; then
  echo "test-deps: npm ci in $browser" >&2
  (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
