#!/usr/bin/env bash
# Ratio runs, as docs/benchmarks.md describes them: a candidate server against the
# hello-world reference, taking turns on the same pinned core, compared pair by pair.
#
#   bench/ratio.sh [options]
#
# Builds the release binary once, starts candidate and reference on CPU 1 (`taskset -c 1`),
# loads them from CPU 0, warms each, then runs N pairs in A B, B A, ... order. Per run it
# records req/s, p50/p99, errors, status codes and the server's CPU time from /proc/PID/stat;
# it prints the median pair ratio (candidate / reference) of req/s and of requests per
# server-CPU-second with min and max, flags runs that were not CPU-bound (< 95% of a core) or
# had failures, and writes everything as JSON.
#
# Options (defaults in brackets):
#   --candidate CMD    command starting the candidate; its first stdout line must contain
#                      "listening on http://ADDR" (port 0 is fine). $MARQUEE_BIN is the
#                      release binary (or the MARQUEE_BIN given). [the reference itself]
#   --reference CMD    the 100% [$MARQUEE_BIN bench reference --listen 127.0.0.1:0
#                      --get-bytes G --post-bytes P]
#   --get-bytes G      reference GET answer size [5000]
#   --post-bytes P     reference POST answer size [600]
#   --path PATH        request path and query [/]
#   --body-file FILE   POST this body (application/json) instead of GET
#   --header 'N: V'    a header on every request (repeatable), e.g. a browser's User-Agent
#   --pairs N          [8]      --duration S   seconds per run [8]
#   --warmup S         [5]      --connections C [64]
#   --loadgen marquee|wrk   the load generator, the same on both sides [marquee]
#   --busy-poll        the load generator polls instead of sleeping (`marquee bench run
#                      --busy-poll`), so the server's core does not pay for waking it
#                      (docs/benchmarks.md, "What the client's sleep costs the server")
#   --json FILE        [target/bench/ratio-<time>.json]
#   --no-build         use the existing release binary
#
# Examples:
#   bench/ratio.sh                                   # reference against itself
#   bench/ratio.sh --candidate '$MARQUEE_BIN serve --listen 127.0.0.1:0 --data /tmp/mq' \
#                  --path /healthz --get-bytes 2     # the manager's /healthz
#   bench/ratio.sh --body-file crates/openrtb/testdata/iab-2.6/iab-2.6-req-1-simple-banner.json
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
candidate_cmd=""
reference_cmd=""
get_bytes=5000
post_bytes=600
path="/"
body_file=""
pairs=8
duration=8
warmup=5
connections=64
loadgen=marquee
busy_poll=()
headers=()
json_out=""
build=1
server_cpu=1
loadgen_cpu=0

# The defaults and the option loop are deliberately the same shape as the other bench scripts': each
# parses its own options, in plain bash, with no shared parser to learn.
die() { echo "ratio.sh: $*" >&2; exit 64; }
. "$root/bench/lib.sh"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --candidate) candidate_cmd="$2"; shift 2 ;;
    --reference) reference_cmd="$2"; shift 2 ;;
    --get-bytes) get_bytes="$2"; shift 2 ;;
    --post-bytes) post_bytes="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --body-file) body_file="$(realpath "$2")"; shift 2 ;;
    --header) headers+=(-H "$2"); shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --loadgen) loadgen="$2"; shift 2 ;;
    --busy-poll) busy_poll=(--busy-poll); shift ;;
    --json) json_out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$loadgen" == marquee || "$loadgen" == wrk ]] || die "--loadgen is marquee or wrk"
