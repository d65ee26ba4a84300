#include "machine_limits.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"

namespace tern::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs fn(iters) on every pool thread at once; returns total iterations per second.
template <class Fn>
double parallel_rate(ThreadPool& pool, long iters, Fn fn) {
  volatile double sink = 0;
  const int n = pool.n_threads();
  pool.parallel_for(n, [&](size_t, size_t, int) { sink = sink + fn(iters / 8); });  // warm up, raise clocks
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(n, [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) sink = sink + fn(iters);
  });
  return static_cast<double>(iters) * n / seconds_since(t0);
}

}  // namespace

MachineLimits measure_machine_limits(ThreadPool& pool) {
  MachineLimits m;
  // Read bandwidth: each thread sums its share of a 1 GiB buffer, best of 3 passes.
  const size_t n_bytes = size_t{1} << 30;
  std::vector<uint64_t> buf(n_bytes / 8);  // chunk i = words 32i .. 32i + 31
  const size_t n_chunks = n_bytes / 256;
  pool.parallel_for(n_chunks, [&](size_t b, size_t e, int) { std::memset(&buf[b * 32], 1, (e - b) * 256); });
  const bool wide = kernels::cpu_supports(kernels::CpuLevel::Avx512);
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n_chunks, [&](size_t b, size_t e, int) {
      if (wide) {
        sink = sink + avx512_read(reinterpret_cast<const uint8_t*>(&buf[b * 32]), (e - b) * 256);
        return;
      }
      const uint64_t* w = &buf[b * 32];
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = 0; i < (e - b) * 32; i += 4) {
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
      }
      sink = sink + (s0 ^ s1 ^ s2 ^ s3);
    }, /*min_chunk=*/n_chunks / pool.n_threads());
    const double gbs = n_bytes / seconds_since(t0) / 1e9;
    if (gbs > m.read_gbs) m.read_gbs = gbs;
  }
  const kernels::CpuFeatures& f = kernels::cpu_features();
  const long iters = 20'000'000;
  if (kernels::cpu_supports(kernels::CpuLevel::Avx512)) {
    m.int8_gops = parallel_rate(pool, iters, avx512_vnni_loop) * 16 * 64 * 2 / 1e9;
    m.f32_gflops = parallel_rate(pool, iters, avx512_fma_loop) * 16 * 16 * 2 / 1e9;
    if (f.avx512bf16) m.bf16_gflops = parallel_rate(pool, iters, avx512_bf16_loop) * 16 * 32 * 2 / 1e9;
  }
  return m;
}

}  // namespace tern::bench
