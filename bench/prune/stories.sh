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
"$tern" convert --from llama2c --model "$shared/models/stories260K/stories260K.bin" \
  --vocab "$shared/models/stories260K/tok512.bin" -o stories.gguf 2>/dev/null
python3 - "$shared/data/text/tinystories_val.txt" <<'PY'
import sys
s = open(sys.argv[1], encoding="utf-8").read()
cut = s.find("\n\n", len(s) // 2) + 2
open("calib.txt", "w", encoding="utf-8").write(s[:cut])
open("eval.txt", "w", encoding="utf-8").write(s[cut:])
PY
"$tern" calibrate -m stories.gguf -f calib.txt -o calib.gguf -c 256 -t 2 2>/dev/null
"$tern" perplexity -m stories.gguf -f eval.txt -c 256 -t 2 --save-logits base.logits 2>/dev/null > /dev/null
echo "| method | zeroed | perplexity | ratio to dense | mean KL | top-1 |"
echo "|---|---|---:|---:|---:|---:|"
for shape in "--sparsity 0.3" "--sparsity 0.5" "--pattern 2:4"; do
  for method in magnitude wanda sparsegpt; do
    calib=""
    [ "$method" = magnitude ] || calib="--calib calib.gguf"
    # shellcheck disable=SC2086
    "$tern" prune stories.gguf pruned.gguf --method "$method" $shape $calib -t 2 > /dev/null 2>&1
    out=$("$tern" perplexity -m pruned.gguf -f eval.txt -c 256 -t 2 --kl-divergence base.logits 2>&1)
    ppl=$(echo "$out" | sed -n 's/^perplexity: model \([0-9.]*\), base .*, ratio \([0-9.]*\)$/\1 \2/p')
    kl=$(echo "$out" | sed -n 's/^  mean *\([0-9.]*\) .*/\1/p')
    top1=$(echo "$out" | sed -n 's/^top-1 agreement: \(.*\)$/\1/p')
    echo "| $method | ${shape#--} | ${ppl% *} | ${ppl#* } | $kl | $top1 |"
  done
done
