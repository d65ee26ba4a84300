#!/usr/bin/env bash
# Runs a command inside a fresh memory cgroup limited to LIMIT bytes (swap
# included where the kernel accounts it), then reports the cgroup's peak
# memory use — what the kernel charged the command: its anonymous memory and
# the page cache it brought in (a mapped model file included) — and whether
# the limit was hit. The cgroup is removed afterwards.
#
#   scripts/cgroup_run.sh LIMIT_BYTES COMMAND [ARGS...]
#
# Uses cgroup v2 (/sys/fs/cgroup, or /sys/fs/cgroup/unified, with the memory
# controller) or v1 (/sys/fs/cgroup/memory). Needs root. Exit status: the
# command's; 77 when no writable memory cgroup is available (nothing run).
# The last line on stderr is machine-readable:
#   cgroup_run: limit L peak P oom_kills K
set -uo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 LIMIT_BYTES COMMAND [ARGS...]" >&2
  exit 2
fi
limit=$1
shift
case $limit in '' | *[!0-9]*) echo "cgroup_run: LIMIT_BYTES must be a number of bytes" >&2; exit 2 ;; esac

name="tern_run.$$"
dir="" version=""
for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
  if [ -f "$root/cgroup.controllers" ] && grep -qw memory "$root/cgroup.controllers" &&
     grep -qw memory "$root/cgroup.subtree_control" 2>/dev/null && mkdir "$root/$name" 2>/dev/null; then
    dir="$root/$name" version=2
    break
  fi
done
if [ -z "$dir" ] && [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/$name" 2>/dev/null; then
  dir="/sys/fs/cgroup/memory/$name" version=1
fi
if [ -z "$dir" ]; then
  echo "cgroup_run: no writable memory cgroup here (needs root and a cgroup v1 or v2 memory controller)" >&2
  exit 77
fi
cleanup() {
  # The command has exited; its page cache stays charged until reclaimed: drop it so the cgroup can go.
  if [ "$version" = 1 ]; then echo 0 > "$dir/memory.force_empty" 2>/dev/null; fi
  rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT

if [ "$version" = 2 ]; then
  echo "$limit" > "$dir/memory.max"
  echo 0 > "$dir/memory.swap.max" 2>/dev/null || true
else
  echo "$limit" > "$dir/memory.limit_in_bytes"
  echo "$limit" > "$dir/memory.memsw.limit_in_bytes" 2>/dev/null || true
fi

# The child joins the cgroup, then becomes the command.
bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' cgroup_run "$dir" "$@"
status=$?

if [ "$version" = 2 ]; then
  peak=$(cat "$dir/memory.peak" 2>/dev/null || echo unknown)
  kills=$(awk '$1 == "oom_kill" {print $2}' "$dir/memory.events" 2>/dev/null)
else
  peak=$(cat "$dir/memory.max_usage_in_bytes")
  kills=$(awk '$1 == "oom_kill" {print $2}' "$dir/memory.oom_control" 2>/dev/null)
fi
echo "cgroup_run: limit $limit peak $peak oom_kills ${kills:-0}" >&2
exit $status
