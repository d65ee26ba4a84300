// bench_attention — decode attention at depth: one query token (n_q = 1) of
// one sequence over D cached positions, as one layer of a decode step runs it,
// reported as time per call and GB/s of keys and values read, beside the
// machine's measured read bandwidth. Layers are rotated through copies of the
// cache totalling >= 256 MiB so every call streams from DRAM as decode does.
//
//   bench_attention [--depths 512,4096,16384] [--heads 12] [--kv-heads 4] [--head-dim 64]
//                   [--threads 2] [--f32 | --kv f16|f32|q8_0|q4_0|fp8] [--block 16] [--n-q 1] [--level avx2] [--huge] [--hot] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "core/kv_format.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/roofline.h"

namespace tern::bench {
namespace {

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

// The KV pool's memory, optionally backed by transparent huge pages (--huge).
struct HugeBuffer {
  uint8_t* p = nullptr;
  void allocate(size_t n, bool huge) {
    constexpr size_t kHuge = size_t{2} << 20;
    void* b = nullptr;
    if (posix_memalign(&b, kHuge, (n + kHuge - 1) / kHuge * kHuge) != 0) std::abort();
    if (huge) madvise(b, (n + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
    p = static_cast<uint8_t*>(b);
  }
  uint8_t* data() const { return p; }
  ~HugeBuffer() { std::free(p); }
};

int run(int argc, char** argv) {
  std::vector<int> depths = {512, 4096, 16384};
  int n_head = 12, n_head_kv = 4, head_dim = 64, threads = 2, block = 0, n_q = 1;
  KvType kv = KvType::F16;
  bool huge = false, hot = false;
  int reps = 5;
  const kernels::AttentionKernels* k = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--depths") depths = parse_list(next());
    else if (a == "--heads") n_head = std::atoi(next());
    else if (a == "--kv-heads") n_head_kv = std::atoi(next());
    else if (a == "--head-dim") head_dim = std::atoi(next());
    else if (a == "--threads") threads = std::atoi(next());
    else if (a == "--block") block = std::atoi(next());
    else if (a == "--n-q") n_q = std::atoi(next());
    else if (a == "--f32") kv = KvType::F32;
    else if (a == "--kv") {
      const auto t = parse_kv_type(next());
      if (!t) {
        std::fprintf(stderr, "--kv: expected %s\n", kv_type_choices());
        return 2;
      }
      kv = *t;
    }
    else if (a == "--huge") huge = true;
    else if (a == "--hot") hot = true;
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--level") {
      const std::string l = next();
      k = nullptr;
      for (kernels::CpuLevel level : kernels::all_cpu_levels())
        if (l == kernels::cpu_level_name(level)) k = kernels::attention_kernels_at(level);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  ThreadPool pool(threads);
  const kernels::MachineLimits lim = kernels::measure_machine_limits(pool);
  const size_t row_bytes = kv_row_bytes(kv, n_head_kv, head_dim);
  kernels::AttentionShape s{n_head, n_head_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim)), 0, kv};
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::printf("| depth | n_q | heads | kv heads | head_dim | kv | threads | us/call | KV GB/s | %% of %.1f GB/s |\n",
              lim.read_bw_gbs);
  std::printf("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
  for (int depth : depths) {
    const int total = depth + n_q;
    const size_t kv_bytes = static_cast<size_t>(total) * row_bytes * 2;
    // --hot: one copy, cache-resident where it fits: the kernel's compute alone.
    const int copies = hot ? 1 : static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / kv_bytes + 1));
    std::vector<HugeBuffer> cache(copies);
    for (auto& c : cache) {
      c.allocate(kv_bytes, huge);
      std::vector<float> row(static_cast<size_t>(n_head_kv) * head_dim);
      for (size_t r = 0; r < kv_bytes / row_bytes; ++r) {
        for (float& x : row) x = dist(rng);
        kv_encode_row(kv, row.data(), n_head_kv, head_dim, c.data() + r * row_bytes);
      }
    }
    std::vector<float> q(static_cast<size_t>(n_q) * n_head * head_dim), out(q.size());
    for (float& x : q) x = dist(rng);
    auto blocks_of = [&](int c) {
      const uint8_t* kb = cache[c].data();
      const uint8_t* vb = kb + static_cast<size_t>(total) * row_bytes;
      std::vector<kernels::KvRun> runs;
      const int run = block > 0 ? block : total;
      for (int p = 0; p < total; p += run)
        runs.push_back({kb + p * row_bytes, vb + p * row_bytes, p, std::min(run, total - p)});
      return std::vector<kernels::QueryBlock>{{q.data(), out.data(), n_q, depth, runs}};
    };
    std::vector<std::vector<kernels::QueryBlock>> blocks;
    for (int c = 0; c < copies; ++c) blocks.push_back(blocks_of(c));
    for (int c = 0; c < copies; ++c) kernels::attention(s, blocks[c], pool, k);  // warm-up
    std::vector<double> times;
    const int calls = std::max(copies * 2, 20);
    for (int rep = 0; rep < reps; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) kernels::attention(s, blocks[i % copies], pool, k);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    const double gbs = kv_bytes / t / 1e9;
    std::printf("| %d | %d | %d | %d | %d | %s | %d | %.1f | %.2f | %.0f%% |\n", depth, n_q, n_head, n_head_kv, head_dim,
                kv_type_name(kv), threads, t * 1e6, gbs, lim.read_bw_gbs > 0 ? 100 * gbs / lim.read_bw_gbs : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace tern::bench

int main(int argc, char** argv) { return tern::bench::run(argc, argv); }
