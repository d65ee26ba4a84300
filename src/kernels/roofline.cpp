#include "kernels/roofline.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"

namespace tern::kernels {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The loops below live in functions with a `target` attribute: they are
// only called after the CPU check, and nothing else is compiled for AVX.
__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  __m512 a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 8; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 8; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  float out[8];
  __m256 s = a[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_ps(s, a[i]);
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni_loop_avx512(int64_t iters) {
  __m512i a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm512_set1_epi32(i);
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 8; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, y);
  __m512i s = a[0];
  for (int i = 1; i < 8; ++i) s = _mm512_add_epi32(s, a[i]);
  return static_cast<double>(_mm512_reduce_add_epi32(s));
}

// Streams `n` bytes with wide loads and sums them (so the loads cannot be elided).
uint64_t read_stream(const uint64_t* p, size_t n_words) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n_words; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n_words; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

}  // namespace

MachineLimits measure_machine_limits(ThreadPool& pool) {
  MachineLimits lim;
  const int nt = pool.n_threads();

  // Read bandwidth: 512 MiB, best of 3 passes, every thread streaming its share.
  const size_t bytes = size_t{512} << 20;
  std::vector<uint64_t> buf(bytes / 8);
  pool.parallel_for(buf.size(), [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) buf[i] = i;
  }, 1 << 16);
  std::vector<uint64_t> sink(nt * 8);
  double best = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<size_t>(nt), [&](size_t b, size_t e, int ti) {
      for (size_t part = b; part < e; ++part) {
        const size_t n = buf.size() / nt;
        sink[ti * 8] += read_stream(buf.data() + part * n, n);
      }
    });
    best = std::min(best, seconds_since(t0));
  }
  lim.read_bw_gbs = bytes / best / 1e9;

  // Compute peaks: each thread runs a register-only loop; time the slowest.
  const int64_t iters = 20'000'000;
  auto run = [&](double (*loop)(int64_t), double ops_per_iter) {
    std::vector<double> out(nt);
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<size_t>(nt), [&](size_t b, size_t e, int ti) {
      for (size_t i = b; i < e; ++i) out[ti] += loop(iters);
    });
    return ops_per_iter * iters * nt / seconds_since(t0) / 1e9;
  };
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) lim.peak_gflops_f32 = run(fma_loop_avx512, 8 * 16 * 2);
  else if (f.avx2 && f.fma) lim.peak_gflops_f32 = run(fma_loop_avx2, 8 * 8 * 2);
  if (f.avx512f && f.avx512bw && f.avx512vnni) lim.peak_gops_int8 = run(vnni_loop_avx512, 8 * 64 * 2);
  return lim;
}

}  // namespace tern::kernels
