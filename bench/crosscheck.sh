#!/usr/bin/env bash
# Cross-checks `marquee bench run` against wrk on the same server: the reference pinned to
# CPU 1, each generator on CPU 0 in turn (wrk, marquee, marquee, wrk, ...), same connections
# and duration, closed loop. Prints per run req/s, p50/p99 and the server's CPU share, then
# the median marquee/wrk ratio of req/s. Uses the existing release binary (build it first).
#
#   bench/crosscheck.sh [--pairs N (4)] [--duration S (8)] [--connections C (64)]
#                       [--path PATH (/)] [--get-bytes G (5000)]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pairs=4 duration=8 connections=64 path=/ get_bytes=5000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pairs) pairs="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --get-bytes) get_bytes="$2"; shift 2 ;;
    *) echo "crosscheck.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
command -v wrk > /dev/null || { echo "crosscheck.sh: apt-get install wrk" >&2; exit 64; }
bin="${CARGO_TARGET_DIR:-$root/target}/release/marquee"
work="$(mktemp -d)"
taskset -c 1 "$bin" bench reference --listen 127.0.0.1:0 --get-bytes "$get_bytes" \
  > "$work/out" 2> /dev/null &
server=$!
trap 'kill $server 2> /dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  addr="$(sed -n 's|.*listening on http://\([^ /]*\).*|\1|p' "$work/out")"
  [[ -n "$addr" ]] && break
  sleep 0.1
done
url="http://$addr$path"
ticks() { local s; s="$(< "/proc/$server/stat")"; s="${s##*) }"; read -r -a f <<< "$s"; echo $(( f[11] + f[12] )); }
hz="$(getconf CLK_TCK)"

run() { # run wrk|marquee
  local before after
  before="$(ticks)"
  if [[ "$1" == wrk ]]; then
    taskset -c 0 wrk -t1 -c "$connections" -d "${duration}s" --latency "$url" > "$work/wrk.txt"
    after="$(ticks)"
    python3 - "$work/wrk.txt" "$(( after - before ))" "$hz" "$duration" <<'PY'
import re, sys
text, ticks, hz, secs = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}
def lat(p):
    v, u = re.search(r"\s%s%%\s+([\d.]+)(us|ms|s)" % p, text).groups()
    return float(v) * unit[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
print("wrk      %9.0f req/s  p50 %.3f ms  p99 %.3f ms  server cpu %3.0f%%" % (rps, lat(50), lat(99), 100 * ticks / hz / secs))
PY
  else
    taskset -c 0 "$bin" bench run "$url" -c "$connections" -t 1 -d "${duration}s" -q \
      --json "$work/mq.json" > /dev/null
    after="$(ticks)"
    python3 - "$work/mq.json" "$(( after - before ))" "$hz" <<'PY'
import json, sys
r, ticks, hz = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
print("marquee  %9.0f req/s  p50 %.3f ms  p99 %.3f ms  server cpu %3.0f%%" % (r["throughput"], r["latency"]["p50_ms"], r["latency"]["p99_ms"], 100 * ticks / hz / r["elapsed_s"]))
PY
  fi
}

echo "reference on $url (CPU 1), load from CPU 0: $connections connections, ${duration}s runs; $(uptime)"
taskset -c 0 wrk -t1 -c "$connections" -d 3s "$url" > /dev/null # warm-up
for pair in $(seq "$pairs"); do
  if (( pair % 2 == 1 )); then run wrk; run marquee; else run marquee; run wrk; fi
done | tee "$work/log"
python3 - "$work/log" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
wrk = [float(r[1]) for r in rows if r[0] == "wrk"]
mq = [float(r[1]) for r in rows if r[0] == "marquee"]
ratios = [m / w for m, w in zip(mq, wrk)]
print("marquee / wrk req/s per pair: %s; median %.3f" % (", ".join("%.3f" % r for r in ratios), statistics.median(ratios)))
PY
