// A sequence's own limits in the attention kernel (QueryBlock::n_sink,
// window, kv_lo, q_sink: StreamingLLM's sinks + window, context shift): the
// tiled kernel at every level against the scalar reference, over a cache
// laid out as the KV manager leaves it (the sink block, then only the blocks
// the window still needs), with "switched off is detected" cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/kv_format.h"
#include "kernels/attention.h"

namespace tern::kernels {
namespace {

struct StreamCase {
  int n_sink, window, kv_lo;
  int n_q, pos0;  // one block of n_q rows from pos0
};

constexpr int kHeads = 8, kKvHeads = 2, kHd = 32, kBlock = 16;

struct Stream {
  AttentionShape shape;
  std::vector<float> q, q_sink;  // [n_q][kHeads][kHd]
  std::vector<char> k, v;        // every position 0 .. end, encoded
  std::vector<KvRun> runs;       // only the blocks a row may read (the rest "freed")
  StreamCase c;

  QueryBlock block(float* out, bool sinks_on = true) const {
    QueryBlock b{q.data(), out, c.n_q, c.pos0, runs};
    b.n_sink = sinks_on ? c.n_sink : 0;
    b.window = c.window;
    b.kv_lo = c.kv_lo;
    b.q_sink = q_sink.data();
    return b;
  }
};

Stream make(const StreamCase& c, KvType kv, unsigned seed) {
  Stream s;
  s.c = c;
  s.shape = AttentionShape{kHeads, kKvHeads, kHd, 1.0f / std::sqrt(float(kHd)), 0, kv};
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.5f);
  const int end = c.pos0 + c.n_q, row = kKvHeads * kHd;
  std::vector<float> kf(static_cast<size_t>(end) * row), vf(kf.size());
  for (float& x : kf) x = d(rng);
  for (float& x : vf) x = d(rng);
  s.q.resize(static_cast<size_t>(c.n_q) * kHeads * kHd);
  s.q_sink.resize(s.q.size());
  for (float& x : s.q) x = d(rng);
  for (float& x : s.q_sink) x = d(rng);
  const size_t rb = kv_row_bytes(kv, kKvHeads, kHd);
  s.k.resize(static_cast<size_t>(end) * rb);
  s.v.resize(s.k.size());
  for (int p = 0; p < end; ++p) {
    kv_encode_row(kv, kf.data() + static_cast<size_t>(p) * row, kKvHeads, kHd, s.k.data() + p * rb);
    kv_encode_row(kv, vf.data() + static_cast<size_t>(p) * row, kKvHeads, kHd, s.v.data() + p * rb);
  }
  // Blocks kept: those holding sinks, and those from the first row's window start on.
  int32_t lo = c.kv_lo;
  if (c.window > 0) lo = std::max(lo, c.pos0 - c.window + 1);
  for (int b0 = 0; b0 < end; b0 += kBlock) {
    const bool keep = b0 < c.n_sink || b0 + kBlock > lo;
    if (!keep) continue;
    const int n = std::min(kBlock, end - b0);
    s.runs.push_back({s.k.data() + b0 * rb, s.v.data() + b0 * rb, b0, n});
  }
  return s;
}

std::vector<float> run(const Stream& s, const AttentionKernels* k, int threads, bool sinks_on = true) {
  std::vector<float> out(s.q.size(), -7.0f);
  std::vector<QueryBlock> blocks{s.block(out.data(), sinks_on)};
  ThreadPool pool(threads);
  attention(s.shape, blocks, pool, k);
  return out;
}

std::vector<float> reference(const Stream& s) {
  std::vector<float> out(s.q.size(), -7.0f);
  std::vector<QueryBlock> blocks{s.block(out.data())};
  attention_reference(s.shape, blocks);
  return out;
}

const StreamCase kCases[] = {
    {4, 60, 0, 1, 900},    // decode far past the window: sinks, gap, window over two segments
    {4, 60, 0, 40, 700},   // a prefill chunk: every row its own window
    {4, 252, 0, 1, 260},   // the window just left the sinks' block
    {4, 60, 0, 30, 20},    // early rows: the window still covers the sinks
    {4, 0, 530, 20, 600},  // context shift: kv_lo, no window
    {0, 100, 0, 5, 800},   // window only, no sinks
    {20, 40, 0, 3, 1030},  // sinks over a block boundary
};

TEST(AttentionStreaming, MatchesReferenceAtEveryLevel) {
  for (KvType kv : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8})
    for (const StreamCase& c : kCases) {
      const Stream s = make(c, kv, static_cast<unsigned>(c.pos0 + c.n_sink));
      const auto ref = reference(s);
      for (CpuLevel level : all_cpu_levels()) {
        const AttentionKernels* k = attention_kernels_at(level);
        if (!k) continue;
        for (int threads : {1, 3}) {
          const auto out = run(s, k, threads);
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out[i], ref[i], 2e-4f) << "elem " << i << " level " << cpu_level_name(level) << " kv "
                                               << kv_type_name(kv) << " case pos0=" << c.pos0;
        }
      }
    }
}

