#!/usr/bin/env bash
# Cross-builds tern for 64-bit ARM Linux with Debian's aarch64 cross compiler
# and arm64 multiarch libraries, then runs the unit tests of the kernels and
# the layers above them (quantization, GGUF, model, architectures, KV cache,
# backend, tokenizer, sampling) under qemu-user. The kernel tests run once per
# emulated CPU, so that the run-time dispatch finds each NEON level in turn,
# and each level is checked against the scalar reference (tests/kernels):
#
#   cortex-a53   Advanced SIMD only          levels scalar, neon
#   neoverse-n1  + dotprod (SDOT)            + dotprod
#   max          + i8mm (SMMLA)              + i8mm
#
# The others run on `max` (the best level), and the model tests once more with
# TERN_CPU_LEVEL=neon (the whole model on the baseline kernels).
#
# Usage: scripts/test-aarch64.sh [BUILD_DIR]      (default: build-aarch64)
# Installs what is missing (apt, as root or with sudo): the cross compiler,
# qemu-user, and the arm64 development packages of tern's libraries.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-aarch64}

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "test-aarch64: adding the arm64 architecture to dpkg" >&2
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi
packages=(g++-aarch64-linux-gnu qemu-user libicu-dev:arm64 liblz4-dev:arm64 libzstd-dev:arm64 libgtest-dev:arm64
          libgmock-dev:arm64 nlohmann-json3-dev libboost-dev ninja-build cmake pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-aarch64: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" >/dev/null
kernel_tests=(tests/kernels/test_kernels)
other_tests=(tests/quant/test_quant tests/gguf/test_gguf tests/core/test_core tests/kv/test_kv
             tests/backend/test_backend tests/tokenizer/test_tokenizer tests/sampling/test_sampling
             tests/model/test_model tests/model/test_archs)
targets=()
for t in "${kernel_tests[@]}" "${other_tests[@]}"; do targets+=("$(basename "$t")"); done
ninja -C "$build" "${targets[@]}"

failed=0
run() {  # run CPU [ENV=VALUE ...] BINARY: one test binary under qemu, reporting its summary
  local cpu=$1
  shift
  local log
  log=$(mktemp)
  if env "$@" > "$log" 2>&1; then
    echo "  ok    $cpu  ${*: -1}: $(grep -E '^\[  PASSED  \]' "$log" | head -1)"
  else
    echo "  FAIL  $cpu  ${*: -1}"
    grep -E 'Failure|FAILED|Illegal|Segmentation' "$log" | head -20
    failed=1
  fi
  rm -f "$log"
}

echo "test-aarch64: $(qemu-aarch64 --version | head -1)"
for cpu in cortex-a53 neoverse-n1 max; do
  for t in "${kernel_tests[@]}"; do run "$cpu" qemu-aarch64 -cpu "$cpu" "$build/$t"; done
done
for t in "${other_tests[@]}"; do run max qemu-aarch64 -cpu max "$build/$t"; done
for t in tests/model/test_model tests/model/test_archs; do
  run "max (TERN_CPU_LEVEL=neon)" TERN_CPU_LEVEL=neon qemu-aarch64 -cpu max "$build/$t"
done

if [ "$failed" -ne 0 ]; then
  echo "test-aarch64: FAILED" >&2
  exit 1
fi
echo "test-aarch64: all passed"
