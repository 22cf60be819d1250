#!/usr/bin/env bash
# Gateway mode: `marquee serve` with [gateway] in front of N mock bidders
# (`marquee bench mock-bidder`), measured with bench/ratio.sh against the reference
# (CPU per auction, req/s, p99), or in open loop at a fixed rate (p50/p99, per-bidder metrics).
#
#   bench/gateway.sh [options]
#
# Options (defaults in brackets):
#   --bidders N        external mock bidders, each bidding a random 1–3 USD [1]
#   --slow-delay D     make the last bidder answer after D (e.g. 300ms) [none]
#   --internal         let our own line items bid too (an empty catalog: they never bid) [off]
#   --throttle         keep the health score's throttle on (off by default, so that every
#                      auction calls every bidder and the CPU figure is the calls')
#   --rate R           open loop at R req/s for --duration seconds instead of ratio pairs
#   --requests N       closed loop: exactly N requests over --connections C [16] instead of
#                      ratio pairs (the server's CPU per auction, p50/p99)
#   --pairs N [3]  --duration S [5]  --warmup S [3]
#   --json FILE        where ratio.sh / bench run writes its JSON
#
# Mock bidders and the load generator share CPU 0, the server has CPU 1 (the server's CPU per
# auction is the figure to read; the bidders' own work is not in it). Uses the release binary
# as it is (build it once with `cargo build --release -p marquee`).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "gateway.sh: $*" >&2; exit 2; }
. "$root/bench/lib.sh"
bidders=1 slow_delay="" internal=0 throttle=0 rate="" requests="" connections=16 pairs=3 duration=5 warmup=3 json=""
# Option parsing deliberately the same shape as the other bench scripts' and scripts/fuzz.sh's: each
# parses its own options.
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bidders) bidders="$2"; shift 2 ;;
    --slow-delay) slow_delay="$2"; shift 2 ;;
    --internal) internal=1; shift ;;
    --throttle) throttle=1; shift ;;
    --rate) rate="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
bin="${CARGO_TARGET_DIR:-$root/target}/release/marquee"
[[ -x "$bin" ]] || die "$bin is missing: cargo build --release -p marquee"
body="$root/crates/openrtb/testdata/marquee/bench-auction-request.json"
use_workdir

config="$work/gateway.toml"
{
  echo "[gateway]"
  echo "enabled = true"
  if [[ "$internal" == 1 ]]; then echo 'internal_bidder = "marquee"'; else echo 'internal_bidder = ""'; fi
  echo 'admin_token = "gateway-bench-token-0000"'
  [[ "$throttle" == 1 ]] || echo 'health_throttle_below = 0'
} > "$config"
for i in $(seq 1 "$bidders"); do
  delay=0ms
  [[ -n "$slow_delay" && "$i" == "$bidders" ]] && delay="$slow_delay"
  out="$work/bidder-$i.stdout"
  taskset -c 0 "$bin" bench mock-bidder --listen 127.0.0.1:0 --price 1-3 --seat "m$i" \
    --delay "$delay" > "$out" 2> /dev/null &
  pids+=("$!")
  addr="$(listening_addr "$out" "$!")"
  [[ -n "$addr" ]] || die "mock bidder $i did not start"
  printf '[gateway.bidders.m%s]\nendpoint = "http://%s/bid"\nmax_in_flight = 256\n' "$i" "$addr" >> "$config"
done
echo "config:" >&2; sed 's/^/  /' "$config" >&2

serve="$bin serve --config $config --data $work/data --listen 127.0.0.1:0"
# The answer: one bid of about 200 bytes.
if [[ -z "$rate" && -z "$requests" ]]; then
  "$root/bench/ratio.sh" --no-build --candidate "env MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com $serve" \
    --path /openrtb2/auction --body-file "$body" --post-bytes 200 \
    --pairs "$pairs" --duration "$duration" --warmup "$warmup" ${json:+--json "$json"}
  exit 0
fi

out="$work/serve.stdout"
MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com taskset -c 1 $serve > "$out" 2> "$work/serve.stderr" &
server=$!
pids+=("$server")
addr="$(listening_addr "$out" "$server")"
[[ -n "$addr" ]] || { cat "$work/serve.stderr" >&2; die "marquee serve did not start"; }
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
if [[ -n "$requests" ]]; then
  load=(-c "$connections" -n "$requests")
  taskset -c 0 "$bin" bench run "http://$addr/openrtb2/auction" --openrtb "$body" "${load[@]}" -q > /dev/null
  sent="$requests"
else
  load=(-c 64 -r "$rate" -d "${duration}s")
  taskset -c 0 "$bin" bench run "http://$addr/openrtb2/auction" --openrtb "$body" -c 64 \
    -r "$rate" -d "${warmup}s" -q > /dev/null
  sent="$(( ${rate%.*} * duration ))"
fi
before="$(ticks)"
taskset -c 0 "$bin" bench run "http://$addr/openrtb2/auction" --openrtb "$body" "${load[@]}" \
  ${json:+--json "$json"}
after="$(ticks)"
hz="$(getconf CLK_TCK)"
cpu_ms="$(( (after - before) * 1000 / hz ))"
echo "server CPU during the run: ${cpu_ms} ms for ${sent} requests: $(( cpu_ms * 1000 / sent )) µs per auction"
curl -s -H 'Authorization: Bearer gateway-bench-token-0000' "http://$addr/gateway/bidders"
echo
curl -s "http://$addr/metrics" | grep -E '^marquee_gateway_bidder_(requests|wins|timeouts|late|skipped_at_limit|skipped_unhealthy|errors)_total'
