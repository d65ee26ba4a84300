#!/usr/bin/env bash
# Constrained against unconstrained decoding, same requests, interleaved rounds:
#   bench/grammar/constrained_tps.sh TERN MODEL.gguf [BATCH=1] [ROUNDS=3] [TOKENS=64]
# BATCH requests (sampled, seeded) of TOKENS tokens each through `tern batch`,
# once plain (ignore_eos) and once under a JSON grammar — one object whose
# one string property takes letters, spaces and punctuation — followed by 100
# "Z"s, so no request can end before TOKENS (< 100) tokens: both runs generate
# exactly TOKENS tokens each (the n_tokens_generated of the outputs says so, and
# the batch never thins out). CONSTRAINT=schema uses the JSON Schema of the same
# object instead, its string with minLength 400 (the bounded-repetition case);
# SCHEMA=FILE uses the JSON Schema in FILE (one line). Prints output tok/s per
# run and the median ratio.
set -euo pipefail
tern=$1 model=$2 b=${3:-1} rounds=${4:-3} n=${5:-64}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
grammar='root ::= \"{\\\"story\\\": \\\"\" [a-zA-Z .,]* \"\\\"}\" \"Z\"{100}'
for i in $(seq "$b"); do
  echo "{\"prompt\": \"Once upon a time\", \"max_tokens\": $n, \"temperature\": 0.8, \"seed\": $i, \"ignore_eos\": true}" >>"$dir/plain.jsonl"
  if [ -n "${SCHEMA:-}" ]; then
    echo "{\"prompt\": \"Once upon a time\", \"max_tokens\": $n, \"temperature\": 0.8, \"seed\": $i, \"json_schema\": $(tr -d '\n' <"$SCHEMA")}" >>"$dir/json.jsonl"
  elif [ "${CONSTRAINT:-gbnf}" = schema ]; then
    # The same shape as a JSON Schema; minLength keeps the string open past TOKENS.
    echo "{\"prompt\": \"Once upon a time\", \"max_tokens\": $n, \"temperature\": 0.8, \"seed\": $i, \"json_schema\": {\"type\": \"object\", \"properties\": {\"story\": {\"type\": \"string\", \"minLength\": 400}}, \"required\": [\"story\"]}}" >>"$dir/json.jsonl"
  else
    echo "{\"prompt\": \"Once upon a time\", \"max_tokens\": $n, \"temperature\": 0.8, \"seed\": $i, \"grammar\": \"$grammar\"}" >>"$dir/json.jsonl"
  fi
done
rate() { sed -n 's/.* \([0-9.]*\) output tok\/s.*/\1/p'; }
ratios=()
for r in $(seq "$rounds"); do
  p=$("$tern" batch -m "$model" -f "$dir/plain.jsonl" -o "$dir/out" -t 2 2>&1 | rate)
  j=$("$tern" batch -m "$model" -f "$dir/json.jsonl" -o "$dir/out" -t 2 2>&1 | rate)
  toks=$(grep -o '"n_tokens_generated":[0-9]*' "$dir/out" | cut -d: -f2 | awk '{ s += $1 } END { printf "%.1f", s / NR }')
  ratio=$(awk -v a="$j" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio")
  echo "round $r: plain $p tok/s, constrained $j tok/s ($toks tokens per request), ratio $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print "median ratio", v[int((NR + 1) / 2)] }'
