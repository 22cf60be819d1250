#!/usr/bin/env bash
# Counts user-space instructions per bid under callgrind (exact and repeatable on a busy
# machine, unlike time). Starts `marquee serve --data DIR` under
# `valgrind --tool=callgrind --instr-atstart=no`, warms it with WARM bids, switches
# instrumentation on and zeroes the counters, sends exactly N bids on one connection, dumps,
# and prints the total and per-bid count, plus the inclusive cost per bid of the functions
# worth watching (callgrind_annotate --inclusive=yes).
#
#   bench/bid-instructions.sh --data DIR [-n 2000] [--warm 300] [--bin PATH] [--out FILE]
#   bench/bid-instructions.sh --reference [-n 2000] ...
#   bench/bid-instructions.sh --data DIR --get '/ad?placement=2&format=js&uid=bench' ...
#   bench/bid-instructions.sh ... --header 'User-Agent: Mozilla/5.0 ...' (repeatable)
#   bench/bid-instructions.sh --data DIR --path /openrtb2/auction [--body FILE] ...
#
# --reference counts the same for `marquee bench reference --post-bytes 1594` instead (the
# hello-world every ratio is measured against, answering as many bytes as a bid), so the two
# counts compare.
# --get PATH sends `GET PATH` (an ad request, say) instead of the bid request and counts per
# request the same way; the functions listed are then the ad path's.
# --path PATH posts the bid request to PATH instead of /openrtb2/bid (the gateway's
# /openrtb2/auction, say). The server inherits the environment: MARQUEE_GATEWAY__* variables
# configure gateway mode (docs/benchmarks.md, "Unified auction").
# --body FILE posts FILE instead of the bid request below.
# DIR comes from bench/bid-line-items.sh. The request is
# crates/openrtb/testdata/marquee/bench-request.json; the imp is secure, so the server's
# public URL is https (plain-http notice URLs would fail the response check).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
data=""
reference=0
count=2000
warm=300
bin="${CARGO_TARGET_DIR:-$root/target}/release/marquee"
out=""
body=""
get=""
path="/openrtb2/bid"
headers=()
die() { echo "bid-instructions.sh: $*" >&2; exit 64; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --reference) reference=1; shift ;;
    -n) count="$2"; shift 2 ;;
    --warm) warm="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --get) get="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --body) body="$2"; shift 2 ;;
    --header) headers+=(-H "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$reference" == 1 || ( -n "$data" && -d "$data" ) ]] ||
  die "--data DIR (from bench/bid-line-items.sh) or --reference is required"
[[ -x "$bin" ]] || die "$bin is missing (cargo build --release -p marquee, or --bin)"
command -v valgrind >/dev/null || die "valgrind is not installed"

work="$(mktemp -d)"
out="${out:-/tmp/bid-instructions.$$.out}"
body="${body:-$root/crates/openrtb/testdata/marquee/bench-request.json}"
[[ -f "$body" ]] || die "$body is missing"
pid=""
cleanup() {
  [[ -z "$pid" ]] || kill "$pid" 2>/dev/null || true
  [[ -z "$pid" ]] || wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [[ "$reference" == 1 ]]; then
  server=(bench reference --listen 127.0.0.1:0 --post-bytes 1594)
else
  server=(serve --data "$data" --listen 127.0.0.1:0)
fi
MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com valgrind --tool=callgrind --instr-atstart=no \
  --callgrind-out-file="$out" "$bin" "${server[@]}" >"$work/serve.log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 1 600); do
  addr="$(sed -n 's|.*listening on http://\([^ /]*\).*|\1|p' "$work/serve.log" | head -n 1)"
  [[ -n "$addr" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; die "the server exited"; }
  sleep 0.2
done
[[ -n "$addr" ]] || die "the server did not print 'listening on http://ADDR'"
url="http://$addr$path"
load=(--openrtb "$body")
if [[ -n "$get" ]]; then
  url="http://$addr$get"
  load=()
fi
load+=("${headers[@]}")
# The manager's first aggregation run loads the stored dedupe set, a one-off cost that must not
# land inside the measured window: wait for two runs to have finished.
for _ in $(seq 1 600); do
  [[ "$reference" == 1 ]] && break
  runs="$(curl -s "http://$addr/metrics" | sed -n 's/^marquee_aggregation_runs_total \([0-9]*\)$/\1/p')"
  [[ "${runs:-0}" -ge 2 ]] && break
  sleep 0.2
done

"$bin" bench run "$url" "${load[@]}" -c 1 -n "$warm" -q --seed 1 >/dev/null
callgrind_control -i on "$pid" >/dev/null
callgrind_control -z "$pid" >/dev/null
"$bin" bench run "$url" "${load[@]}" -c 1 -n "$count" -q --seed 2 --json "$work/run.json" >/dev/null
callgrind_control -d "$pid" >/dev/null
sleep 1

dump="$(ls -t "$out"* | head -n 1)"
total="$(callgrind_annotate "$dump" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)"
echo "answers: $(grep -E '^  "(bids|no_bids|errors_total)"' "$work/run.json" | tr -d ' \n')"
echo "instructions: $total total, $((total / count)) per request ($count requests)"
echo "inclusive per request:"
callgrind_annotate --inclusive=yes "$dump" 2>/dev/null |
  grep -E 'serve_here|Gateway::auction|programmatic::run|bid::bid[^a-z_]|BidRequest::parse|Engine::select|engine::.*select|write_json|validate_response|json::write_str|render::fill|render::json_string|ad::ad[^a-z_]|fill_tracked|notice::|aggregat|Visitor::of|marquee_device::detect|LookupCache::lookup' |
  head -n 24 |
  awk -v n="$count" '{ gsub(",", "", $1); printf "  %8d  %s\n", $1 / n, substr($0, index($0, $2)) }'
echo "dump: $dump"
