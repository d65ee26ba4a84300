// tests/fuzz/fuzz.h — what every harness here defines: libFuzzer's entry point. Built two ways
// (tests/fuzz/CMakeLists.txt): with clang's -fsanitize=fuzzer for coverage-guided runs
// (scripts/fuzz.sh), and with replay_main.cpp for the suite's smoke, which feeds each seed and a
// bounded number of seeded mutations of it. A harness must not crash, hang, leak or trip a
// sanitizer on any input; errors the code reports are fine.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
