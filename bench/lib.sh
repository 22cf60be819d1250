# Functions the bench scripts share. Source it after setting $root and defining die():
#   . "$root/bench/lib.sh"

# listening_addr FILE [PID]: waits up to 30 s for the `listening on http://ADDR` line a server
# prints first to FILE and prints ADDR; prints nothing if it does not come or PID ends first.
listening_addr() {
  local file="$1" pid="${2:-}" addr=""
  for _ in $(seq 300); do
    addr="$(head -n 1 "$file" | sed -n 's|.*listening on http://\([^ /]*\).*|\1|p')"
    [[ -n "$addr" ]] && break
    [[ -z "$pid" ]] || kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "$addr"
}

# build_release BUILD: sets $target_dir and, when BUILD is 1, builds the release binary there.
build_release() {
  target_dir="${CARGO_TARGET_DIR:-$root/target}"
  if [[ "$1" == 1 ]]; then
    echo "building release (LTO) ..." >&2
    (cd "$root" && cargo build --release -p marquee --quiet)
  fi
}

# use_workdir: sets $work to a new temporary directory and $pids to an empty list; when the
# script exits, every process in $pids is killed and $work removed.
use_workdir() {
  work="$(mktemp -d)"
  pids=()
  trap 'for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; rm -rf "$work"' EXIT
}

# cpu_ticks PID: user + system clock ticks of the process (fields 14 and 15 of stat; the
# command name in field 2 may hold spaces, so count from the closing parenthesis).
cpu_ticks() {
  local stat fields
  stat="$(< "/proc/$1/stat")"
  stat="${stat##*) }"
  read -r -a fields <<< "$stat"
  echo $(( fields[11] + fields[12] ))
}

# measure_alternating PAIR A B: runs the script's `measure PAIR ROLE` for roles A and B, A
# first in odd pairs and B first in even ones, so that neither always runs on a warmer machine.
measure_alternating() {
  if (( $1 % 2 == 1 )); then
    measure "$1" "$2"; measure "$1" "$3"
  else
    measure "$1" "$3"; measure "$1" "$2"
  fi
}
