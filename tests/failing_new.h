// tests/failing_new.h — operator new replaced so that the armed thread's n-th allocation throws
// std::bad_alloc, as operator new does when memory runs out (issue 19's allocation-failure tests:
// tests/fuzz/alloc_faults_main.cpp, tests/engine/test_engine_alloc_faults.cpp) — or every
// allocation from the n-th on. Only the armed thread's allocations are counted and failed. The
// replacements are definitions: include this header in exactly one file of a test binary.
#pragma once

#include <sys/prctl.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tern::test::failing_new {

inline thread_local long t_fail_at = -1;  // the first allocation to fail, counted from arming; -1 = none
inline thread_local long t_fail_end = 0;  // one past the last allocation to fail
inline thread_local long t_count = 0;     // allocations since arming

// Fails allocations n .. n + run - 1 (0-based) from now on this thread; a huge n only counts.
// A huge `run` fails every allocation from the n-th on, as memory that stays short does.
inline void arm(long n, long run = 1) {
  t_fail_at = n;
  t_fail_end = run > (1L << 62) - n ? (1L << 62) : n + run;
  t_count = 0;
}
inline constexpr long kEveryOneAfter = 1L << 62;
inline void count_only() { arm(1L << 62); }
inline void disarm() { t_fail_at = -1; }
inline long allocations() { return t_count; }

// The same on another thread, found by its name (pthread_setname_np; the engine names its step
// thread "tern-step"): allocations n .. n + run - 1 made on threads of that name fail, counted
// across them from arming. n = count-only: only counts.
inline std::atomic<long> g_named_fail_at{-1};
inline std::atomic<long> g_named_fail_end{0};
inline std::atomic<long> g_named_count{0};
inline char g_named_thread[16] = {};

inline void arm_thread(const char* name, long n, long run = 1) {
  g_named_fail_at.store(-1);
  std::strncpy(g_named_thread, name, sizeof g_named_thread - 1);
  g_named_count.store(0);
  g_named_fail_end.store(run > (1L << 62) - n ? (1L << 62) : n + run);
  g_named_fail_at.store(n);
}
inline void disarm_thread() { g_named_fail_at.store(-1); }
inline long thread_allocations() { return g_named_count.load(); }

inline bool on_named_thread() {
  char name[16] = {};
  prctl(PR_GET_NAME, name);
  return std::strncmp(name, g_named_thread, sizeof name) == 0;
}

inline void* allocate(std::size_t n, std::size_t align) {
  if (const long at = g_named_fail_at.load(std::memory_order_relaxed); at >= 0 && on_named_thread()) {
    const long i = g_named_count.fetch_add(1);
    if (i >= at && i < g_named_fail_end.load()) throw std::bad_alloc();
  }
  if (t_fail_at >= 0) {
    const long i = t_count++;
    if (i >= t_fail_at && i < t_fail_end) throw std::bad_alloc();
  }
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
// These operators are the allocator: new takes from malloc, so delete frees
// (GCC at -O1 reads the pairing as a mismatch).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
