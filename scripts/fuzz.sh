#!/usr/bin/env bash
# Coverage-guided fuzzing of every harness in tests/fuzz with clang's libFuzzer, ASan and UBSan:
#   scripts/fuzz.sh [SECONDS=60] [HARNESS...]      (default: all of them)
# Builds build-fuzz/ (clang 14), then runs each harness for SECONDS on its corpus
# (build-fuzz/corpus/<harness>, grown across runs; seeded from tests/fuzz/seeds and, for chat
# templates, tests/tokenizer/templates). A crash leaves its input as build-fuzz/crash-<harness>-*
# and the script exits non-zero; make it a regression seed under tests/fuzz/seeds/<harness>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(grammar chat_template openai_request gguf tokenizer hf llama2c sse http batch_line json)
cxx=$(command -v clang++-14 || command -v clang++)
cc=$(command -v clang-14 || command -v clang)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DTERN_FUZZ=ON \
  -DCMAKE_C_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" >/dev/null
ninja -C build-fuzz "${harnesses[@]/#/fuzz_}"
status=0
for h in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus/$h
  mkdir -p "$corpus"
  seeds=(tests/fuzz/seeds/$h)
  [ "$h" = chat_template ] && seeds+=(tests/tokenizer/templates)
  echo "== $h: ${seconds}s"
  if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "build-fuzz/tests/fuzz/fuzz_$h" "$corpus" "${seeds[@]}" \
      -max_total_time="$seconds" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/crash-$h-" 2>&1 | grep -E "^#[0-9]+ +DONE|stat::|ERROR|SUMMARY|Test unit written|cov:" | tail -12; then
    :
  fi
  if ls build-fuzz/crash-"$h"-* >/dev/null 2>&1; then
    echo "!! $h: crash inputs: $(ls build-fuzz/crash-"$h"-*)"
    status=1
  fi
done
exit $status
