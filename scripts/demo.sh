#!/usr/bin/env bash
# The main job: install what is missing, build tern, convert the real tiny
# model from ../shared/models/stories260K to GGUF, and generate text with it.
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
