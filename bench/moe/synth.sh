#!/bin/sh
# Synthesizes the MoE benchmark models of bench/moe.md into $1 (default /tmp/moe-bench):
# Mixtral-shaped (8 experts, top-2) and Qwen3-MoE-shaped (64 experts, top-8,
# small experts), each at Q8_0 and Q4_0, plus dense llama files with the
# Mixtral shape's active and total FFN widths for the "decode follows active
# parameters" comparison. Usage: bench/moe/synth.sh [OUT_DIR] [TERN]
set -eu
out=${1:-/tmp/moe-bench}
tern=${2:-build/tools/tern/tern}
vocab=${VOCAB:-/work/shared/testdata/tokenizers/ggml-vocab-llama-spm.gguf}
mkdir -p "$out"
common="--dim 1024 --layers 8 --heads 16 --kv-heads 4 --vocab-from $vocab -t 2"
for t in Q8_0 Q4_0; do
  $tern synth --arch mixtral $common --ffn 3584 --experts 8 --experts-used 2 --type $t -o "$out/mixtral-8x2-$t.gguf"
  $tern synth --arch qwen3moe $common --head-dim 128 --ffn 3072 --experts 64 --experts-used 8 --expert-ffn 384 \
    --type $t -o "$out/qwen3moe-64x8-$t.gguf"
  # Dense llama with the FFN width a Mixtral token reads (2 x 3584) and with all 8 experts' (8 x 3584).
  $tern synth --arch llama $common --ffn 7168 --type $t -o "$out/dense-active-$t.gguf"
  $tern synth --arch llama $common --ffn 28672 --type $t -o "$out/dense-total-$t.gguf"
done
