#!/usr/bin/env bash
# Mamba and hybrids (issue 18): the numbers in bench/ssm/README.md.
#  - a 1024-wide, 48-layer Mamba-1 (tern synth --arch mamba) in F16 and Q8_0
#    (with LLAMA_BIN also a Mamba-2 of that shape, --arch mamba2, and a 24-layer
#    Nemotron-H-shaped hybrid, --arch nemotron_h);
#  - decode at depth 100 and 8000 (flat in sequence length);
#  - 64 concurrent streams and a shared 1,000-token prompt through tern batch
#    (recurrent state memory; TTFT with and without prompt-state snapshots);
#  - with LLAMA_BIN (a llama.cpp build of your own, outside this repository:
#    llama-bench, llama-completion, llama-perplexity) the side-by-side
#    throughput and the greedy/logits cross-check.
# Usage: bench/ssm/run.sh [BUILD_DIR] [SHARED_DIR] [LLAMA_BIN]   (~15 minutes on 2 cores with LLAMA_BIN)
set -euo pipefail
build=${1:-build}
shared=${2:-../shared}
llama=${3:-}
tern="$build/tools/tern/tern"
vocab="$shared/testdata/tokenizers/ggml-vocab-llama-spm.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in F16 Q8_0; do
  "$tern" synth --arch mamba --dim 1024 --layers 48 --vocab-from "$vocab" --type "$t" -o "$tmp/mamba-1024x48-$t.gguf" >/dev/null
done
for t in Q8_0 F16; do
  "$tern" bench -m "$tmp/mamba-1024x48-$t.gguf" -p 0 -n 64 -d 100,8000 -r 3 -t 2 | grep -E "^tg"
done
python3 - "$tmp" <<'PY'
import json, random, sys
tmp = sys.argv[1]
random.seed(1)
system = [random.randrange(100, 30000) for _ in range(1000)]
with open(f"{tmp}/shared.jsonl", "w") as f:
    for i in range(8):
        user = [random.randrange(100, 30000) for _ in range(24)]
        f.write(json.dumps({"id": f"r{i}", "prompt": system + user, "max_tokens": 4, "temperature": 0,
                            "ignore_eos": True}) + "\n")
with open(f"{tmp}/many.jsonl", "w") as f:
    for i in range(64):
        p = [random.randrange(100, 30000) for _ in range(32 + (i * 13) % 64)]
        f.write(json.dumps({"id": f"s{i}", "prompt": p, "max_tokens": 64, "temperature": 0,
                            "ignore_eos": True}) + "\n")
PY
# One request at a time, so that each one's own TTFT is its ttft minus the previous one's end.
own_ttft() {  # RESULTS.jsonl LABEL
  python3 - "$1" "$2" <<'PY'
import json, sys
prev, own = 0, []
for l in open(sys.argv[1]):
    r = json.loads(l); own.append(r['ttft_ms'] - prev); prev = r['e2e_ms']
print(sys.argv[2] + ': own TTFT ms', ' '.join(f'{x:.0f}' for x in own), '| mean of requests 2..8: %.0f' % (sum(own[1:]) / 7))
PY
}
for flag in "" --no-prefix-cache; do
  "$tern" batch -m "$tmp/mamba-1024x48-Q8_0.gguf" -f "$tmp/shared.jsonl" -o "$tmp/out.jsonl" --max-num-seqs 1 -t 2 \
    $flag 2>&1 | grep -E "prefix cache|recurrent"
  own_ttft "$tmp/out.jsonl" "${flag:-snapshots}"
done
for n in 64 1; do
  "$tern" batch -m "$tmp/mamba-1024x48-Q8_0.gguf" -f "$tmp/many.jsonl" -o "$tmp/many$n.jsonl" --max-num-seqs $n -t 2 \
    2>&1 | grep -E "requests|recurrent"
done
cmp <(python3 -c "import json; [print(json.loads(l)['text']) for l in open('$tmp/many64.jsonl')]") \
    <(python3 -c "import json; [print(json.loads(l)['text']) for l in open('$tmp/many1.jsonl')]") &&
  echo "64 concurrent streams: the same text as one at a time"
if [ -n "$llama" ]; then
  python3 "$(dirname "$0")/../compare_llamacpp.py" --tern "$tern" --llama-bench "$llama/llama-bench" -t 2 -p 256 -n 64 \
    --rounds 2 "$tmp/mamba-1024x48-F16.gguf" "$tmp/mamba-1024x48-Q8_0.gguf"
  "$tern" convert --from llama2c --model "$shared/models/stories260K/stories260K.bin" \
    --vocab "$shared/models/stories260K/tok512.bin" -o "$tmp/s.gguf" >/dev/null
  python3 "$(dirname "$0")/../archs/vs_llamacpp.py" --tern "$tern" --llama-bin "$llama" --vocab "$tmp/s.gguf" \
    --text "$shared/data/text/wiki.test.raw" --archs mamba,mamba2 --types F32,F16,Q8_0 ||
    echo "(exit 1: at Q8_0 some greedy paths part at near-ties; see the margins column)"
  # Mamba-2 of the same width and depth (heads of 64, one group, d_state 128).
  for t in F16 Q8_0; do
    "$tern" synth --arch mamba2 --dim 1024 --layers 48 --vocab-from "$vocab" --type "$t" \
      -o "$tmp/mamba2-1024x48-$t.gguf" >/dev/null
  done
  python3 "$(dirname "$0")/../compare_llamacpp.py" --tern "$tern" --llama-bench "$llama/llama-bench" -t 2 -p 256 -n 64 \
    --rounds 2 "$tmp/mamba2-1024x48-F16.gguf" "$tmp/mamba2-1024x48-Q8_0.gguf"
  # Nemotron-H-shaped hybrid: 12 Mamba-2 mixers (8 groups), 2 attention layers (8 heads of 128 over 2 K/V
  # heads, no RoPE), 10 relu^2 FFNs of 4096, in Nemotron-H's order.
  for t in F16 Q8_0; do
    "$tern" synth --arch nemotron_h --dim 1024 --layers 24 --layer-pattern 'M-M-M-M*-M-M-M-M*-M-M-M-' --heads 8 \
      --kv-heads 2 --head-dim 128 --ffn 4096 --ssm-groups 8 --ssm-state 128 --vocab-from "$vocab" --type "$t" \
      -o "$tmp/nemotron_h-1024x24-$t.gguf" >/dev/null
  done
  python3 "$(dirname "$0")/../compare_llamacpp.py" --tern "$tern" --llama-bench "$llama/llama-bench" -t 2 -p 256 -n 64 \
    --rounds 2 "$tmp/nemotron_h-1024x24-F16.gguf" "$tmp/nemotron_h-1024x24-Q8_0.gguf"
  python3 "$(dirname "$0")/../archs/vs_llamacpp.py" --tern "$tern" --llama-bin "$llama" --vocab "$tmp/s.gguf" \
    --text "$shared/data/text/wiki.test.raw" --archs nemotron_h --types F32,F16,Q8_0 ||
    echo "(exit 1: some greedy paths part at near-ties; see the margins column)"
  for flag in "" --no-prefix-cache; do
    "$tern" batch -m "$tmp/nemotron_h-1024x24-Q8_0.gguf" -f "$tmp/shared.jsonl" -o "$tmp/out.jsonl" --max-num-seqs 1 \
      -t 2 $flag 2>&1 | grep -E "prefix cache"
    own_ttft "$tmp/out.jsonl" "hybrid ${flag:-snapshots}"
  done
fi
