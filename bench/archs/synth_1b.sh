#!/bin/sh
# Synthesizes the ~1B-parameter files of each architecture the models issue
# added, at F16, Q8_0 and Q4_K_M, into $1 (default /tmp/archs-1b), for
# bench/compare_llamacpp.py (bench/archs/README.md, "Speed"). Shapes are the
# families' small models cut to about 1B parameters with a 32k vocabulary:
#   llama3  Llama 3.2 1B (dim 2048, 16 layers, 32 heads, 8 KV, ffn 8192) + rope_freqs
#   qwen3   Qwen3 1.7B's layer (dim 2048, 16 heads, 8 KV, head_dim 128, ffn 6144), 16 layers
#   phi3    dim 2048, 16 layers, 32 heads, no GQA (as Phi-3), ffn 8192; Phi-3 vocabulary
#   gemma2  dim 2048, 16 layers, 8 heads, 4 KV, head_dim 256, ffn 8192, window 4096
#   gemma3  Gemma 3 1B (dim 1152, 26 layers, 4 heads, 1 KV, head_dim 256, ffn 6912, window 512)
# Usage: bench/archs/synth_1b.sh [OUT_DIR] [TERN]
set -eu
out=${1:-/tmp/archs-1b}
tern=${2:-build/tools/tern/tern}
tok=${TOKENIZERS:-/work/shared/testdata/tokenizers}
mkdir -p "$out"
shape() {
  case $1 in
    llama3) echo "--dim 2048 --layers 16 --heads 32 --kv-heads 8 --ffn 8192" ;;
    qwen3) echo "--dim 2048 --layers 16 --heads 16 --kv-heads 8 --head-dim 128 --ffn 6144" ;;
    phi3) echo "--dim 2048 --layers 16 --heads 32 --kv-heads 32 --ffn 8192" ;;
    gemma2) echo "--dim 2048 --layers 16 --heads 8 --kv-heads 4 --head-dim 256 --ffn 8192 --window 4096" ;;
    gemma3) echo "--dim 1152 --layers 26 --heads 4 --kv-heads 1 --head-dim 256 --ffn 6912 --window 512" ;;
  esac
}
for a in ${ARCHS:-llama3 qwen3 phi3 gemma2 gemma3}; do
  vocab=$tok/ggml-vocab-llama-spm.gguf
  [ "$a" = phi3 ] && vocab=$tok/ggml-vocab-phi-3.gguf
  for t in ${TYPES:-F16 Q8_0 Q4_K_M}; do
    f="$out/$a-1b-$t.gguf"
    [ -s "$f" ] || $tern synth --arch "$a" $(shape "$a") --vocab-from "$vocab" --type "$t" --ctx 8192 -t 2 -o "$f"
  done
done
ls -l "$out"
