#!/usr/bin/env bash
# Structured pruning (bench/prune.md): stories260K with heads, FFN channels
# and layers removed by `tern prune --structured`, calibrated on the first
# half of TinyStories' text and measured on the second (weights, perplexity,
# KL and top-1 against the unpruned model). With BIG (an F16 model, e.g.
# bench-1b from tern synth) it also times that model and its pruned copies
# in Q8_0 with tern bench (pp512, tg64): what the smaller shapes buy in speed.
# Usage: bench/prune/structured.sh [BUILD_DIR] [WORK_DIR] [BIG.gguf]   (prints markdown tables)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=${2:-$(mktemp -d)}
big=${3:-}
[ -z "$big" ] || big=$(cd "$(dirname "$big")" && pwd)/$(basename "$big")
shared=${TERN_SHARED_DIR:-$root/../shared}
tern=$build/tools/tern/tern
mkdir -p "$work"
cd "$work"
# shellcheck source=bench/prune/stories_setup.sh
. "$root/bench/prune/stories_setup.sh"
# Weights in a file (tern info's last line: "N parameters, ...").
weights() { "$tern" info "$1" 2>/dev/null | sed -n 's/^\([0-9]*\) parameters.*/\1/p' | tail -1; }
echo "| removed | weights | perplexity | ratio to unpruned | mean KL | top-1 |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| nothing | $(weights stories.gguf) | $("$tern" perplexity -m stories.gguf -f eval.txt -c 256 -t 2 --json 2>/dev/null | sed 's/.*"perplexity": \([0-9.]*\).*/\1/') | 1 | 0 | 1 |"
for spec in ffn=0.25 ffn=0.5 heads=0.25 heads=0.5 layers=1 layers=2 heads=0.25,ffn=0.25 heads=0.25,ffn=0.25,layers=1; do
  "$tern" prune stories.gguf pruned.gguf --structured "$spec" --calib calib.gguf -t 2 > /dev/null 2>&1
  echo "| $spec | $(weights pruned.gguf) | $(quality pruned.gguf) |"
done
[ -n "$big" ] || exit 0

echo
"$tern" calibrate -m "$big" -f calib.txt -o big-calib.gguf -c 128 --chunks 8 -t 2 2>/dev/null
echo "| $(basename "$big") removed, then Q8_0 | file MB | pp512 tok/s | tg64 tok/s |"
echo "|---|---:|---:|---:|"
for spec in nothing ffn=0.25 heads=0.25 layers=4 heads=0.25,ffn=0.25,layers=4; do
  m=$big
  if [ "$spec" != nothing ]; then
    # Random weights: which heads go does not matter here, only how many (no ablation passes).
    "$tern" prune "$big" big-pruned.gguf --structured "$spec" --heads-by activation --calib big-calib.gguf -t 2 > /dev/null 2>&1
    m=big-pruned.gguf
  fi
  "$tern" quantize "$m" big-q8.gguf Q8_0 -t 2 > /dev/null 2>&1
  m=big-q8.gguf
  j=$("$tern" bench -m "$m" -p 512 -n 64 -t 2 --json 2>/dev/null)
  pp=$(echo "$j" | sed 's/.*"pp": {[^}]*"tok_s": \([0-9.]*\).*/\1/')
  tg=$(echo "$j" | sed 's/.*"tg": {[^}]*"tok_s": \([0-9.]*\).*/\1/')
  echo "| $spec | $(( $(stat -c %s "$m") / 1000000 )) | $pp | $tg |"
done
rm -f big-pruned.gguf big-q8.gguf
