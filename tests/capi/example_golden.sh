#!/usr/bin/env bash
# examples/generate.c's text from an empty prompt is llama2.c's 200 greedy steps,
# byte for byte; a bad path fails with the C API's message and a non-zero exit.
set -euo pipefail
example=$1 model=$2 golden=$3
out=$(mktemp)
trap 'rm -f "$out" "$out.err"' EXIT
"$example" "$model" "" 200 > "$out" 2> "$out.err"
cmp "$out" "$golden" || { echo "the example's text differs from $golden"; cat "$out.err"; exit 1; }
grep -q "1 prompt tokens, 200 generated" "$out.err" || { echo "figures missing:"; cat "$out.err"; exit 1; }
if "$example" /nonexistent.gguf > /dev/null 2> "$out.err"; then echo "a bad path succeeded"; exit 1; fi
grep -q "loading the model: .*/nonexistent.gguf" "$out.err" || { echo "unclear error:"; cat "$out.err"; exit 1; }
echo "ok: golden text, figures, and a clear error for a bad path"
