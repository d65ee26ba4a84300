#!/usr/bin/env bash
# Soak `tern serve` with mixed traffic (tests/server/soak.test.mjs) for MINUTES:
#   scripts/soak.sh [MINUTES=30] [OUT_DIR=build/soak]
# Needs a Release build in build/ and node (scripts/deps.sh). Writes OUT_DIR/soak.csv (RSS,
# descriptors, threads and KV blocks each second), soak.svg (their curves) and soak.json (the
# summary); exits non-zero when anything leaked or a request failed.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
out=${2:-build/soak}
bin=build/tools/tern/tern
[ -x "$bin" ] || { echo "soak.sh: build tern first (cmake --build build)" >&2; exit 1; }
mkdir -p "$out"
out=$(realpath "$out")
bin=$(realpath "$bin")
model=$out/stories260K.gguf
s=../shared/models/stories260K
"$bin" convert --from llama2c --model "$s/stories260K.bin" --vocab "$s/tok512.bin" -o "$model" 2>/dev/null
ulimit -n "$(ulimit -Hn)"
cd tests/server
TERN_BIN=$bin TERN_TEST_MODEL=$model TERN_SOAK_SECONDS=$((minutes * 60)) TERN_SOAK_OUT=$out node --test --test-reporter=spec soak.test.mjs
