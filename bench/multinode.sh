#!/usr/bin/env bash
# Split roles on loopback, the long version of crates/marquee/tests/it/multinode.rs as a bench: one
# `marquee manager` and N `marquee edge` processes, `marquee bench run` against every edge at
# once (open loop, the total rate split evenly, ad requests: one logged decision each), the
# manager's /metrics and edge registry sampled every second. For each edge count it prints what
# sizing needs: events aggregated per second, the manager's CPU per million events, how far
# behind the edges' logs aggregation ran (freshness), and how long it took to catch up after the
# load stopped.
#
#   bench/multinode.sh [options]
#
# Options (defaults in brackets):
#   --edges LIST     edge counts to run, comma-separated [1,3]
#   --seconds N      load duration per run [20]
#   --rate N         total ad requests per second, split over the edges [3000]
#   --database URL   the manager's database (postgres://…) [SQLite in the run's directory]
#   --debug          use the debug build instead of the release build (builds much faster)
#
# Everything runs on this machine: the load generators, the edges and the manager share its
# cores, so the figures are the manager's own costs under that contention (read the CPU
# figure, not the wall times, when the machine is busy). The uptime line says how busy it was.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
edge_counts="1,3"
seconds=20
rate=3000
database=""
profile=release

die() { echo "multinode.sh: $*" >&2; exit 64; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --edges) edge_counts="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --database) database="$2"; shift 2 ;;
    --debug) profile=debug; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || die "--seconds takes a positive number"
[[ "$rate" =~ ^[0-9]+$ && "$rate" -gt 0 ]] || die "--rate takes a positive number"
[[ "$edge_counts" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--edges takes counts like 1,3"

cd "$root"
if [[ "$profile" == release ]]; then
  cargo build --release -q -p marquee
else
  cargo build -q -p marquee
fi
bin="${CARGO_TARGET_DIR:-$root/target}/$profile/marquee"
secret="multinode-bench-secret-0123"
key="1:hex:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
work="$(mktemp -d)"
cleanup() {
  for file in "$work"/*.pid; do
    [[ -e "$file" ]] && kill -9 "$(cat "$file")" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

export MARQUEE_AGGREGATION__TOKEN="$secret" MARQUEE_TRACKING__KEYS="[\"$key\"]" \
  MARQUEE_LOG__LEVEL=warn NO_COLOR=1

# Starts a marquee process (its stdout's first line is the address) and prints that address;
# its pid goes to $work/NAME.pid (this runs in a subshell).
start() {
  local name="$1"; shift
  "$bin" "$@" > "$work/$name.out" 2> "$work/$name.err" &
  echo "$!" > "$work/$name.pid"
  for _ in $(seq 300); do
    if grep -q "listening on" "$work/$name.out" 2>/dev/null; then
      sed -n 's/^marquee listening on //p' "$work/$name.out" | head -1
      return
    fi
    sleep 0.1
  done
  cat "$work/$name.err" >&2
  die "$name did not start"
}

metric() { awk -v m="$1" '$1 == m { print $2 }' <<< "$2"; }
# CPU seconds a process has used (user + system).
cpu_secs() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }

echo "$(uptime); $profile build; $seconds s at $rate ad requests/s per run" >&2
printf '%-6s %-12s %-12s %-14s %-12s %-12s %-14s %-10s\n' edges served/s events/s \
  "mgr CPU/M ev" "max lag s" "max backlog" "mean run ms" "catch-up s"
IFS=',' read -r -a counts <<< "$edge_counts"
for n in "${counts[@]}"; do
  run="$work/run-$n"
  mkdir -p "$run"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  manager="$(start "manager-$n" manager --listen "127.0.0.1:$port" --data "$run/manager" --demo \
    ${database:+--database "$database"})"
  edges=()
  for i in $(seq "$n"); do
    edges+=("$(start "edge-$n-$i" edge --listen 127.0.0.1:0 --data "$run/edge-$i" --manager "$manager")")
  done
  registry() { curl -s -H "Authorization: Bearer $secret" "$manager/internal/v1/edges"; }
  for _ in $(seq 100); do
    live=$(registry | { grep -o '"snapshot_current":true' || true; } | wc -l)
    [[ "$live" -eq "$n" ]] && break
    sleep 0.1
  done
  [[ "$live" -eq "$n" ]] || die "only $live of $n edges registered"

  manager_pid=$(cat "$work/manager-$n.pid")
  before=$(curl -s "$manager/metrics")
  cpu_before=$(cpu_secs "$manager_pid")
  loads=()
  for i in "${!edges[@]}"; do
    "$bin" bench run "${edges[$i]}/ad?placement=$((i % 2 + 1))" -r $((rate / n)) -c 16 \
      -d "${seconds}s" --quiet --json "$run/load-$i.json" > /dev/null 2>&1 &
    loads+=("$!")
  done
  max_lag=0 max_backlog=0 run_ms_sum=0 samples=0
  for _ in $(seq "$seconds"); do
    sleep 1
    page=$(curl -s "$manager/metrics")
    lag=$(metric marquee_aggregation_lag_seconds "$page")
    backlog=$(metric marquee_aggregation_backlog_bytes "$page")
    run_s=$(metric marquee_aggregation_last_run_seconds "$page")
    (( lag > max_lag )) && max_lag=$lag
    (( backlog > max_backlog )) && max_backlog=$backlog
    run_ms_sum=$(awk -v a="$run_ms_sum" -v b="${run_s:-0}" 'BEGIN { print a + b * 1000 }')
    samples=$((samples + 1))
  done
  for pid in "${loads[@]}"; do wait "$pid" || true; done
  stopped=$(date +%s.%N)
  for _ in $(seq 600); do
    page=$(curl -s "$manager/metrics")
    [[ "$(metric marquee_aggregation_backlog_bytes "$page")" == 0 ]] && break
    sleep 0.1
  done
  catch_up=$(awk -v a="$stopped" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  cpu_after=$(cpu_secs "$manager_pid")
  events=$(( $(metric marquee_aggregation_events_total "$page") - $(metric marquee_aggregation_events_total "$before") ))
  served=0
  for i in "${!edges[@]}"; do
    answered=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["responses"])' \
      "$run/load-$i.json") || die "no load report from edge $i ($run/load-$i.json)"
    served=$((served + answered))
  done
  printf '%-6s %-12s %-12s %-14s %-12s %-12s %-14s %-10s\n' "$n" "$((served / seconds))" \
    "$((events / seconds))" \
    "$(awk -v c="$cpu_after" -v b="$cpu_before" -v e="$events" 'BEGIN { printf "%.2f s", e ? (c - b) * 1e6 / e : 0 }')" \
    "$max_lag" "$max_backlog" \
    "$(awk -v s="$run_ms_sum" -v n="$samples" 'BEGIN { printf "%.1f", n ? s / n : 0 }')" "$catch_up"
  for pid in $(cat "$work"/edge-"$n"-*.pid) "$manager_pid"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $(cat "$work"/edge-"$n"-*.pid) "$manager_pid"; do
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  done
done
