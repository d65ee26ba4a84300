#!/usr/bin/env bash
# Pruning quality on stories260K (bench/prune.md): each method at 30% and 50%
# unstructured and at 2:4, calibrated on the first half of TinyStories' text
# and measured on the second (perplexity, KL and top-1 against the dense model).
# Usage: bench/prune/stories.sh [BUILD_DIR] [WORK_DIR]   (prints a markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=${2:-$(mktemp -d)}
shared=${TERN_SHARED_DIR:-$root/../shared}
tern=$build/tools/tern/tern
mkdir -p "$work"
cd "$work"
# shellcheck source=bench/prune/stories_setup.sh
. "$root/bench/prune/stories_setup.sh"
echo "| method | zeroed | perplexity | ratio to dense | mean KL | top-1 |"
echo "|---|---|---:|---:|---:|---:|"
for shape in "--sparsity 0.3" "--sparsity 0.5" "--pattern 2:4"; do
  for method in magnitude wanda sparsegpt; do
    calib=""
    [ "$method" = magnitude ] || calib="--calib calib.gguf"
    # shellcheck disable=SC2086
    "$tern" prune stories.gguf pruned.gguf --method "$method" $shape $calib -t 2 > /dev/null 2>&1
    echo "| $method | ${shape#--} | $(quality pruned.gguf) |"
  done
done
