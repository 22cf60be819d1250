#!/usr/bin/env bash
# CPU time and context switches per request of one server build, for comparing two builds
# (or two settings, through MARQUEE_* variables in the environment) run in alternation:
#
#   bench/cpu-per-request.sh [--bid | --format F] BIN DATA_DIR PORT N
#
# Starts `BIN serve --demo --data DATA_DIR` on CPU 1, warms it with 20,000 requests, then sends
# N ad requests (GET /ad?placement=2&format=html&uid=bench, 64 connections, the load generator
# `BIN bench run` on CPU 0) and prints the server's user and system CPU per request (fields 14
# and 15 of /proc/PID/stat) and its threads' context switches per 1,000 requests
# (/proc/PID/task/*/status). Use a fresh DATA_DIR per run. --format F asks for another
# format of the ad request (`js`: the async tag's script, which carries the ad code as a
# JavaScript string).
#
# --bid sends bid requests instead (POST /openrtb2/bid with
# crates/openrtb/testdata/marquee/bench-request.json) to `BIN serve --data DATA_DIR` with an
# https public URL; DATA_DIR is a fresh copy of a directory made by bench/bid-line-items.sh.
set -euo pipefail

bid=0
format=html
if [[ "${1:-}" == --bid ]]; then bid=1; shift; fi
if [[ "${1:-}" == --format ]]; then format="${2:-}"; shift 2; fi
[[ $# -eq 4 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
bin="$1" data="$2" port="$3" count="$4"
ticks="$(getconf CLK_TCK)"
if [[ "$bid" == 1 ]]; then
  body="$(cd "$(dirname "$0")/.." && pwd)/crates/openrtb/testdata/marquee/bench-request.json"
  url="http://127.0.0.1:$port/openrtb2/bid"
  load=(--openrtb "$body")
  MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com taskset -c 1 "$bin" serve --data "$data" \
    --listen "127.0.0.1:$port" >"$data.log" 2>&1 &
else
  url="http://127.0.0.1:$port/ad?placement=2&format=$format&uid=bench"
  load=()
  taskset -c 1 "$bin" serve --demo --data "$data" --listen "127.0.0.1:$port" >"$data.log" 2>&1 &
fi
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
  sleep 0.2
done
taskset -c 0 "$bin" bench run "$url" "${load[@]}" -c 64 -n 20000 -q >/dev/null
cpu() { awk '{ print $14, $15 }' "/proc/$pid/stat"; }
switches() { cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s }'; }
read -r user1 sys1 < <(cpu)
switches1="$(switches)"
taskset -c 0 "$bin" bench run "$url" "${load[@]}" -c 64 -n "$count" -q >/dev/null
read -r user2 sys2 < <(cpu)
switches2="$(switches)"
awk -v u="$((user2 - user1))" -v s="$((sys2 - sys1))" -v c="$((switches2 - switches1))" \
    -v n="$count" -v t="$ticks" -v name="$(basename "$bin")" 'BEGIN {
  printf "%s: %.2f µs CPU per request (user %.2f, system %.2f), %.1f context switches per 1,000\n",
    name, (u + s) * 1e6 / t / n, u * 1e6 / t / n, s * 1e6 / t / n, c * 1000 / n }'
