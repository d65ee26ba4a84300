#!/usr/bin/env bash
# cmake --install into a fresh prefix, then examples/generate.c built against it
# four ways — pkg-config shared and static, CMake's find_package(tern) with
# tern::tern and tern::tern_static — each run on the model and checked against
# the golden text's start (40 greedy tokens); only tern_* is exported.
set -euo pipefail
build=$1 source=$2 model=$3 golden=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in include/tern/tern.h lib/libtern.so lib/libtern.a lib/pkgconfig/tern.pc lib/cmake/tern/ternConfig.cmake; do
  [[ -e $prefix/$f ]] || { echo "not installed: $f"; exit 1; }
done
# Only the C API leaves the shared library.
if nm -D --defined-only "$prefix/lib/libtern.so" | awk '{print $3}' | grep -v '^tern_' | grep -q .; then
  echo "libtern.so exports more than tern_*:"; nm -D --defined-only "$prefix/lib/libtern.so" | grep -v ' tern_' | head; exit 1
fi
golden_text=$(cat "$golden")
check() {  # check BINARY LABEL: its 40 tokens are where the golden text starts
  local got
  got=$("$1" "$model" "" 40 2> "$work/err") || { echo "$2: failed"; cat "$work/err"; exit 1; }
  [[ ${#got} -gt 60 && $golden_text == "$got"* ]] || { echo "$2: text differs: $got"; exit 1; }
  echo "ok: $2"
}
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -Wall -Werror "$source/examples/generate.c" $(pkg-config --cflags --libs tern) -Wl,-rpath,"$prefix/lib" \
  -o "$work/gen_pc_shared"
check "$work/gen_pc_shared" "pkg-config, shared"
# Static: libtern.a by path, with what pkg-config --static says it needs.
libs_private=$(pkg-config --static --libs tern | sed 's/-L[^ ]*//g; s/-ltern\b//')
cc -std=c99 -Wall -Werror "$source/examples/generate.c" $(pkg-config --cflags tern) "$prefix/lib/libtern.a" $libs_private \
  -o "$work/gen_pc_static"
ldd "$work/gen_pc_static" | grep -q libtern && { echo "the static build still needs libtern.so"; exit 1; }
check "$work/gen_pc_static" "pkg-config, static"
for target in tern::tern tern::tern_static; do
  dir=$work/cmake_${target//:/_}
  mkdir -p "$dir"
  cat > "$dir/CMakeLists.txt" << EOF2
cmake_minimum_required(VERSION 3.16)
project(tern_consumer C)
find_package(tern 0.1 REQUIRED)
add_executable(generate "$source/examples/generate.c")
target_link_libraries(generate PRIVATE $target)
EOF2
  cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$prefix/lib" > "$work/cmake.log" \
    || { cat "$work/cmake.log"; exit 1; }
  cmake --build "$dir/build" > "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
  check "$dir/build/generate" "find_package, $target"
done
