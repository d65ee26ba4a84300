#!/usr/bin/env bash
# The StreamingLLM table on stories260K (trained on 512 positions): one long
# TinyStories text scored as a single sequence under dense attention past 512,
# StreamingLLM sinks + window, a plain window, context shift and the
# recomputed sliding window; H2O eviction against windows of the same size;
# then 20,000 generated tokens in constant memory.
# Usage: bench/streaming/run.sh [BUILD_DIR] [SHARED_DIR]   (~8 minutes on 2 cores; recompute is most of it)
set -euo pipefail
build=${1:-build}
shared=${2:-../shared}
out=$(dirname "$0")
tern="$build/tools/tern/tern"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tern" convert --from llama2c --model "$shared/models/stories260K/stories260K.bin" \
  --vocab "$shared/models/stories260K/tok512.bin" -o "$tmp/s.gguf" >/dev/null
head -c 30000 "$shared/data/text/tinystories_val.txt" > "$tmp/text.txt"
"$tern" perplexity -m "$tmp/s.gguf" -f "$tmp/text.txt" --continuous -t 2 --segment 1000 \
  --modes "dense 4,508 0,508 shift:4 recompute:511" \
  --json-out "$out/continuous_ppl.json" --chart "$out/continuous_ppl.svg" | tee "$out/continuous_ppl.md"
# Eviction by importance inside the trained context (stories260K: 512): the
# first 511 tokens of three texts, every mode at a budget of 128 and of 64 positions.
for off in 0 40000 80000; do
  tail -c +$((off + 1)) "$shared/data/text/tinystories_val.txt" | head -c 4000 > "$tmp/t.txt"
  "$tern" perplexity -m "$tmp/s.gguf" -f "$tmp/t.txt" --continuous -t 2 --segment 128 --max-tokens 511 \
    --modes "dense 0,128 4,124 h2o:128,32 h2o:128,64 0,64 4,60 h2o:64,16 h2o:64,32" 2>/dev/null | tail -1
done
for n in 1000 20000; do
  "$tern" run -m "$tmp/s.gguf" -p "Once upon a time" -n "$n" --temp 0 --ignore-eos -t 2 --streaming 4,252 2>&1 >/dev/null | tail -1
done
