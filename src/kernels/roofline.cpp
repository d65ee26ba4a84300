#include "kernels/roofline.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/peak_loops.h"

namespace tern::kernels {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

using ReadLoop = uint64_t (*)(const uint8_t*, size_t);

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
  // Read bandwidth: every thread streams its share of 1 GiB; the best of 3 passes of each read loop.
  const size_t n_bytes = kReadBytes, n_chunks = n_bytes / 256;
  std::vector<uint8_t> buf(n_bytes);
  pool.parallel_for(n_chunks, [&](size_t b, size_t e, int) { std::memset(&buf[b * 256], 1, (e - b) * 256); });
  std::vector<ReadLoop> loops = {read_scalar};
  for (int i = 0; peak::read_loop(i); ++i) loops.push_back(peak::read_loop(i));
  std::vector<uint64_t> sink(static_cast<size_t>(pool.n_threads()) * 8);
  for (int pass = 0; pass < 3; ++pass)
    for (ReadLoop read : loops) {
      const auto t0 = Clock::now();
      pool.parallel_for(n_chunks, [&](size_t b, size_t e, int ti) {
        const uint8_t* p = &buf[b * 256];
        sink[ti * 8] += read(p, (e - b) * 256);
      }, /*min_chunk=*/n_chunks / pool.n_threads());
      const double gbs = n_bytes / seconds_since(t0) / 1e9;
      if (gbs > lim.read_bw_gbs) lim.read_bw_gbs = gbs;
    }

  const long iters = kPeakIters;
  if (const peak::Loop l = peak::f32_fma(); l.fn) lim.peak_gflops_f32 = parallel_rate(pool, iters, l.fn) * l.ops_per_iter / 1e9;
  if (const peak::Loop l = peak::int8_dot(); l.fn) lim.peak_gops_int8 = parallel_rate(pool, iters, l.fn) * l.ops_per_iter / 1e9;
  if (const peak::Loop l = peak::bf16_dot(); l.fn) lim.peak_gflops_bf16 = parallel_rate(pool, iters, l.fn) * l.ops_per_iter / 1e9;
  return lim;
}

}  // namespace tern::kernels
