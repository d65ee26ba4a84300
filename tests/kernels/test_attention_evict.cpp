// Attention over a sequence whose KV blocks were evicted by importance
// (kv/seq_window.h): the runs leave gaps, which every level's kernel must read
// as nothing — checked against the scalar reference, which walks the runs
// as given — and the attention mass eviction is decided by, checked against
// softmax weights computed in double here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/kv_format.h"
#include "kernels/attention.h"

namespace tern::kernels {
namespace {

constexpr int kBlock = 16;

struct Seq {
  AttentionShape shape;
  int total = 0;  // positions, the queries' included
  std::vector<float> k, v, q;
  std::vector<char> ke, ve;
  std::vector<KvRun> runs;  // one per kept block
};

// total positions of an n_head/n_head_kv/hd sequence stored as `kv`, the
// blocks listed in `evicted` left out; queries for the last n_q positions.
Seq make_seq(KvType kv, int total, int n_q, const std::vector<int>& evicted, int window = 0) {
  Seq s;
  s.shape = AttentionShape{8, 2, 64, 0.125f, window, kv};
  s.total = total;
  std::mt19937 rng(static_cast<unsigned>(total * 7 + n_q));
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int row = s.shape.n_head_kv * s.shape.head_dim;
  s.k.resize(static_cast<size_t>(total) * row);
  s.v.resize(s.k.size());
  s.q.resize(static_cast<size_t>(n_q) * s.shape.n_head * s.shape.head_dim);
  for (auto* x : {&s.k, &s.v, &s.q})
    for (float& e : *x) e = d(rng) * 1.5f;
  const size_t bytes = kv_row_bytes(kv, s.shape.n_head_kv, s.shape.head_dim);
  s.ke.resize(static_cast<size_t>(total) * bytes);
  s.ve.resize(s.ke.size());
  for (int r = 0; r < total; ++r) {
    kv_encode_row(kv, s.k.data() + static_cast<size_t>(r) * row, s.shape.n_head_kv, s.shape.head_dim,
                  s.ke.data() + r * bytes);
    kv_encode_row(kv, s.v.data() + static_cast<size_t>(r) * row, s.shape.n_head_kv, s.shape.head_dim,
                  s.ve.data() + r * bytes);
  }
  for (int b = 0; b * kBlock < total; ++b) {
    if (std::find(evicted.begin(), evicted.end(), b) != evicted.end()) continue;
    const int pos = b * kBlock;
    s.runs.push_back(
        {s.ke.data() + pos * bytes, s.ve.data() + pos * bytes, pos, std::min(kBlock, total - pos)});
  }
  return s;
}

QueryBlock block_of(Seq& s, std::vector<float>& out) {
  const int n_q = static_cast<int>(s.q.size() / (s.shape.n_head * s.shape.head_dim));
  out.assign(s.q.size(), -7.0f);
  return QueryBlock{s.q.data(), out.data(), n_q, s.total - n_q, s.runs};
}

// Gaps anywhere: the first tile, across the 512-position split, a run of
// several blocks; decode (one query) and a prompt chunk (40 queries).
TEST(AttentionEvict, GapsMatchTheReferenceAtEveryLevel) {
  const std::vector<int> evicted = {1, 3, 4, 5, 31, 32, 33, 40};
  for (KvType kv : {KvType::F32, KvType::F16, KvType::Q8_0})
    for (int n_q : {1, 40})
      for (int window : {0, 300}) {
        Seq s = make_seq(kv, 700, n_q, evicted, window);
        std::vector<float> ref, full_out;
        QueryBlock rb = block_of(s, ref);
        attention_reference(s.shape, {&rb, 1});
        for (CpuLevel level : all_cpu_levels()) {
          const AttentionKernels* k = attention_kernels_at(level);
          if (!k) continue;
          for (int threads : {1, 3}) {
            std::vector<float> out;
            QueryBlock b = block_of(s, out);
            ThreadPool pool(threads);
            attention(s.shape, {&b, 1}, pool, k);
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_NEAR(out[i], ref[i], 1.6e-4f)
                  << kv_type_name(kv) << " n_q " << n_q << " window " << window << " "
                  << cpu_level_name(level) << " threads " << threads << " elem " << i;
          }
        }
        // The gaps matter: with every block present the output differs.
        Seq full = make_seq(kv, 700, n_q, {}, window);
        QueryBlock fb = block_of(full, full_out);
        ThreadPool pool(2);
        attention(full.shape, {&fb, 1}, pool);
        double diff = 0;
        for (size_t i = 0; i < ref.size(); ++i)
          diff = std::max(diff, std::abs(static_cast<double>(full_out[i] - ref[i])));
        EXPECT_GT(diff, 1e-2) << "evicted blocks were read";
      }
}

// Softmax weights in double: per row at a position >= from and per head,
// over the kept positions it may read.
std::vector<double> mass_reference(const Seq& s, int n_q, int32_t from) {
  const AttentionShape& sh = s.shape;
  const int group = sh.n_head / sh.n_head_kv, hd = sh.head_dim, row = sh.n_head_kv * hd;
  std::vector<double> mass(static_cast<size_t>(s.total), 0.0);
  std::vector<float> key(static_cast<size_t>(hd));
  const size_t bytes = kv_row_bytes(sh.kv_type, sh.n_head_kv, hd);
  (void)row;
  for (int t = 0; t < n_q; ++t) {
    const int32_t qpos = s.total - n_q + t;
    if (qpos < from) continue;
    for (int h = 0; h < sh.n_head; ++h) {
      std::vector<std::pair<int32_t, double>> w;
      for (const KvRun& r : s.runs)
        for (int j = 0; j < r.n; ++j) {
          const int32_t pos = r.pos0 + j;
          if (pos > qpos || (sh.sliding_window > 0 && pos <= qpos - sh.sliding_window)) continue;
          kv_decode_head(sh.kv_type,
                         static_cast<const char*>(r.k) + static_cast<size_t>(j) * bytes +
                             static_cast<size_t>(h / group) * kv_head_bytes(sh.kv_type, hd),
                         hd, key.data());
          double dot = 0;
          const float* q = s.q.data() + (static_cast<size_t>(t) * sh.n_head + h) * hd;
          for (int i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * key[static_cast<size_t>(i)];
          w.emplace_back(pos, dot * sh.scale);
        }
      double mx = -1e300, sum = 0;
      for (auto& [p, x] : w) mx = std::max(mx, x);
      for (auto& [p, x] : w) sum += (x = std::exp(x - mx));
      for (auto& [p, x] : w) mass[static_cast<size_t>(p)] += x / sum;
    }
  }
  return mass;
}

TEST(AttentionEvict, MassIsTheSoftmaxWeightsEachPositionReceives) {
  for (KvType kv : {KvType::F32, KvType::F16})
    for (int window : {0, 200})
      for (int32_t from : {0, 690}) {
        const int n_q = 24;
        Seq s = make_seq(kv, 700, n_q, {2, 9, 10}, window);
        std::vector<float> out;
        QueryBlock b = block_of(s, out);
        std::vector<uint64_t> mass(700, 5);  // added to, not overwritten
        attention_mass(s.shape, b, from, mass.data());
        const std::vector<double> want = mass_reference(s, n_q, from);
        double total = 0;
        for (size_t p = 0; p < mass.size(); ++p) {
          const double got = static_cast<double>(mass[p] - 5) / kMassOne;
          total += got;
          // Each of up to 24 x 8 weights is rounded to 2^-24; float scores.
          ASSERT_NEAR(got, want[p], 1e-5 + 1e-4 * want[p])
              << "position " << p << " from " << from << " window " << window;
          if (std::find_if(s.runs.begin(), s.runs.end(), [&](const KvRun& r) {
                return static_cast<int32_t>(p) >= r.pos0 && static_cast<int32_t>(p) < r.pos0 + r.n;
              }) == s.runs.end()) {
            EXPECT_EQ(mass[p], 5u) << "an evicted position received mass";
          }
        }
        const int rows = from == 0 ? n_q : 700 - static_cast<int>(from);
        EXPECT_NEAR(total, rows * 8.0, 1e-3) << "each row and head gives a weight of 1 in all";
      }
}

}  // namespace
}  // namespace tern::kernels
