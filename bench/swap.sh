#!/usr/bin/env bash
# Snapshot swaps under load on the release build: latency of ad requests with and without a
# line item changed through the management API every 100 ms (the goal: a swap under full load
# fails no request and adds no latency spike; crates/marquee/tests/it/swap.rs checks the "fails
# no request" part on every test run, and only prints debug-build latencies).
#
#   bench/swap.sh [options]
#
# Builds the release binary once and starts `marquee serve --demo` on CPU 1 (`taskset -c 1`)
# with a 10 ms compile interval. From CPU 0 it finds the peak ad request rate with a closed-loop
# run, then runs N pairs of open-loop runs (`marquee bench run -r`, latency from the intended
# send time) at a fraction of that peak, each pair one run without and one with swaps, in
# A B, B A, ... order. During a swap run a changer process on CPU 0 PUTs the house line item
# with a new weight every 100 ms, so the manager compiles and the edge swaps in a new snapshot
# about ten times a second. Each pair also loads the hello-world reference (`marquee bench
# reference`, same CPU, same answer size, same rate): its p99 is the machine's noise floor at
# that moment, which on a shared machine can dwarf any effect of the swaps. Per run it records
# requests, ads served, errors, p50 / p99 / p99.9 / max, the server's CPU time, and for swap
# runs the changes made and the snapshots the edge swapped in; it prints the median of each
# condition and the per-pair p99 ratio (with / without swaps), and writes everything as JSON.
#
# Options (defaults in brackets):
#   --pairs N          [4]      --duration S   seconds per run [8]
#   --warmup S         [5]      --connections C [64]
#   --fraction F       open-loop rate as a fraction of the measured peak [0.8]
#   --rate R           open-loop rate in requests/s (instead of --fraction)
#   --every MS         change the line item every MS milliseconds [100]
#   --path PATH        the ad request [/ad?placement=1&format=html]
#   --no-reference     skip the reference runs
#   --json FILE        [target/bench/swap-<time>.json]
#   --no-build         use the existing release binary
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
pairs=4
duration=8
warmup=5
connections=64
fraction=0.8
rate=""
every=100
path="/ad?placement=1&format=html"
json_out=""
build=1
reference=1
server_cpu=1
loadgen_cpu=0

# Option parsing deliberately the same shape as the other bench scripts' (see ratio.sh).
die() { echo "swap.sh: $*" >&2; exit 64; }
. "$root/bench/lib.sh"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pairs) pairs="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --fraction) fraction="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --every) every="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-reference) reference=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$(nproc --all)" -ge 2 ]] || die "needs two CPUs: one for the server, one for the load"
command -v python3 > /dev/null || die "needs python3"

cd "$root"
build_release "$build"
[[ -x "$target_dir/release/marquee" ]] || die "$target_dir/release/marquee is missing; build it or drop --no-build"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
: "${json_out:=$target_dir/bench/swap-$stamp.json}"
mkdir -p "$(dirname "$json_out")"
work="$(mktemp -d)"
# A private copy, so that a rebuild of target/release during the run changes nothing here.
bin="$work/marquee"
cp "$target_dir/release/marquee" "$bin"

server_pid=""
reference_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2> /dev/null || true
  [[ -n "$reference_pid" ]] && kill "$reference_pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

secret=swap-bench-secret
MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS=10 MARQUEE_LOG__LEVEL=info MARQUEE_AGGREGATION__TOKEN=$secret \
  taskset -c "$server_cpu" "$bin" serve --demo --listen 127.0.0.1:0 --data "$work/data" \
  > "$work/server.stdout" 2> "$work/server.stderr" &
server_pid=$!
addr="$(listening_addr "$work/server.stdout" "$server_pid")"
[[ -n "$addr" ]] || { cat "$work/server.stderr" >&2; die "the server did not start"; }
token=""
for _ in $(seq 50); do
  token="$(grep -o 'demo admin token (shown once): mq_[0-9a-f]*' "$work/server.stderr" | grep -o 'mq_[0-9a-f]*' || true)"
  [[ -n "$token" ]] && break
  sleep 0.1
done
[[ -n "$token" ]] || die "no demo admin token on the server's stderr"
base="http://$addr"
echo "server pid $server_pid on $base; $(uptime)" >&2
if [[ "$reference" == 1 ]]; then
  ad_bytes="$(curl -s "$base$path" | wc -c)"
  taskset -c "$server_cpu" "$bin" bench reference --listen 127.0.0.1:0 --get-bytes "$ad_bytes" \
    > "$work/reference.stdout" 2> /dev/null &
  reference_pid=$!
  reference_addr="$(listening_addr "$work/reference.stdout" "$reference_pid")"
  [[ -n "$reference_addr" ]] || die "the reference did not start"
  echo "reference pid $reference_pid on http://$reference_addr answering $ad_bytes bytes" >&2
fi

