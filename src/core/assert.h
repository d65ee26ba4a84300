// core/assert.h — always-on invariant checks.
//
// TERN_ASSERT is for broken invariants (programming errors), never for bad
// user input: that returns a Status. It stays enabled in Release builds.
#pragma once

namespace tern::detail {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* msg);
}

#define TERN_ASSERT(cond)                                                        \
  do {                                                                           \
    if (!(cond)) ::tern::detail::assert_fail(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)

#define TERN_ASSERT_MSG(cond, msg)                                           \
  do {                                                                       \
    if (!(cond)) ::tern::detail::assert_fail(#cond, __FILE__, __LINE__, msg); \
  } while (0)
