#!/usr/bin/env bash
# Overload sweeps: open-loop load at 50% to 200% of the edge's peak, with shedding on
# and off in one run, on the ad path or the bid path, the edge inside `marquee serve` or on its
# own following a `marquee manager`.
#
#   bench/overload.sh [--path ad|bid] [--roles serve|split] [--no-build] [--connections C]
#                     [--max-wait W] [--queue-delay Q] [--step S] [--deadline D] [--out DIR]
#
# --path ad   GET /ad?placement=2&format=html&uid=bench on the demo data set; goodput = ads
#             served per second (200 answers with a body).
# --path bid  POST /openrtb2/bid with crates/openrtb/testdata/marquee/bench-request.json (fresh
#             ids in every request, tmax 120 ms) on the demo data set plus the 1,000 exchange
#             line items of bench/bid-line-items.sh; goodput = bids per second (200 answers with
#             a body). Its imp is secure, so the edge runs with edge.public_url
#             https://ads.example.com (without, every answer is a 204).
# --roles serve  `marquee serve` on CPU 1.
# --roles split  `marquee manager` on CPU 0, next to the load generator, and `marquee edge
#             --manager URL` alone on CPU 1 (shared secret in aggregation.token, a data
#             directory each); load starts once the edge serves the manager's snapshot (the same
#             version) and answers a request with an ad or a bid.
#
# The load generator (`marquee bench run`) runs on CPU 0. First a closed-loop run (shedding off:
# what the edge can do) finds the peak P (goodput per second); then, for each of: shedding on
# (MARQUEE_EDGE__MAX_IN_FLIGHT=1024 MARQUEE_EDGE__MAX_QUEUE_DELAY_MS=Q, Q from --queue-delay,
# default 10), shedding off (both 0),
# set on the edge, it offers 0.5P, 0.75P, P, 1.5P and 2P in turn, S each with a pause of 1 s,
# the load generator acting as an exchange would: a request no connection could send within W
# of its intended time is skipped and counted as unsent (`--max-wait`). The two settings take
# turns (on, off, on, off), each on freshly started processes, so that both see the same
# machine. The edge never has more than C requests in flight: the in-flight bound sheds only
# with C above 1,024, the queue-delay bound once C requests take the edge over 10 ms.
#
# Writes to DIR each step's report (`<mode>-<round>/step-<k>.json`, from `marquee bench run
# --json`), the edge's /metrics before and after each step (`step-<k>.before.prom`, `.after.prom`),
# the processes' output (`logs/`), and the summary table (`summary.md`, also printed): per step
# the goodput and its % of P, unsent requests, failed ones (connect errors, timeouts: is the edge
# still reachable?), 204 answers (OpenRTB no-bids, shed ones included), the edge's shed and late
# counters over the step (marquee_bidder_shed_total / _late_total on the bid path,
# marquee_edge_shed_total / _late_total on the ad path), p99, p99.9 and max latency of the
# answers (any status, from their intended send time), and how many answers took longer than D
# (an exchange drops a bid that comes after its tmax), and the load generator's own CPU in %
# of one core (near 100%, its single thread was the bottleneck: its latencies include its own
# wait, and what it could not send is in "unsent").
#
# Defaults: --path ad, --roles serve, C = 256 keep-alive connections, W = 5ms, Q = 10 (ms), S = 3s per step,
# D = 120ms (the tmax of bench-request.json), DIR = target/bench/overload-<path>-<roles>-<time>.
# MARQUEE_BIN picks the binary [target/release/marquee, built first unless --no-build].
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build=1
path_kind=ad
roles=serve
connections=256
max_wait=5ms
queue_delay=10
step=3s
deadline=120ms
out=""
die() { echo "overload.sh: $*" >&2; exit 64; }
while [ $# -gt 0 ]; do
  case "$1" in
    --path) path_kind="$2"; shift ;;
    --roles) roles="$2"; shift ;;
    --no-build) build=0 ;;
    --connections) connections="$2"; shift ;;
    --max-wait) max_wait="$2"; shift ;;
    --queue-delay) queue_delay="$2"; shift ;;
    --step) step="$2"; shift ;;
    --deadline) deadline="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
[[ "$path_kind" == ad || "$path_kind" == bid ]] || die "--path takes ad or bid"
[[ "$roles" == serve || "$roles" == split ]] || die "--roles takes serve or split"
out="${out:-$root/target/bench/overload-$path_kind-$roles-$(date -u +%Y%m%dT%H%M%S)}"