[[ "$loadgen" == marquee || ${#busy_poll[@]} -eq 0 ]] || die "--busy-poll needs --loadgen marquee"
[[ -z "$body_file" || -f "$body_file" ]] || die "no such body file: $body_file"
if [[ "$loadgen" == wrk ]] && ! command -v wrk > /dev/null; then
  die "wrk is not installed (apt-get install wrk)"
fi
[[ "$(nproc --all)" -ge 2 ]] || die "needs two CPUs: one for the server, one for the load"

cd "$root"
build_release "$build"
export MARQUEE_BIN="${MARQUEE_BIN:-$target_dir/release/marquee}"
[[ -x "$MARQUEE_BIN" ]] || die "$MARQUEE_BIN is missing; build it or drop --no-build"
: "${reference_cmd:=\$MARQUEE_BIN bench reference --listen 127.0.0.1:0 --get-bytes $get_bytes --post-bytes $post_bytes}"
: "${candidate_cmd:=$reference_cmd}"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
: "${json_out:=$target_dir/bench/ratio-$stamp.json}"
mkdir -p "$(dirname "$json_out")"
use_workdir

# start NAME CMD: starts a server pinned to the server CPU; sets $started_pid, $started_addr.
start() {
  local name="$1" cmd="$2" out="$work/$1.stdout"
  : > "$out" # exists before the server starts, for the reads below
  taskset -c "$server_cpu" bash -c "exec $cmd" > "$out" 2> "$work/$name.stderr" &
  started_pid=$!
  pids+=("$started_pid")
  started_addr="$(listening_addr "$out" "$started_pid")"
  [[ -n "$started_addr" ]] && return 0
  cat "$work/$name.stderr" >&2
  die "$name did not print 'listening on http://ADDR': $cmd"
}


if [[ -n "$body_file" ]]; then
  lua="$work/post.lua"
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nlocal f = io.open("%s", "rb")\nwrk.body = f:read("*a")\nf:close()\n' \
    "$body_file" > "$lua"
fi

# load ADDR SECONDS OUT: one run of the load generator from the load CPU.
load() {
  local url="http://$1$path" seconds="$2" out="$3"
  if [[ "$loadgen" == marquee ]]; then
    local body=()
    [[ -n "$body_file" ]] && body=(--body-file "$body_file" -X POST -H "Content-Type: application/json")
    taskset -c "$loadgen_cpu" "$MARQUEE_BIN" bench run "$url" -c "$connections" -t 1 \
      -d "${seconds}s" -q --json "$out" "${body[@]}" "${headers[@]}" "${busy_poll[@]}" > /dev/null
  else
    local script=()
    [[ -n "$body_file" ]] && script=(-s "$lua")
    taskset -c "$loadgen_cpu" wrk -t1 -c "$connections" -d "${seconds}s" --latency \
      "${script[@]}" "${headers[@]}" "$url" > "$out"
  fi
}

start candidate "$candidate_cmd"; cand_pid=$started_pid; cand_addr=$started_addr
start reference "$reference_cmd"; ref_pid=$started_pid; ref_addr=$started_addr
echo "candidate pid $cand_pid on http://$cand_addr, reference pid $ref_pid on http://$ref_addr" >&2
echo "load: $loadgen${busy_poll:+ (busy poll)}, $connections connections, ${duration}s runs, $pairs pairs; $(uptime)" >&2

echo "warming each for ${warmup}s ..." >&2
load "$cand_addr" "$warmup" "$work/warm-candidate"
load "$ref_addr" "$warmup" "$work/warm-reference"

runs="$work/runs.tsv"
: > "$runs"
measure() { # measure PAIR ROLE
  local role="$2" pid addr before after out="$work/run-$1-$2"
  if [[ "$role" == candidate ]]; then pid=$cand_pid; addr=$cand_addr; else pid=$ref_pid; addr=$ref_addr; fi
  before="$(cpu_ticks "$pid")"
  load "$addr" "$duration" "$out"
  after="$(cpu_ticks "$pid")"
  printf '%s\t%s\t%s\t%s\n' "$1" "$role" "$out" "$(( after - before ))" >> "$runs"
}
for pair in $(seq "$pairs"); do
  echo "pair $pair/$pairs" >&2
  measure_alternating "$pair" candidate reference
done

RATIO_CLK_TCK="$(getconf CLK_TCK)" RATIO_LOADGEN="$loadgen" RATIO_DATE="$stamp" \
RATIO_BUSY_POLL="${#busy_poll[@]}" \
RATIO_PAIRS="$pairs" RATIO_DURATION="$duration" RATIO_WARMUP="$warmup" \
RATIO_CONNECTIONS="$connections" RATIO_PATH="$path" RATIO_BODY_FILE="$body_file" \
RATIO_HEADERS="$(printf '%s\n' "${headers[@]}" | grep -v '^-H$' || true)" \
RATIO_CANDIDATE="$candidate_cmd" RATIO_REFERENCE="$reference_cmd" \
RATIO_HOST="$(uname -n) $(nproc --all) CPUs, $(uname -r)" \
python3 - "$runs" "$json_out" <<'PY'
import json, os, re, statistics, sys

runs_file, json_out = sys.argv[1], sys.argv[2]
env = os.environ
clk_tck = int(env["RATIO_CLK_TCK"])
loadgen = env["RATIO_LOADGEN"]
settings = {
    "date": env["RATIO_DATE"], "host": env["RATIO_HOST"], "loadgen": loadgen,
    "pairs": int(env["RATIO_PAIRS"]), "duration_s": float(env["RATIO_DURATION"]),
    "warmup_s": float(env["RATIO_WARMUP"]), "connections": int(env["RATIO_CONNECTIONS"]),
    "path": env["RATIO_PATH"], "body_file": env["RATIO_BODY_FILE"] or None,
    "headers": [h for h in env["RATIO_HEADERS"].split("\n") if h],
    "candidate": env["RATIO_CANDIDATE"], "reference": env["RATIO_REFERENCE"],
    "server_cpu": 1, "loadgen_cpu": 0, "busy_poll": env["RATIO_BUSY_POLL"] == "1",
}

def wrk_time(text):
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]

def parse(path):
    if loadgen == "marquee":
        r = json.load(open(path))
        statuses = {int(k): v for k, v in r["statuses"].items()}
        return dict(requests=r["responses"], elapsed_s=r["elapsed_s"], rps=r["throughput"],
                    p50_ms=r["latency"]["p50_ms"], p99_ms=r["latency"]["p99_ms"],
                    errors=r["errors_total"], non_2xx=r["non_2xx"], statuses=statuses,
                    no_bids=r["no_bids"])
    text = open(path).read()
    n, secs = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text).groups()[:2]
    unit = re.search(r"\d+ requests in [\d.]+(ms|s|m)", text).group(1)
    elapsed = float(secs) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[unit]
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return dict(requests=int(n), elapsed_s=elapsed,
                rps=float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
                p50_ms=wrk_time(re.search(r"\s50%\s+(\S+)", text).group(1)),
                p99_ms=wrk_time(re.search(r"\s99%\s+(\S+)", text).group(1)),
                errors=sum(map(int, socket.groups())) if socket else 0,
                non_2xx=int(non2xx.group(1)) if non2xx else 0, statuses=None, no_bids=None)

records = []
for line in open(runs_file):
    pair, role, path, ticks = line.rstrip("\n").split("\t")
    r = parse(path)
    r.update(pair=int(pair), role=role, cpu_s=int(ticks) / clk_tck)
    r["cpu_share"] = r["cpu_s"] / r["elapsed_s"] if r["elapsed_s"] else 0.0
    r["req_per_cpu_s"] = r["requests"] / r["cpu_s"] if r["cpu_s"] else 0.0
    flags = []
    if r["cpu_share"] < 0.95:
        flags.append("not CPU-bound (%.1f%% of a core)" % (100 * r["cpu_share"]))
    if r["errors"] or r["non_2xx"]:
        flags.append("%d errors, %d non-2xx" % (r["errors"], r["non_2xx"]))
    if r["no_bids"]:
        flags.append("%d no-bids (204)" % r["no_bids"])
    r["flags"] = flags
    records.append(r)

print("\n%-5s %-9s %10s %9s %9s %7s %11s  %s" % ("pair", "server", "req/s", "p50 ms", "p99 ms", "cpu", "req/cpu-s", "flags"))
for r in records:
    print("%-5d %-9s %10.0f %9.3f %9.3f %6.1f%% %11.0f  %s" % (
        r["pair"], r["role"], r["rps"], r["p50_ms"], r["p99_ms"], 100 * r["cpu_share"],
        r["req_per_cpu_s"], "; ".join(r["flags"])))

pairs = []
for p in sorted({r["pair"] for r in records}):
    c = next(r for r in records if r["pair"] == p and r["role"] == "candidate")
    f = next(r for r in records if r["pair"] == p and r["role"] == "reference")
    pairs.append(dict(pair=p, rps_ratio=c["rps"] / f["rps"],
                      cpu_ratio=c["req_per_cpu_s"] / f["req_per_cpu_s"] if f["req_per_cpu_s"] else 0.0,
                      valid=not c["flags"] and not f["flags"]))

def spread(key):
    values = [p[key] for p in pairs]
    return dict(median=statistics.median(values), min=min(values), max=max(values))

summary = dict(rps_ratio=spread("rps_ratio"), cpu_ratio=spread("cpu_ratio"),
               valid_pairs=sum(p["valid"] for p in pairs), pairs=len(pairs))
print("\ncandidate / reference over %d pairs (%d without flags):" % (len(pairs), summary["valid_pairs"]))
for key, name in (("rps_ratio", "req/s"), ("cpu_ratio", "requests per server-CPU-second")):
    s = summary[key]
    print("  %-32s median %.3f  (min %.3f, max %.3f)" % (name, s["median"], s["min"], s["max"]))
if summary["valid_pairs"] < len(pairs):
    print("  some runs are flagged: by the method they do not count")
json.dump(dict(settings=settings, summary=summary, pairs=pairs, runs=records), open(json_out, "w"), indent=2)
print("\nJSON: " + json_out)
PY
