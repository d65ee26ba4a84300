#!/usr/bin/env bash
# Recovery after pruning on stories260K (bench/train.md): each pruned model
# (50% unstructured by magnitude, Wanda and SparseGPT; 2:4 by SparseGPT;
# structured ffn=0.25) before and after `tern distill` from the unpruned
# model (STEPS steps of 4 x 128 tokens of the calibration half; zeros kept
# for the unstructured ones), perplexity on the evaluation half, and the
# share of the lost perplexity recovered.
# Usage: bench/train/recovery.sh [BUILD_DIR] [WORK_DIR] [STEPS]   (prints a markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=${2:-$(mktemp -d)}
steps=${3:-100}
shared=${TERN_SHARED_DIR:-$root/../shared}
tern=$build/tools/tern/tern
mkdir -p "$work"
cd "$work"
# shellcheck source=bench/prune/stories_setup.sh
. "$root/bench/prune/stories_setup.sh"
ppl() { "$tern" perplexity -m "$1" -f eval.txt -c 256 -t 2 --json 2>/dev/null | sed 's/.*"perplexity": \([0-9.]*\).*/\1/'; }
base=$(ppl stories.gguf)
echo "unpruned perplexity $base; tern distill --steps $steps --ctx 128 --batch 4 --lr 1e-3 (alpha 0.5, temperature 2)"
echo
echo "| pruned | perplexity | after distillation | share of the loss recovered | block weights zero after |"
echo "|---|---:|---:|---:|---:|"
while read -r name args; do
  # shellcheck disable=SC2086
  "$tern" prune stories.gguf pruned.gguf $args -t 2 > /dev/null 2>&1
  before=$(ppl pruned.gguf)
  "$tern" distill --teacher stories.gguf --student pruned.gguf -f calib.txt -o distilled.gguf \
    --steps "$steps" --ctx 128 --batch 4 --lr 1e-3 -t 2 > /dev/null 2>&1
  after=$(ppl distilled.gguf)
  # The block matrices' zeros after training: tern prune at sparsity 0 counts them (zero before).
  zeros=$("$tern" prune distilled.gguf zcheck.gguf --method magnitude --sparsity 0 -t 2 2>/dev/null |
          awk -F'|' '/ blk\./ {z += $4; n += $3} END {if (n) printf "%.1f%%", 100 * z / n}')
  share=$(python3 -c "b, p, a = $base, $before, $after; print(f'{(p - a) / (p - b):.0%}')")
  echo "| $name | $before | $after | $share | ${zeros:-} |"
done <<'CASES'
magnitude-50% --method magnitude --sparsity 0.5
wanda-50% --method wanda --sparsity 0.5 --calib calib.gguf
sparsegpt-50% --method sparsegpt --sparsity 0.5 --calib calib.gguf
sparsegpt-2:4 --method sparsegpt --pattern 2:4 --calib calib.gguf
structured-ffn=0.25 --structured ffn=0.25 --calib calib.gguf
CASES
rm -f pruned.gguf distilled.gguf zcheck.gguf
