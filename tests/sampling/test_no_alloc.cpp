// sample() allocates nothing once its buffers exist: counted by replacing the
// global operator new for this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace {
std::atomic<long> g_n_allocations{0};
}

// Every unaligned form is replaced, so that whatever a library allocates with
// one form and frees with another meets the same malloc/free pair (ASan
// checks that pairing). Aligned forms are left to the runtime.
namespace {
void* counted_malloc(std::size_t size) noexcept {
  g_n_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* counted_malloc_or_throw(std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return counted_malloc_or_throw(size); }
void* operator new[](std::size_t size) { return counted_malloc_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tern {
namespace {

TEST(SamplerNoAlloc, SampleDoesNotAllocate) {
  const int n_vocab = 50000;
  const std::vector<float> logits = sampling_test::random_logits(n_vocab, 1, 2.0f);
  SamplingParams with_k;  // defaults: heap top-k
  SamplingParams big_k = with_k;
  big_k.top_k = 20000;
  SamplingParams no_k = with_k;
  no_k.top_k = 0;
  no_k.min_p = 0.0f;  // the bucketed top-p over the whole vocabulary
  SamplingParams penalised = with_k;
  penalised.frequency_penalty = 0.5f;
  penalised.repetition_penalty = 1.2f;
  for (SamplingParams p : {with_k, big_k, no_k, penalised}) {
    p.seed = 3;
    Sampler s(p, n_vocab);
    for (TokenId id = 0; id < 200; ++id) s.accept(id * 7);
    std::vector<float> scratch = logits;
    (void)s.sample(scratch);  // first call may size buffers
    long before = g_n_allocations.load();
    for (int i = 0; i < 20; ++i) {
      std::copy(logits.begin(), logits.end(), scratch.begin());
      (void)s.sample(scratch);
    }
    EXPECT_EQ(g_n_allocations.load() - before, 0) << "top_k=" << p.top_k;
  }
}

}  // namespace
}  // namespace tern
