#!/usr/bin/env bash
# Fuzzes every parser of outside input (the targets in fuzz/, see docs/reliability.md).
#
#   scripts/fuzz.sh [options]
#
# Builds all targets once (cargo-fuzz, nightly; both installed when missing), then runs each
# for a fixed time from a fresh corpus seeded with fuzz/seeds/<target>/ and the OpenRTB
# samples of crates/openrtb/testdata. Prints one line per target (executions, corpus size,
# result) and exits 1 when any target crashed; the crashing input is kept under
# target/fuzz/artifacts/<target>/ (turn it into a regression test in the crate, fix, delete it).
# The working corpus is deleted at the end unless --corpus names a directory to keep it in.
#
# Options (defaults in brackets):
#   --seconds N      per target [8: the smoke .ci/run does]
#   --targets LIST   comma-separated [all of `cargo fuzz list`]
#   --sanitizer S    none or address [none: the code is safe Rust; address for long runs]
#   --corpus DIR     keep the corpora in DIR/<target>/ and start from what is there
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=8
targets=""
sanitizer=none
keep=""

die() { echo "fuzz.sh: $*" >&2; exit 64; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --sanitizer) sanitizer="$2"; shift 2 ;;
    --corpus) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || die "--seconds takes a positive number"
[[ "$sanitizer" == none || "$sanitizer" == address ]] || die "--sanitizer is none or address"

cd "$root"
if ! rustup run nightly rustc --version > /dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version > /dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

# One target directory for every fuzz build, apart from the main one (other flags).
target_dir="$root/target/fuzz"
# Optimised with debug assertions and overflow checks; 16 codegen units keep the build short.
build=(-s "$sanitizer" --debug-assertions --codegen-units 16 --target-dir "$target_dir")
cargo +nightly fuzz build "${build[@]}"

[[ -n "$targets" ]] || targets="$(cargo +nightly fuzz list | paste -sd, -)"
work="${keep:-$(mktemp -d "$target_dir/corpus.XXXXXX")}"
[[ -n "$keep" ]] || trap 'rm -rf "$work"' EXIT
# The event-log target writes a log directory per input: on tmpfs when there is one.
[[ -w /dev/shm ]] && export TMPDIR=/dev/shm

seed() {
  local target="$1" dir="$2"
  [[ -d "fuzz/seeds/$target" ]] && cp -n "fuzz/seeds/$target"/* "$dir"/
  local samples=crates/openrtb/testdata
  case "$target" in
    openrtb_request)
      # The first byte picks the encoding: 0 plain, 1 gzip.
      for f in "$samples"/*/*bid-request*.json "$samples"/*/*-req-*.json "$samples"/*/breq.*.json \
          "$samples"/*/*-request.json; do
        { printf '\0'; cat "$f"; } > "$dir/plain-$(basename "$f")"
        { printf '\1'; gzip -c "$f"; } > "$dir/gzip-$(basename "$f")"
      done ;;
    openrtb_native) cp -n "$samples"/*/native*request*.json "$dir"/ ;;
    openrtb_response) cp -n "$samples"/*/*resp*.json "$dir"/ ;;
  esac
}

status=0
IFS=',' read -r -a list <<< "$targets"
printf '%-20s %12s %8s  %s\n' target executions corpus result
for target in "${list[@]}"; do
  corpus="$work/$target"
  artifacts="$target_dir/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  seed "$target" "$corpus"
  log="$work/$target.log"
  result=ok
  if ! cargo +nightly fuzz run "${build[@]}" "$target" "$corpus" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 > "$log" 2>&1; then
    result="CRASH, input in $artifacts/ (log: $log)"
    status=1
    keep="${keep:-kept}"
    trap - EXIT
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  printf '%-20s %12s %8s  %s\n' "$target" "${runs:-?}" "$(find "$corpus" -type f | wc -l)" "$result"
done
if [[ "$status" -ne 0 ]]; then
  echo "fuzz.sh: a target crashed; corpora and logs kept in $work" >&2
fi
exit "$status"
