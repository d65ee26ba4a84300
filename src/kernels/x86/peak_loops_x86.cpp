// The x86 throughput loops of kernels/peak_loops.h. They are functions with a
// `target` attribute: called only after the CPU check, and nothing outside them
// is compiled for AVX.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/peak_loops.h"

namespace tern::kernels::peak {
namespace {

constexpr int kAcc = 16;
// AVX2 has 16 ymm registers: 16 accumulators and two operands spilled every
// iteration (a Zen 3 measured 60% of its FMA peak so); 12 chains still cover
// the FMA latency x pipes (4 x 2 on Zen 3).
constexpr int kAccAvx2 = 12;

__attribute__((target("avx512f"))) double fma_loop_avx512(long iters) {
  __m512 a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = _mm512_set1_ps(0.001f * i);
  __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    __asm__ volatile("" : "+v"(m), "+v"(c));
  }
  for (int i = 1; i < kAcc; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(long iters) {
  __m256 a[kAccAvx2];
  for (int i = 0; i < kAccAvx2; ++i) a[i] = _mm256_set1_ps(0.001f * i);
  __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAccAvx2; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __asm__ volatile("" : "+x"(m), "+x"(c));
  }
  for (int i = 1; i < kAccAvx2; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
  float out[8];
  _mm256_storeu_ps(out, a[0]);
  return out[0] + out[7];
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni_loop_avx512(long iters) {
  __m512i a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = _mm512_set1_epi32(i);
  __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = _mm512_dpbusd_epi32(a[i], u, s);
    __asm__ volatile("" : "+v"(u), "+v"(s));
  }
  for (int i = 1; i < kAcc; ++i) a[0] = _mm512_add_epi32(a[0], a[i]);
  // The lanes wrap by design (only the work counts); sum them as unsigned,
  // where wrapping is defined (the intrinsic's reduction adds signed ints).
  uint32_t lanes[16];
  _mm512_storeu_si512(lanes, a[0]);
  uint32_t sum = 0;
  for (uint32_t x : lanes) sum += x;
  return static_cast<double>(sum);
}

// AVX2's int8 products: vpmaddubsw (32 u8 x s8 products summed in pairs), each
// added to an int16 accumulator, as the AVX2 quantized kernels use it.
__attribute__((target("avx2"))) double maddubs_loop_avx2(long iters) {
  __m256i a[kAccAvx2];
  for (int i = 0; i < kAccAvx2; ++i) a[i] = _mm256_set1_epi16(static_cast<short>(i));
  __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-5);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAccAvx2; ++i) a[i] = _mm256_add_epi16(a[i], _mm256_maddubs_epi16(u, s));
    __asm__ volatile("" : "+x"(u), "+x"(s));
  }
  for (int i = 1; i < kAccAvx2; ++i) a[0] = _mm256_add_epi16(a[0], a[i]);
  uint16_t lanes[16];  // wrapping is by design; summed as unsigned
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), a[0]);
  uint32_t sum = 0;
  for (uint16_t x : lanes) sum += x;
  return static_cast<double>(sum);
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) double bf16_loop_avx512(long iters) {
  __m512 a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = _mm512_set1_ps(0.001f * i);
  __m512bh u = (__m512bh)_mm512_set1_epi16(0x3c00), v = (__m512bh)_mm512_set1_epi16(0x3c00);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = _mm512_dpbf16_ps(a[i], u, v);
    __asm__ volatile("" : "+v"(u), "+v"(v));
  }
  for (int i = 1; i < kAcc; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}

// Sums n bytes (a multiple of 256) with 512-bit loads, prefetching 16 KiB
// ahead as the GEMV kernels do: a single stream without it stays well under
// the DRAM bandwidth here. May prefetch (never load) past p + n.
__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + i + 16384 + 64 * l), _MM_HINT_T0);
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 192));
  }
  // Summed as unsigned lanes: the intrinsic's reduction adds signed 64-bit
  // ints, and 1 GiB of 0x01 bytes overflows them (UB).
  uint64_t lanes[8];
  _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
  uint64_t sum = 0;
  for (uint64_t x : lanes) sum += x;
  return sum;
}

// The same with 256-bit loads, with or without the prefetches.
template <bool kPrefetch>
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    if constexpr (kPrefetch)
      for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + i + 16384 + 64 * l), _MM_HINT_T0);
    const auto* v = reinterpret_cast<const __m256i*>(p + i);
    a = _mm256_add_epi64(a, _mm256_add_epi64(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)));
    b = _mm256_add_epi64(b, _mm256_add_epi64(_mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 3)));
    c = _mm256_add_epi64(c, _mm256_add_epi64(_mm256_loadu_si256(v + 4), _mm256_loadu_si256(v + 5)));
    d = _mm256_add_epi64(d, _mm256_add_epi64(_mm256_loadu_si256(v + 6), _mm256_loadu_si256(v + 7)));
  }
  uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

Loop f32_fma() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) return {fma_loop_avx512, kAcc * 16 * 2};
  if (f.avx2 && f.fma) return {fma_loop_avx2, kAccAvx2 * 8 * 2};
  return {};
}

Loop int8_dot() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vnni) return {vnni_loop_avx512, kAcc * 64 * 2};
  if (f.avx2) return {maddubs_loop_avx2, kAccAvx2 * 32 * 2};
  return {};
}

Loop bf16_dot() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512bf16) return {bf16_loop_avx512, kAcc * 32 * 2};
  return {};
}

ReadLoop read_loop(int i) {
  if (cpu_supports(CpuLevel::Avx512)) {
    constexpr ReadLoop kLoops[] = {read_avx512, read_avx2<false>};
    return i >= 0 && i < 2 ? kLoops[i] : nullptr;
  }
  if (!cpu_supports(CpuLevel::Avx2)) return nullptr;
  constexpr ReadLoop kLoops[] = {read_avx2<true>, read_avx2<false>};
  return i >= 0 && i < 2 ? kLoops[i] : nullptr;
}

}  // namespace tern::kernels::peak