bin="${MARQUEE_BIN:-$root/target/release/marquee}"
if [ "$build" = 1 ]; then
  (cd "$root" && cargo build --release -p marquee --locked)
fi
[[ -x "$bin" ]] || die "$bin is missing (build it, or set MARQUEE_BIN)"
mkdir -p "$out/logs"
work=$(mktemp -d)
edge_pid=""
manager_pid=""
cleanup() {
  for pid in $edge_pid $manager_pid; do kill "$pid" 2>/dev/null || true; done
  for pid in $edge_pid $manager_pid; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

secret="overload-bench-secret-0123456789"
export NO_COLOR=1
bid_request="$root/crates/openrtb/testdata/marquee/bench-request.json"
public_url=()
if [ "$path_kind" = ad ]; then
  url_path='/ad?placement=2&format=html&uid=bench'
  workload=()
  goodput_name="ads served/s"
  counters=(marquee_edge_shed_total marquee_edge_late_total)
  data_args=(--demo --data "$work/data")
else
  url_path=/openrtb2/bid
  workload=(--openrtb "$bid_request")
  goodput_name="bids/s"
  counters=(marquee_bidder_shed_total marquee_bidder_late_total)
  data_args=(--data "$work/data")
  public_url=(MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com)
  "$root/bench/bid-line-items.sh" --data "$work/data" --bin "$bin" >"$out/logs/bid-line-items.log" 2>&1 \
    || { cat "$out/logs/bid-line-items.log" >&2; die "bench/bid-line-items.sh failed"; }
fi

# address NAME PID: waits for the first stdout line of a started process and prints its URL.
address() {
  local found=""
  for _ in $(seq 1 300); do
    found=$(sed -n 's/^marquee listening on //p' "$out/logs/$1.out" | head -1)
    [ -n "$found" ] && { echo "$found"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  cat "$out/logs/$1.err" >&2
  die "$1 did not start"
}

# answers: whether the edge at $addr answers the workload with an ad or a bid.
answers() {
  if [ "$path_kind" = ad ]; then
    grep -q 't/c?t=' <<<"$(curl -sf --max-time 2 "$addr$url_path")"
  else
    [ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
      --data-binary "@$bid_request" "$addr$url_path")" = 200 ]
  fi
}

# edge_version: the snapshot version the edge serves (empty if it does not answer).
edge_version() {
  curl -s --max-time 2 "$addr/metrics" | sed -n 's/^marquee_snapshot_version \([0-9]*\)$/\1/p'
}

# start_edge LABEL ENV...: starts the edge (and for split roles its manager first) with these
# environment settings on the edge; sets $addr once it serves.
start_edge() {
  local label="$1" want=""
  shift
  if [ "$roles" = serve ]; then
    env "${public_url[@]}" "$@" taskset -c 1 "$bin" serve "${data_args[@]}" --listen 127.0.0.1:0 \
      >"$out/logs/serve-$label.out" 2>"$out/logs/serve-$label.err" &
    edge_pid=$!
    addr=$(address "serve-$label" "$edge_pid")
  else
    env MARQUEE_AGGREGATION__TOKEN="$secret" "${public_url[@]}" taskset -c 0 "$bin" manager \
      "${data_args[@]}" --listen 127.0.0.1:0 \
      >"$out/logs/manager-$label.out" 2>"$out/logs/manager-$label.err" &
    manager_pid=$!
    local manager
    manager=$(address "manager-$label" "$manager_pid")
    want=$(curl -s --max-time 5 -D - -o /dev/null -H "Authorization: Bearer $secret" \
      "$manager/snapshot/latest" | tr -d '\r' | sed -n 's/^x-marquee-snapshot-version: //Ip' || true)
    [ -n "$want" ] || die "the manager at $manager has no snapshot"
    env MARQUEE_AGGREGATION__TOKEN="$secret" "${public_url[@]}" "$@" taskset -c 1 "$bin" edge \
      --manager "$manager" --data "$work/edge" --listen 127.0.0.1:0 \
      >"$out/logs/edge-$label.out" 2>"$out/logs/edge-$label.err" &
    edge_pid=$!
    addr=$(address "edge-$label" "$edge_pid")
  fi
  for _ in $(seq 1 300); do
    if [ -z "$want" ] || [ "$(edge_version)" = "$want" ]; then
      answers && return 0
    fi
    sleep 0.1
  done
  die "the edge at $addr serves no ${path_kind} (snapshot $(edge_version), wanted ${want:-any})"
}

stop_edge() {
  for pid in $edge_pid $manager_pid; do
    kill "$pid" 2>/dev/null || die "process $pid stopped before its time (see $out/logs)"
    wait "$pid" 2>/dev/null || true
  done
  edge_pid=""
  manager_pid=""
}

load() {
  taskset -c 0 "$bin" bench run "$addr$url_path" "${workload[@]}" -c "$connections" -q \
    --deadline "$deadline" "$@"
}

on=(MARQUEE_EDGE__MAX_IN_FLIGHT=1024 "MARQUEE_EDGE__MAX_QUEUE_DELAY_MS=$queue_delay")
off=(MARQUEE_EDGE__MAX_IN_FLIGHT=0 MARQUEE_EDGE__MAX_QUEUE_DELAY_MS=0)

echo "$(uptime); $path_kind path, roles $roles, $bin" | tee "$out/summary.md"
start_edge peak "${off[@]}"
load -d 3s >/dev/null # warm-up
load -d 5s --json "$out/peak.json" >/dev/null
stop_edge
read -r peak no_bids <<<"$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['bids']/r['elapsed_s']), r['no_bids'])" "$out/peak.json")"
rates=$(python3 -c "p=$peak; print(' '.join(str(round(p*f)) for f in (0.5,0.75,1.0,1.5,2.0)))")
echo "peak (closed loop, $goodput_name): $peak ($no_bids answers 204); offered rates: $rates" | tee -a "$out/summary.md"

for round in 1 2; do
  for mode in on off; do
    if [ "$mode" = on ]; then start_edge "$mode-$round" "${on[@]}"; else start_edge "$mode-$round" "${off[@]}"; fi
    dir="$out/$mode-$round"
    mkdir -p "$dir"
    load -d 2s >/dev/null # warm-up
    k=0
    for rate in $rates; do
      k=$((k + 1))
      [ "$k" -gt 1 ] && sleep 1 # the edge drains its queue
      curl -s --max-time 10 "$addr/metrics" >"$dir/step-$k.before.prom" || true
      load -r "$rate" -d "$step" --max-wait "$max_wait" --json "$dir/step-$k.json" >/dev/null
      curl -s --max-time 10 "$addr/metrics" >"$dir/step-$k.after.prom" \
        || echo "overload.sh: the edge did not answer /metrics after $mode-$round step $k" >&2
    done
    kill -0 "$edge_pid" 2>/dev/null || die "the edge stopped during $mode-$round (see $out/logs)"
    stop_edge
  done
done

python3 - "$out" "$peak" "$goodput_name" "$deadline" "${counters[@]}" <<'EOF' | tee -a "$out/summary.md"
import glob, json, os, sys
out, peak, goodput_name, deadline, shed_name, late_name = sys.argv[1:]
peak = int(peak)

def counter(path, name):
    try:
        for line in open(path):
            parts = line.split()
            if len(parts) == 2 and parts[0] == name:
                return float(parts[1])
    except OSError:
        pass
    return None

def delta(before, after, name):
    a, b = counter(before, name), counter(after, name)
    return "–" if a is None or b is None else f"{b - a:,.0f}"

print(f"| shedding | round | offered/s | offered % of peak | {goodput_name} | % of peak | unsent | failed "
      f"| 204 | edge shed | edge late | p99 ms | p99.9 ms | max ms | over {deadline} | generator CPU |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for mode, round_ in [(mode, round_) for mode in ("on", "off") for round_ in ("1", "2")]:
    dir_ = os.path.join(out, f"{mode}-{round_}")
    steps = sorted(glob.glob(os.path.join(dir_, "step-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
    for path in steps:
        r = json.load(open(path))
        rate = r["offered_rate"]
        good = r["bids"] / r["elapsed_s"] if r["elapsed_s"] else 0
        lat = r["latency"]
        late = "–" if r.get("over_deadline") is None else f"{r['over_deadline']:,}"
        cpu = "–" if r.get("client_cpu_percent") is None else f"{r['client_cpu_percent']:.0f}%"
        before, after = path[:-5] + ".before.prom", path[:-5] + ".after.prom"
        print(f"| {mode} | {round_} | {rate:,.0f} | {100*rate/peak:.0f}% | {good:,.0f} | {100*good/peak:.0f}% "
              f"| {r['unsent']:,} | {r['errors_total']:,} | {r['no_bids']:,} | {delta(before, after, shed_name)} "
              f"| {delta(before, after, late_name)} | {lat['p99_ms']:.1f} | {lat['p999_ms']:.1f} | {lat['max_ms']:.1f} "
              f"| {late} | {cpu} |")
EOF
echo "reports, edge metrics and logs in $out" >&2