# The changer: one keep-alive connection, a PUT of the house line item every --every ms until
# killed or --seconds are up; prints "changes N failures M" at the end.
cat > "$work/changer.py" <<'PY'
import http.client, json, signal, sys, time
addr, token, every_ms, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
conn = http.client.HTTPConnection(addr, timeout=5)
auth = {"Authorization": "Bearer " + token}
conn.request("GET", "/api/v1/line-items?q=Subscribe", headers=auth)
item = json.loads(conn.getresponse().read())["items"][0]
assert item["tier"] == "house", item
changes = failures = 0
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
start = time.monotonic()
n = 0
while not stop and time.monotonic() - start < seconds:
    n += 1
    item["weight"] = 100 + (n % 50) * 10
    body = json.dumps(item)
    try:
        conn.request("PUT", "/api/v1/line-items/%d" % item["id"], body=body,
                     headers=dict(auth, **{"Content-Type": "application/json"}))
        response = conn.getresponse()
        answer = response.read()
        if response.status == 200:
            item = json.loads(answer)
            changes += 1
        else:
            failures += 1
            print("PUT answered %d: %s" % (response.status, answer[:200]), file=sys.stderr)
    except Exception as error:  # a failure is counted, and the next tick tries again
        failures += 1
        print("PUT failed: %s" % error, file=sys.stderr)
        conn = http.client.HTTPConnection(addr, timeout=5)
    next_tick = start + n * every_ms / 1000.0
    time.sleep(max(0.0, next_tick - time.monotonic()))
print("changes %d failures %d" % (changes, failures))
PY

swapped_in() { grep -c 'snapshot swapped in' "$work/server.stderr" || true; }
version() { curl -s -o /dev/null -D - -H "Authorization: Bearer $secret" "$base/snapshot/latest" | tr -d '\r' | sed -n 's/^x-marquee-snapshot-version: //Ip'; }

# load URL SECONDS OUT [RATE]: one run of the load generator from the load CPU.
load() {
  local open=()
  [[ -n "${4:-}" ]] && open=(-r "$4")
  taskset -c "$loadgen_cpu" "$bin" bench run "$1" -c "$connections" -t 1 \
    -d "${2}s" -q --json "$3" "${open[@]}" > /dev/null
}

echo "warming for ${warmup}s, then a closed-loop run for the peak ..." >&2
load "$base$path" "$warmup" "$work/warm.json"
if [[ "$reference" == 1 ]]; then
  load "http://$reference_addr/" "$warmup" "$work/warm-reference.json"
fi
load "$base$path" "$duration" "$work/peak.json"
peak="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["throughput"])' "$work/peak.json")"
if [[ -z "$rate" ]]; then
  rate="$(python3 -c 'import sys; print(round(float(sys.argv[1]) * float(sys.argv[2])))' "$peak" "$fraction")"
fi
echo "peak $(printf '%.0f' "$peak") req/s closed loop; open-loop runs at $rate req/s" >&2

runs="$work/runs.tsv"
: > "$runs"
measure() { # measure PAIR CONDITION
  local out="$work/run-$1-$2.json" changes="" swaps_before swaps_after v_before v_after changer_pid=""
  local cpu_before cpu_after pid="$server_pid" url="$base$path"
  if [[ "$2" == reference ]]; then pid="$reference_pid"; url="http://$reference_addr/"; fi
  swaps_before="$(swapped_in)"; v_before="$(version)"; cpu_before="$(cpu_ticks "$pid")"
  if [[ "$2" == swaps ]]; then
    taskset -c "$loadgen_cpu" python3 "$work/changer.py" "$addr" "$token" "$every" \
      "$((duration + 30))" > "$work/changer-$1.out" 2> "$work/changer-$1.err" &
    changer_pid=$!
  fi
  load "$url" "$duration" "$out" "$rate"
  cpu_after="$(cpu_ticks "$pid")"
  if [[ -n "$changer_pid" ]]; then
    kill -TERM "$changer_pid" 2> /dev/null || true
    wait "$changer_pid" || true
    changes="$(cat "$work/changer-$1.out")"
    sleep 0.2
  fi
  swaps_after="$(swapped_in)"; v_after="$(version)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$out" "$(( swaps_after - swaps_before ))" \
    "$v_before-$v_after" "$changes" "$(( cpu_after - cpu_before ))" >> "$runs"
}
for pair in $(seq "$pairs"); do
  echo "pair $pair/$pairs" >&2
  measure_alternating "$pair" quiet swaps
  if [[ "$reference" == 1 ]]; then measure "$pair" reference; fi
done

SWAP_CLK_TCK="$(getconf CLK_TCK)" SWAP_DATE="$stamp" SWAP_PEAK="$peak" SWAP_RATE="$rate" SWAP_EVERY="$every" \
SWAP_PAIRS="$pairs" SWAP_DURATION="$duration" SWAP_CONNECTIONS="$connections" SWAP_PATH="$path" \
SWAP_HOST="$(uname -n) $(nproc --all) CPUs, $(uname -r)" \
python3 - "$runs" "$json_out" <<'PY'
import json, os, statistics, sys

