#!/usr/bin/env bash
# The main job: install what is missing, build tern, convert the real tiny
# model from ../shared/models/stories260K to GGUF, generate text with it, and
# run a small batch of requests through the serving engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${TERN_SHARED_DIR:-$root/../shared}
"$root/scripts/deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target tern
tern="$root/build/tools/tern/tern"
model="$root/build/models/stories260K.gguf"
mkdir -p "$(dirname "$model")"
if [ ! -f "$model" ]; then
  "$tern" convert --from llama2c --model "$shared/models/stories260K/stories260K.bin" \
    --vocab "$shared/models/stories260K/tok512.bin" -o "$model"
fi
"$tern" run -m "$model" -p "${1:-Once upon a time}" -n "${2:-200}" --temp 0
echo
# The serving engine: a few requests at once (paged KV, prefix caching,
# continuous batching); one result line each, the summary on stderr.
requests="$root/build/models/demo_requests.jsonl"
cat > "$requests" <<'JSONL'
{"id": "greedy", "prompt": "Once upon a time", "max_tokens": 60, "temperature": 0}
{"id": "sampled", "prompt": "Once upon a time", "max_tokens": 60, "temperature": 0.8, "seed": 1}
{"id": "park", "prompt": "Lily went to the park", "max_tokens": 60, "temperature": 0}
{"id": "cat", "prompt": "The little cat", "max_tokens": 60, "temperature": 0.7, "seed": 7, "stop": ["."]}
JSONL
"$tern" batch -m "$model" -f "$requests"
