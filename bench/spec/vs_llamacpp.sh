#!/usr/bin/env bash
# Speculative decoding, tern vs llama.cpp, batch 1, greedy, interleaved
# rounds: plain generation and generation with a draft model, each engine's
# own tok/s figure for the generated tokens.
#   bench/spec/vs_llamacpp.sh TERN LLAMA_BIN_DIR TARGET.gguf DRAFT.gguf [ROUNDS] [N] [K]
# LLAMA_BIN_DIR holds llama-completion and llama-speculative, built outside
# this repository. Prints one line per run and a median per configuration.
set -euo pipefail
tern=$1 llama=$2 target=$3 draft=$4 rounds=${5:-3} n=${6:-128} k=${7:-8}
prompt="Once upon a time"
declare -A runs
tern_rate() { sed -n 's/.*generation [0-9]* tokens in [0-9.]* ms (\([0-9.]*\) tok\/s).*/\1/p' | tail -1; }
for r in $(seq "$rounds"); do
  a=$("$tern" run -m "$target" -p "$prompt" -n "$n" --temp 0 -t 2 2>&1 >/dev/null | tern_rate)
  b=$("$tern" run -m "$target" -p "$prompt" -n "$n" --temp 0 -t 2 --draft "$draft" --spec-k "$k" 2>&1 >/dev/null | tern_rate)
  c=$("$llama/llama-completion" -m "$target" -p "$prompt" -n "$n" --temp 0 -t 2 -no-cnv 2>&1 |
      sed -n 's/.* eval time = .*(\s*[0-9.]* ms per token, *\([0-9.]*\) tokens per second).*/\1/p' | grep -v '^$' | tail -1)
  d=$("$llama/llama-speculative" -m "$target" -md "$draft" -p "$prompt" -n "$n" --temp 0 -t 2 -td 2 \
      --spec-draft-n-max "$k" 2>&1 | sed -n 's/.*decoded .* speed: *\([0-9.]*\) t\/s.*/\1/p' | tail -1)
  e=$("$llama/llama-speculative" -m "$target" -md "$draft" -p "$prompt" -n "$n" --temp 0 -t 2 -td 2 2>&1 |
      sed -n 's/.*decoded .* speed: *\([0-9.]*\) t\/s.*/\1/p' | tail -1)
  echo "round $r: tern plain $a | tern draft k<=$k $b | llama.cpp plain $c | llama-speculative n_max $k $d | llama-speculative default (3) $e"
  runs[tp]+="$a "; runs[td]+="$b "; runs[lp]+="$c "; runs[ld]+="$d "; runs[l3]+="$e "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "median tok/s: tern plain $(echo "${runs[tp]}" | median), tern draft $(echo "${runs[td]}" | median)," \
     "llama.cpp plain $(echo "${runs[lp]}" | median), llama-speculative n_max $k $(echo "${runs[ld]}" | median)," \
     "llama-speculative default $(echo "${runs[l3]}" | median)"
