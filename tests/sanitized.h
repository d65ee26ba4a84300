// tests/sanitized.h — whether this test binary runs under a sanitizer.
//
// Under ASan/UBSan/TSan code runs 3-10x slower. A sanitizer checks the memory
// and threading of the paths a test takes, not its statistical power or its
// sweep's width, so the longest tests (thousands of sampled requests, attention
// at every depth) take a smaller sample or fewer points there and keep the full
// size in the optimised build, which CI runs first.
#pragma once

namespace tern::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace tern::test
