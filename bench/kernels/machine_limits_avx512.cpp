// Peak-throughput loops for AVX-512 (compiled with AVX-512 flags; intrinsics only, see machine_limits.h).
#include <immintrin.h>

#include "machine_limits.h"

namespace tern::bench {
namespace {

// Sixteen independent accumulators: more than latency x throughput of each unit.
#define TERN_R16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

}  // namespace

int avx512_vnni_loop(long iters) {
#define TERN_DECL(i) __m512i a##i = _mm512_set1_epi32(i);
  TERN_R16(TERN_DECL)
#undef TERN_DECL
  __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  for (long it = 0; it < iters; ++it) {
#define TERN_OP(i) a##i = _mm512_dpbusd_epi32(a##i, u, s);
    TERN_R16(TERN_OP)
#undef TERN_OP
    __asm__ volatile("" : "+v"(u), "+v"(s));
  }
  __m512i t = _mm512_setzero_si512();
#define TERN_SUM(i) t = _mm512_add_epi32(t, a##i);
  TERN_R16(TERN_SUM)
#undef TERN_SUM
  alignas(64) int out[16];
  _mm512_store_si512(out, t);
  return out[0] + out[15];
}

float avx512_fma_loop(long iters) {
#define TERN_DECL(i) __m512 a##i = _mm512_set1_ps(0.001f * i);
  TERN_R16(TERN_DECL)
#undef TERN_DECL
  __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
  for (long it = 0; it < iters; ++it) {
#define TERN_OP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    TERN_R16(TERN_OP)
#undef TERN_OP
    __asm__ volatile("" : "+v"(m), "+v"(c));
  }
  __m512 t = _mm512_setzero_ps();
#define TERN_SUM(i) t = _mm512_add_ps(t, a##i);
  TERN_R16(TERN_SUM)
#undef TERN_SUM
  alignas(64) float out[16];
  _mm512_store_ps(out, t);
  return out[0] + out[15];
}

float avx512_bf16_loop(long iters) {
#define TERN_DECL(i) __m512 a##i = _mm512_set1_ps(0.001f * i);
  TERN_R16(TERN_DECL)
#undef TERN_DECL
  __m512bh u = (__m512bh)_mm512_set1_epi16(0x3c00), v = (__m512bh)_mm512_set1_epi16(0x3c00);
  for (long it = 0; it < iters; ++it) {
#define TERN_OP(i) a##i = _mm512_dpbf16_ps(a##i, u, v);
    TERN_R16(TERN_OP)
#undef TERN_OP
    __asm__ volatile("" : "+v"(u), "+v"(v));
  }
  __m512 t = _mm512_setzero_ps();
#define TERN_SUM(i) t = _mm512_add_ps(t, a##i);
  TERN_R16(TERN_SUM)
#undef TERN_SUM
  alignas(64) float out[16];
  _mm512_store_ps(out, t);
  return out[0] + out[15];
}

uint64_t avx512_read(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    // Prefetched 16 KiB ahead, as the GEMV kernels do: a single stream read
    // without it reaches well under the DRAM bandwidth on this machine.
    for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + i + 16384 + 64 * l), _MM_HINT_T0);
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 192));
  }
  alignas(64) uint64_t out[8];
  _mm512_store_si512(out, _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
  return out[0] ^ out[7];
}

#undef TERN_R16

}  // namespace tern::bench