// A row's bits do not depend on the block it came in: each row of a prefill
// chunk equals that row decoded alone (its own window, its own sink query).
TEST(AttentionStreaming, RowsAreBatchInvariant) {
  for (KvType kv : {KvType::F16, KvType::Q8_0}) {
    const StreamCase c{4, 60, 0, 40, 700};
    const Stream chunk = make(c, kv, 11);
    const auto all = run(chunk, nullptr, 2);
    for (int t = 0; t < c.n_q; t += 13) {
      Stream one = make({c.n_sink, c.window, c.kv_lo, 1, c.pos0 + t}, kv, 11);
      // The same cache and the same row t of q and q_sink.
      one.k = chunk.k;
      one.v = chunk.v;
      const size_t rb = kv_row_bytes(kv, kKvHeads, kHd), row = static_cast<size_t>(kHeads) * kHd;
      for (KvRun& r : one.runs) {
        r.k = chunk.k.data() + r.pos0 * rb;
        r.v = chunk.v.data() + r.pos0 * rb;
      }
      std::copy_n(chunk.q.begin() + t * row, row, one.q.begin());
      std::copy_n(chunk.q_sink.begin() + t * row, row, one.q_sink.begin());
      const auto alone = run(one, nullptr, 2);
      for (size_t i = 0; i < row; ++i) ASSERT_EQ(alone[i], all[t * row + i]) << "row " << t << " elem " << i;
    }
  }
}

// Switched off is detected: ignoring q_sink (scoring sinks with q), dropping
// the sinks, or reading the gap would each change the outputs far beyond the
// budget above.
TEST(AttentionStreaming, SinkQueryAndGapMatter) {
  const StreamCase c{4, 60, 0, 1, 900};
  Stream s = make(c, KvType::F32, 5);
  const auto base = run(s, nullptr, 2);
  auto worst = [&](const std::vector<float>& o) {
    double w = 0;
    for (size_t i = 0; i < o.size(); ++i) w = std::max(w, double(std::fabs(o[i] - base[i])));
    return w;
  };
  EXPECT_GT(worst(run(s, nullptr, 2, false)), 0.05) << "dropping the sinks changes nothing";
  Stream same_q = s;
  same_q.q_sink = s.q;
  EXPECT_GT(worst(run(same_q, nullptr, 2)), 0.05) << "q_sink is not what scores the sinks";
  // Every position in the runs (no blocks freed) and no window: the gap is read.
  Stream dense = make({c.n_sink, 0, 0, 1, 900}, KvType::F32, 5);
  EXPECT_GT(worst(run(dense, nullptr, 2)), 0.05) << "the window does not mask the gap";
}

}  // namespace
}  // namespace tern::kernels
