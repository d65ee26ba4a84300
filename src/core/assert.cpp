#include "core/assert.h"

#include <cstdio>
#include <cstdlib>

namespace tern::detail {

void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "tern: assertion failed: %s at %s:%d%s%s\n", expr, file, line,
               msg ? ": " : "", msg ? msg : "");
  std::abort();
}

}  // namespace tern::detail
