#include "kernels/roofline.h"

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"

namespace tern::kernels {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The loops below are functions with a `target` attribute: they are called
// only after the CPU check, and nothing outside them is compiled for AVX.
// Each keeps kAcc independent accumulators, more than latency x throughput of
// its unit, so the loop measures throughput.
constexpr int kAcc = 16;

// Under a sanitizer the figures mean nothing (every access is checked) and
// the full measurement took most of a minute per `tern bench` in the suite:
// there it reads 64 MiB and runs a tenth of the iterations.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kReadBytes = size_t{1} << 26;
constexpr long kPeakIters = 2'000'000;
#else
constexpr size_t kReadBytes = size_t{1} << 30;
constexpr long kPeakIters = 20'000'000;
#endif

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
  __m256 a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = _mm256_set1_ps(0.001f * i);
  __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __asm__ volatile("" : "+x"(m), "+x"(c));
  }
  for (int i = 1; i < kAcc; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
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

uint64_t read_scalar(const uint8_t* p, size_t n) {
  uint64_t s[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i += 32)
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * j, 8);
      s[j] += w;
    }
  return s[0] ^ s[1] ^ s[2] ^ s[3];
}

// Runs loop(iters) on every pool thread at once; returns total iterations per second.
double parallel_rate(ThreadPool& pool, long iters, double (*loop)(long)) {
  const int n = pool.n_threads();
  std::vector<double> sink(static_cast<size_t>(n) * 8);
  pool.parallel_for(n, [&](size_t, size_t, int ti) { sink[ti * 8] += loop(iters / 8); });  // warm-up, clocks settle
  const auto t0 = Clock::now();
  pool.parallel_for(n, [&](size_t b, size_t e, int ti) {
    for (size_t i = b; i < e; ++i) sink[ti * 8] += loop(iters);
  });
  return static_cast<double>(iters) * n / seconds_since(t0);
}

}  // namespace

MachineLimits measure_machine_limits(ThreadPool& pool) {
  MachineLimits lim;
  // Read bandwidth: every thread streams its share of 1 GiB; best of 3 passes.
  const size_t n_bytes = kReadBytes, n_chunks = n_bytes / 256;
  std::vector<uint8_t> buf(n_bytes);
  pool.parallel_for(n_chunks, [&](size_t b, size_t e, int) { std::memset(&buf[b * 256], 1, (e - b) * 256); });
  const bool wide = cpu_supports(CpuLevel::Avx512);
  std::vector<uint64_t> sink(static_cast<size_t>(pool.n_threads()) * 8);
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(n_chunks, [&](size_t b, size_t e, int ti) {
      const uint8_t* p = &buf[b * 256];
      sink[ti * 8] += wide ? read_avx512(p, (e - b) * 256) : read_scalar(p, (e - b) * 256);
    }, /*min_chunk=*/n_chunks / pool.n_threads());
    const double gbs = n_bytes / seconds_since(t0) / 1e9;
    if (gbs > lim.read_bw_gbs) lim.read_bw_gbs = gbs;
  }

  const CpuFeatures& f = cpu_features();
  const long iters = kPeakIters;
  if (f.avx512f) lim.peak_gflops_f32 = parallel_rate(pool, iters, fma_loop_avx512) * kAcc * 16 * 2 / 1e9;
  else if (f.avx2 && f.fma) lim.peak_gflops_f32 = parallel_rate(pool, iters, fma_loop_avx2) * kAcc * 8 * 2 / 1e9;
  if (f.avx512f && f.avx512bw && f.avx512vnni)
    lim.peak_gops_int8 = parallel_rate(pool, iters, vnni_loop_avx512) * kAcc * 64 * 2 / 1e9;
  if (f.avx512f && f.avx512bw && f.avx512bf16)
    lim.peak_gflops_bf16 = parallel_rate(pool, iters, bf16_loop_avx512) * kAcc * 32 * 2 / 1e9;
  return lim;
}

}  // namespace tern::kernels
