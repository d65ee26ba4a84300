#!/bin/sh
# Decode only, one thread, tern and llama-bench interleaved (bench/moe.md): one
# thread takes thread synchronisation (and llama.cpp's spinning workers) out
# of the comparison on a loaded machine. Usage: bench/moe/tg_t1.sh ROUNDS FILE...
set -eu
rounds=$1; shift
tern=${TERN:-build/tools/tern/tern}
llama=${LLAMA_BENCH:-/tmp/llama.cpp/build/bin/llama-bench}
for r in $(seq "$rounds"); do
  for f in "$@"; do
    t=$($tern bench -m "$f" -t 1 -p 0 -n 64 -r 1 --json | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["tg"]["tok_s"])')
    l=$($llama -m "$f" -t 1 -p 0 -n 64 -r 1 -o json | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])')
    echo "round $r $(basename "$f") tern $t llama.cpp $l"
  done
done
