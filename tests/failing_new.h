// tests/failing_new.h — operator new replaced so that the armed thread's n-th allocation throws
// std::bad_alloc, as operator new does when memory runs out (issue 19's allocation-failure tests:
// tests/fuzz/alloc_faults_main.cpp, tests/engine/test_engine_alloc_faults.cpp). Only the armed
// thread's allocations are counted and failed. The replacements are definitions: include this
// header in exactly one file of a test binary.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tern::test::failing_new {

inline thread_local long t_fail_at = -1;  // the allocation to fail, counted from arming; -1 = none
inline thread_local long t_count = 0;     // allocations since arming

// Fails allocation n (0-based) from now on this thread; a huge n only counts.
inline void arm(long n) {
  t_fail_at = n;
  t_count = 0;
}
inline void count_only() { arm(1L << 62); }
inline void disarm() { t_fail_at = -1; }
inline long allocations() { return t_count; }

inline void* allocate(std::size_t n, std::size_t align) {
  if (t_fail_at >= 0 && t_count++ == t_fail_at) throw std::bad_alloc();
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace tern::test::failing_new

void* operator new(std::size_t n) { return tern::test::failing_new::allocate(n, 0); }
void* operator new[](std::size_t n) { return tern::test::failing_new::allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  return tern::test::failing_new::allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return tern::test::failing_new::allocate(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return tern::test::failing_new::allocate(n, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
