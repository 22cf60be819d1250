#!/usr/bin/env bash
# Installs and starts what the test suite needs beyond the Rust toolchain. Idempotent, and
# silent when everything is present.
# - python3 (scripts); curl and jq (the README's tour, crates/marquee/tests/it/readme_tour.rs).
# - For the end-to-end browser test (crates/marquee/tests/it/browser.rs): Chromium from Debian's
#   `chromium` package (/usr/bin/chromium); a check for Node.js >= 20 with npm; the tests' Node
#   dependencies (playwright-core; prebid.js for the Prebid test's page; pinned in
#   tests/browser/package-lock.json) with `npm ci`.
#   Playwright never downloads a browser here: the test drives Debian's Chromium.
# - PostgreSQL and Redis from Debian packages, each started as a test server of its own on a
#   fixed loopback port (sections below), so that a fresh machine needs no manual step.
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
for tool in curl jq; do
  if ! need "$tool"; then
    apt_install "$tool"
  fi
done
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

# The browser tests' driver, playwright-core, and what the Prebid test's page loads, Prebid.js
# (its npm package ships a prebuilt file, so there is nothing to build); both exactly as locked,
# installed again only when the lockfile changes.
browser=tests/browser
if [ ! -d "$browser/node_modules/playwright-core" ] ||
  [ ! -d "$browser/node_modules/prebid.js" ] ||
  [ "$browser/package-lock.json" -nt "$browser/node_modules/.package-lock.json" ]; then
  echo "test-deps: npm ci in $browser" >&2
  (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# PostgreSQL for the PostgreSQL store's tests (crates/store/tests/it/postgres.rs, and anything that
# runs a manager on PostgreSQL): Debian's server package, and a throwaway cluster of its own in
# $pg_data, listening on 127.0.0.1:$pg_port only, superuser `marquee` trusted on loopback. The
# server refuses to run as root, so as root the cluster belongs to the `postgres` system user
# the package creates. Tests reach it at postgres://marquee@127.0.0.1:25432/postgres unless
# MARQUEE_TEST_POSTGRES_URL names another server (then nothing is started here).
# Below the kernel's ephemeral range (32768-60999 by default), so that no client socket of a
# test or benchmark can hold the port when the server starts.
pg_port=25432
pg_data=/var/tmp/marquee-test-pg
# The newest installed server's bin directory, or nothing (never fails: `set -e` is on).
pg_bin_dir() { { ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true; } | sort -V | tail -n1; }
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}
if [ -z "${MARQUEE_TEST_POSTGRES_URL:-}" ]; then
  pg_bin=$(pg_bin_dir)
  if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/pg_ctl" ]; then
    echo "test-deps: installing postgresql (Debian) for the PostgreSQL store's tests" >&2
    apt_install postgresql
    pg_bin=$(pg_bin_dir)
    if [ -z "$pg_bin" ]; then
      echo "test-deps: the postgresql package installed no server under /usr/lib/postgresql" >&2
      exit 1
    fi
  fi
  if [ ! -s "$pg_data/PG_VERSION" ]; then
    echo "test-deps: creating the test PostgreSQL cluster in $pg_data" >&2
    mkdir -p "$pg_data"
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres: "$pg_data"
    fi
    chmod 700 "$pg_data"
    as_pg "$pg_bin/initdb" -D "$pg_data" -U marquee --auth=trust -E UTF8 --no-locale >/dev/null
    cat >>"$pg_data/postgresql.conf" <<CONF
# marquee test cluster (scripts/test-deps.sh)
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_data'
max_connections = 300
CONF
  fi
  if ! as_pg "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; then
    # The port on the command line too: a cluster made before the port moved has the old one
    # in its postgresql.conf.
    as_pg "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_data/server.log" -o "-p $pg_port" -w -t 60 start >/dev/null
  fi
fi

# Redis for the shared-state tests (crates/sharedstate, the multi-node test): Debian's
# `redis-server`, one instance on 127.0.0.1:$redis_port, daemonized, without persistence (no
# RDB, no AOF), started only when it does not answer yet. Tests reach it at
# redis://127.0.0.1:26379 unless MARQUEE_TEST_REDIS_URL names another server (then nothing is
# started here). The tests that stop and resume a server start their own from the same binary.
redis_port=26379 # below the ephemeral range, as pg_port
redis_dir=/var/tmp/marquee-test-redis
if ! need redis-server || ! need redis-cli; then
  echo "test-deps: installing redis-server (Debian) for the shared-state tests" >&2
  apt_install redis-server redis-tools
fi
if [ -z "${MARQUEE_TEST_REDIS_URL:-}" ] &&
  [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" != "PONG" ]; then
  mkdir -p "$redis_dir"
  redis-server --bind 127.0.0.1 --port "$redis_port" --daemonize yes --save '' \
    --appendonly no --dir "$redis_dir" --pidfile "$redis_dir/redis.pid" \
    --logfile "$redis_dir/redis.log"
  for _ in $(seq 50); do
    [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = "PONG" ] && break
    sleep 0.1
  done
  if [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" != "PONG" ]; then
    echo "test-deps: redis-server did not start on 127.0.0.1:$redis_port (see $redis_dir/redis.log)" >&2
    exit 1
  fi
fi
