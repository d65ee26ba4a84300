#!/usr/bin/env bash
# 1,000 simultaneous streaming chat requests against `tern serve`, two
# binaries interleaved (A B A B ...): the load test of tests/server
# (load.test.mjs) prints one JSON line of figures per run; this collects them.
#
#   bench/serving/streams_ab.sh A_TERN B_TERN MODEL.gguf [ROUNDS]
#
# Needs the npm test tooling (bash scripts/deps.sh). Output: one line per run
# ("A"/"B" then the JSON), then the mean output tok/s of each.
set -euo pipefail
a=$1 b=$2 model=$3 rounds=${4:-3}
dir=$(cd "$(dirname "$0")/../../tests/server" && pwd)
ulimit -n "$(ulimit -Hn)"
declare -A sum=([A]=0 [B]=0)
for ((r = 1; r <= rounds; ++r)); do
  for side in A B; do
    bin=$a
    [ "$side" = B ] && bin=$b
    line=$(cd "$dir" && TERN_BIN=$bin TERN_TEST_MODEL=$model node --test --test-reporter=spec load.test.mjs 2>&1 |
           grep -o '{"clients".*}' | head -1)
    echo "$side $line"
    tok=$(echo "$line" | sed -n 's/.*"output_tok_s":\([0-9.]*\).*/\1/p')
    sum[$side]=$(echo "${sum[$side]} + ${tok:-0}" | bc -l)
  done
done
echo "mean output tok/s: A $(echo "${sum[A]} / $rounds" | bc -l | cut -c1-8)  B $(echo "${sum[B]} / $rounds" | bc -l | cut -c1-8)"
