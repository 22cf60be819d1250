#!/usr/bin/env bash
# The long version of the crash test (crates/marquee/tests/it/crash.rs): many rounds of "clients
# fetch ads and fire impression beacons while others send bid requests, kill -9 the server at a
# random moment, restart it, compare the log (impressions, and the bids and no-bids its counter
# records count) with what was answered", in both durability modes, for several group commit
# intervals (the default 5 ms included).
#
#   bench/crash.sh [options]
#
# Each round starts `marquee serve --demo` in a fresh directory; the two modes run one after the
# other (--test-threads 1), so a server shares the machine only with its clients. Every figure is printed by the test (rounds, answered, logged, lost, doubled,
# and in group mode how long before the kill the oldest lost impression was answered). The
# test's assertions apply: strict loses no impression, group loses only impressions answered
# within the bound (commit interval + twice the slowest fsync + 50 ms) of the kill, counted bids
# and no-bids fall short of the answers by at most those answered within that bound in either
# mode, and nothing is logged or counted twice.
#
# Options (defaults in brackets):
#   --rounds N       rounds per mode and interval [20]
#   --intervals LIST group commit intervals in ms, comma-separated [5,20]
#   --seed N         seed of the kill moments [from the clock; printed]
#   --debug          test the debug build instead of the release build (builds much faster)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=20
intervals="5,20"
seed=""
profile=(--release)

die() { echo "crash.sh: $*" >&2; exit 64; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --intervals) intervals="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --debug) profile=(); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$rounds" =~ ^[0-9]+$ && "$rounds" -gt 0 ]] || die "--rounds takes a positive number"

cd "$root"
echo "$(uptime); ${profile[*]:-debug} build, $rounds rounds per mode and interval" >&2
status=0
IFS=',' read -r -a list <<< "$intervals"
for interval in "${list[@]}"; do
  echo "== group commit interval $interval ms" >&2
  # Not MARQUEE_*: the server would refuse those as unknown configuration keys.
  env CRASH_TEST_ROUNDS="$rounds" CRASH_TEST_GROUP_COMMIT_MS="$interval" \
    ${seed:+CRASH_TEST_SEED="$seed"} \
    cargo test "${profile[@]}" -q -p marquee --test it crash:: -- --skip aggregation_crash:: --nocapture --test-threads 1 \
    || status=1
done
exit "$status"
