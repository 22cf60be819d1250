#!/usr/bin/env bash
# Overload sweeps (issue 7): open-loop load on the ad path at 50% to 200% of the edge's peak,
# with shedding on (the defaults: in-flight bound and queue delay) and off, in one run.
#
#   bench/overload.sh [--no-build] [--connections C] [--max-wait W] [--step S] [--out DIR]
#
# Starts `marquee serve --demo` on CPU 1 and loads it from CPU 0. First a closed-loop run finds
# the peak P (answers per second); then, for each of: shedding on, shedding off, it sweeps the
# offered rate over 0.5P, 0.75P, P, 1.5P, 2P with `marquee bench run --sweep`, the load
# generator acting as an exchange would (a request no connection could send within W of its
# intended time is skipped and counted as unsent, `--max-wait`). The two servers take turns
# (on, off, on, off) so that both see the same machine. Writes one JSON per sweep and a
# summary table (goodput = ads served per second, p99 and max of answered requests from their
# intended send time) to DIR.
#
# Defaults: C = 256 keep-alive connections, W = 5ms, S = 3s per step, DIR = target/bench/overload-<time>.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build=1
connections=256
max_wait=5ms
step=3s
out="$root/target/bench/overload-$(date -u +%Y%m%dT%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --connections) connections="$2"; shift ;;
    --max-wait) max_wait="$2"; shift ;;
    --step) step="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "overload.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

bin="${MARQUEE_BIN:-$root/target/release/marquee}"
if [ "$build" = 1 ]; then
  (cd "$root" && cargo build --release -p marquee --locked)
fi
mkdir -p "$out"
data=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$data"' EXIT
path='/ad?placement=2&format=html&uid=bench'

# start_server ENV...: starts the edge with these environment settings, sets $server and $addr.
start_server() {
  env "$@" taskset -c 1 "$bin" serve --demo --data "$data" --listen 127.0.0.1:0 >"$data/server.log" 2>&1 &
  server=$!
  addr=""
  for _ in $(seq 1 100); do
    addr=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$data/server.log" | head -1 || true)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "overload.sh: the server did not start" >&2; cat "$data/server.log" >&2; exit 1; }
  for _ in $(seq 1 100); do
    curl -sf "$addr$path" | grep -q 't/c?t=' && return 0
    sleep 0.1
  done
  echo "overload.sh: the server serves no ad" >&2
  exit 1
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; }
load() { taskset -c 0 "$bin" bench run "$addr$path" -c "$connections" -q "$@"; }

on=(MARQUEE_EDGE__MAX_IN_FLIGHT=1024 MARQUEE_EDGE__MAX_QUEUE_DELAY_MS=10)
off=(MARQUEE_EDGE__MAX_IN_FLIGHT=0 MARQUEE_EDGE__MAX_QUEUE_DELAY_MS=0)

start_server "${on[@]}"
load -d 3s >/dev/null # warm-up
load -d 5s --json "$out/peak.json" >/dev/null
stop_server
peak=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['bids']/r['elapsed_s']))" "$out/peak.json")
rates=$(python3 -c "p=$peak; print(','.join(str(round(p*f)) for f in (0.5,0.75,1.0,1.5,2.0)))")
echo "peak (closed loop, ads served per second): $peak; offered rates: $rates"

for round in 1 2; do
  for mode in on off; do
    if [ "$mode" = on ]; then start_server "${on[@]}"; else start_server "${off[@]}"; fi
    load -d 2s >/dev/null # warm-up
    load --sweep "$rates" -d "$step" --sweep-pause 1s --max-wait "$max_wait" \
      --json "$out/sweep-$mode-$round.json" >/dev/null
    stop_server
  done
done

python3 - "$out" "$peak" <<'EOF'
import json, sys, glob, os
out, peak = sys.argv[1], int(sys.argv[2])
print(f"| shedding | round | offered/s | offered % of peak | ads served/s | % of peak | unsent | p99 ms | max ms |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in sorted(glob.glob(os.path.join(out, "sweep-*.json"))):
    mode, round_ = os.path.basename(path)[6:-5].split("-")
    for step in json.load(open(path))["sweep"]:
        r, rate = step["report"], step["offered_rate"]
        served = r["bids"] / r["elapsed_s"] if r["elapsed_s"] else 0
        lat = r["latency"]
        print(f"| {mode} | {round_} | {rate:,.0f} | {100*rate/peak:.0f}% | {served:,.0f} | {100*served/peak:.0f}% | {r['unsent']:,} | {lat['p99_ms']:.1f} | {lat['max_ms']:.1f} |")
EOF
