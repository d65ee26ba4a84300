#!/usr/bin/env bash
# bench/http/run.sh — runs the HTTP layer matrix (see RESULTS.md) and prints a
# markdown table. Builds nothing: pass the two servers' paths.
#
#   bench/http/run.sh BEAST_BIN HTTPLIB_BIN [--reps R] [--ns "100 1000 2000"]
#                     [--timeout-s S] [--out FILE.jsonl]
#
# Every point starts a fresh server (so VmHWM is that point's peak), runs
# bench/http/streams.mjs against it, and stops it. Points are interleaved:
# each repetition walks every scenario, and within it every server, before
# the next repetition starts. Scenarios: N concurrent streams for each N in
# --ns, then 500 streams alone and 500 streams next to 10 clients that never
# read (each asking for 2000 events of 1 MiB).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
beast_bin=$1
httplib_bin=$2
shift 2
reps=2
ns="100 1000 2000"
timeout_s=30
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2 ;;
    --ns) ns=$2 ;;
    --timeout-s) timeout_s=$2 ;;
    --out) out=$2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift 2
done

here=$(cd "$(dirname "$0")" && pwd)
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ -n $out ]] || out=$work/results.jsonl
: > "$out"

# name|command line
servers=(
  "beast|$beast_bin"
  "httplib (default pool)|$httplib_bin"
  "httplib pool=1024|$httplib_bin --pool 1024"
  "httplib pool=2048 backlog=4096|$httplib_bin --pool 2048 --backlog 4096"
)
# label|driver flags
scenarios=()
for n in $ns; do scenarios+=("N=$n|--n $n"); done
scenarios+=("500 streams, no slow readers|--n 500")
scenarios+=("500 streams + 10 slow readers|--n 500 --slow 10 --slow-query k=2000&pad=1048576")

run_point() {  # $1 server name, $2 server command, $3 scenario label, $4 driver flags, $5 rep
  local log=$work/server.out
  # shellcheck disable=SC2086
  $2 > "$log" 2> "$work/server.err" &
  local pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(awk '/^port /{print $2; exit}' "$log")
    [[ -n $port ]] && break
    sleep 0.05
  done
  if [[ -z $port ]]; then
    echo "run.sh: $1 did not start: $(cat "$work/server.err")" >&2
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  local line
  # shellcheck disable=SC2086
  line=$(node "$here/streams.mjs" --url "http://127.0.0.1:$port/stream" --pid "$pid" \
           --timeout-s "$timeout_s" --label "$3|$1|$5" $4)
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$line" >> "$out"
  echo "$line" >&2
  sleep 1
}

for rep in $(seq "$reps"); do
  for sc in "${scenarios[@]}"; do
    for sv in "${servers[@]}"; do
      run_point "${sv%%|*}" "${sv#*|}" "${sc%%|*}" "${sc#*|}" "$rep"
    done
  done
done

node "$here/table.mjs" "$out"
