#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace tern::kernels {
namespace {

struct Case {
  int n_head, n_head_kv, head_dim, window;
  std::vector<int> block_sizes;  // n_q per block; each block is its own sequence
  std::vector<int> ctx_before;   // cached positions before the block
  int run_len;                   // split the cache into runs of this many positions (paged layout)
};

void check(const Case& c, int threads, const AttentionKernels* kernels) {
  std::mt19937 rng(c.head_dim * 131 + c.window);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int row = c.n_head_kv * c.head_dim;
  AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
  std::vector<std::vector<float>> ks, vs, qs, outs, refs;
  std::vector<QueryBlock> blocks, ref_blocks;
  for (size_t b = 0; b < c.block_sizes.size(); ++b) {
    const int n_q = c.block_sizes[b], total = c.ctx_before[b] + n_q;
    ks.emplace_back(static_cast<size_t>(total) * row);
    vs.emplace_back(static_cast<size_t>(total) * row);
    qs.emplace_back(static_cast<size_t>(n_q) * c.n_head * c.head_dim);
    for (auto* v : {&ks.back(), &vs.back(), &qs.back()})
      for (auto& x : *v) x = dist(rng) * 2.0f;  // peaked softmax: attention is not uniform
    outs.emplace_back(qs.back().size(), -1.0f);
    refs.emplace_back(qs.back().size(), -2.0f);
  }
  for (size_t b = 0; b < c.block_sizes.size(); ++b) {
    const int n_q = c.block_sizes[b], total = c.ctx_before[b] + n_q;
    std::vector<KvRun> runs;
    for (int p = 0; p < total; p += c.run_len)
      runs.push_back({ks[b].data() + static_cast<size_t>(p) * row, vs[b].data() + static_cast<size_t>(p) * row, p,
                      std::min(c.run_len, total - p)});
    blocks.push_back({qs[b].data(), outs[b].data(), n_q, c.ctx_before[b], runs});
    ref_blocks.push_back({qs[b].data(), refs[b].data(), n_q, c.ctx_before[b], runs});
  }
  ThreadPool pool(threads);
  attention(s, blocks, pool, kernels);
  attention_reference(s, ref_blocks);
  for (size_t b = 0; b < outs.size(); ++b)
    for (size_t i = 0; i < outs[b].size(); ++i)
      ASSERT_NEAR(outs[b][i], refs[b][i], 2e-5f * 8) << "block " << b << " elem " << i << " threads " << threads;
}

// Outputs are convex combinations of value rows (|v| ~ 2): f32 accumulation
// over <= 1000 positions and the polynomial exp (1e-7 relative) stay far below 1.6e-4.
TEST(Attention, MatchesReferenceAcrossShapesSplitsAndLayouts) {
  const Case cases[] = {
      {8, 8, 16, 0, {1}, {0}, 1 << 20},                 // single token, no history
      {8, 2, 16, 0, {1}, {700}, 1 << 20},               // decode, long context: KV split path
      {8, 2, 16, 0, {1}, {700}, 16},                    // same through 16-position runs (paged)
      {4, 4, 64, 0, {37}, {0}, 1 << 20},                // prefill, tile edges (37 rows, 64-pos tiles)
      {6, 3, 32, 0, {5, 1, 1, 20}, {3, 90, 0, 150}, 16},  // mixed blocks in one call
      {8, 2, 16, 5, {30}, {10}, 7},                     // sliding window
      {8, 1, 128, 0, {3}, {300}, 1 << 20},              // MQA, head_dim 128
      {16, 4, 8, 0, {80}, {0}, 1 << 20},                // more rows than one pass (80 x 4 > 64)
  };
  for (CpuLevel level : {CpuLevel::Scalar, CpuLevel::Avx2, CpuLevel::Avx512}) {
    const AttentionKernels* k = attention_kernels_at(level);
    if (!k) continue;  // this CPU lacks the level
    SCOPED_TRACE(cpu_level_name(level));
    for (const auto& c : cases)
      for (int threads : {1, 2, 3}) check(c, threads, k);
  }
}

}  // namespace
}  // namespace tern::kernels