runs_file, json_out = sys.argv[1], sys.argv[2]
env = os.environ
settings = dict(date=env["SWAP_DATE"], host=env["SWAP_HOST"], peak_rps=float(env["SWAP_PEAK"]),
                rate=float(env["SWAP_RATE"]), change_every_ms=int(env["SWAP_EVERY"]),
                pairs=int(env["SWAP_PAIRS"]), duration_s=float(env["SWAP_DURATION"]),
                connections=int(env["SWAP_CONNECTIONS"]), path=env["SWAP_PATH"],
                server_cpu=1, loadgen_cpu=0, compile_interval_ms=10)
records = []
for line in open(runs_file):
    pair, condition, path, swapped, versions, changes, ticks = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    lat = r["latency"]
    rec = dict(pair=int(pair), condition=condition, requests=r["requests"],
               responses=r["responses"], ads=r["bids"], throughput=r["throughput"],
               errors=r["errors_total"], non_2xx=r["non_2xx"], p50_ms=lat["p50_ms"],
               p99_ms=lat["p99_ms"], p999_ms=lat["p999_ms"], max_ms=lat["max_ms"],
               edge_swaps=int(swapped), versions=versions, changer=changes or None,
               cpu_s=int(ticks) / int(env["SWAP_CLK_TCK"]))
    rec["cpu_share"] = rec["cpu_s"] / r["elapsed_s"] if r["elapsed_s"] else 0.0
    rec["cpu_us_per_request"] = 1e6 * rec["cpu_s"] / rec["responses"] if rec["responses"] else 0.0
    flags = []
    if rec["errors"] or rec["non_2xx"]:
        flags.append("%d errors, %d non-2xx" % (rec["errors"], rec["non_2xx"]))
    if condition != "reference" and rec["ads"] != rec["responses"]:
        flags.append("%d answers without an ad" % (rec["responses"] - rec["ads"]))
    if condition == "swaps" and rec["edge_swaps"] == 0:
        flags.append("no swaps")
    rec["flags"] = flags
    records.append(rec)

print("\n%-5s %-9s %9s %8s %8s %8s %8s %8s %5s %7s %6s  %s" % (
    "pair", "run", "answers", "req/s", "p50 ms", "p99 ms", "p99.9", "max ms", "cpu", "us/req",
    "swaps", "flags / changer"))
for r in records:
    print("%-5d %-9s %9d %8.0f %8.3f %8.3f %8.3f %8.2f %4.0f%% %7.2f %6s  %s" % (
        r["pair"], r["condition"], r["responses"], r["throughput"],
        r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"], 100 * r["cpu_share"],
        r["cpu_us_per_request"],
        r["edge_swaps"] if r["condition"] == "swaps" else "-",
        "; ".join(r["flags"] + ([r["changer"]] if r["changer"] else []))))

def median(condition, key):
    values = [r[key] for r in records if r["condition"] == condition]
    return statistics.median(values) if values else None

ratios = []
for p in sorted({r["pair"] for r in records}):
    q = next(r for r in records if r["pair"] == p and r["condition"] == "quiet")
    s = next(r for r in records if r["pair"] == p and r["condition"] == "swaps")
    ratios.append(s["p99_ms"] / q["p99_ms"] if q["p99_ms"] else 0.0)
summary = dict(
    quiet={k: median("quiet", k) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "cpu_us_per_request")},
    swaps={k: median("swaps", k) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "cpu_us_per_request")},
    reference={k: median("reference", k) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "cpu_us_per_request")},
    p99_ratio=dict(median=statistics.median(ratios), min=min(ratios), max=max(ratios)),
    failed=sum(r["errors"] + r["non_2xx"] + r["responses"] - r["ads"]
               for r in records if r["condition"] != "reference"),
    edge_swaps=sum(r["edge_swaps"] for r in records if r["condition"] == "swaps"),
)
print("\nopen loop at %.0f req/s (peak %.0f closed loop), %d pairs of %.0f s, a change every %d ms:"
      % (settings["rate"], settings["peak_rps"], settings["pairs"], settings["duration_s"],
         settings["change_every_ms"]))
for key, name in (("quiet", "without swaps"), ("swaps", "with swaps"), ("reference", "hello world")):
    s = summary[key]
    if s["p99_ms"] is None:
        continue
    print("  %-14s median p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.2f ms; server CPU %.2f us/request" % (
        name, s["p50_ms"], s["p99_ms"], s["p999_ms"], s["max_ms"], s["cpu_us_per_request"]))
r = summary["p99_ratio"]
print("  p99 with / without, per pair: median %.2f (min %.2f, max %.2f)" % (r["median"], r["min"], r["max"]))
print("  failed requests: %d; snapshots swapped into the edge during swap runs: %d"
      % (summary["failed"], summary["edge_swaps"]))
json.dump(dict(settings=settings, summary=summary, runs=records), open(json_out, "w"), indent=2)
print("\nJSON: " + json_out)
PY
