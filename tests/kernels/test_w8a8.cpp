// W8A8 kernels (kernels/w8a8.h): the activation quantizer's bytes at every
// level against the scalar one and against the definition; every level's
// tile, in place and packed, and kernels::matmul with row scales, against an
// int64 dot product of the quants computed here (bit for bit: the sum is
// exact and the two multiplies are in the stated order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/pack.h"
#include "kernels/ref/ops.h"
#include "kernels/w8a8.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

struct Case {
  int64_t n, n_rows, n_tokens;
  std::vector<int8_t> w;       // [n_rows][n]
  std::vector<float> scale;    // [n_rows]
  std::vector<float> x;        // [n_tokens][n]
};

Case make_case(int64_t n, int64_t n_rows, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-127, 127);
  std::normal_distribution<float> g(0.0f, 1.0f);
  Case c{n, n_rows, n_tokens, {}, {}, {}};
  c.w.resize(static_cast<size_t>(n * n_rows));
  for (auto& v : c.w) v = static_cast<int8_t>(q(rng));
  c.w[0] = -128;  // tern never writes it, another tool's file may: exact at every level too
  for (int64_t r = 0; r < n_rows; ++r) c.scale.push_back(0.001f + 0.01f * std::fabs(g(rng)));
  c.x.resize(static_cast<size_t>(n * n_tokens));
  for (auto& v : c.x) v = g(rng);
  // Outlier channels, the case SmoothQuant is for; and values exactly half way between two steps.
  for (int64_t t = 0; t < n_tokens; ++t) {
    c.x[static_cast<size_t>(t * n)] *= 40.0f;
    if (n > 2) c.x[static_cast<size_t>(t * n + 2)] = 0.0f;
  }
  return c;
}

// The definition: dx = max|x| / 127, q = round-half-even(x / dx).
std::vector<int> define_q(const float* x, int64_t n, float& d) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  std::vector<int> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i)] = static_cast<int>(std::nearbyint(x[i] * id));
  return q;
}

std::vector<float> expected(const Case& c, bool with_scale) {
  std::vector<float> y(static_cast<size_t>(c.n_rows * c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    float d = 0;
    const std::vector<int> q = define_q(&c.x[static_cast<size_t>(t * c.n)], c.n, d);
    for (int64_t r = 0; r < c.n_rows; ++r) {
      int64_t acc = 0;
      for (int64_t i = 0; i < c.n; ++i) acc += static_cast<int64_t>(q[static_cast<size_t>(i)]) * c.w[static_cast<size_t>(r * c.n + i)];
      float v = static_cast<float>(static_cast<int32_t>(acc)) * d;
      if (with_scale) v *= c.scale[static_cast<size_t>(r)];
      y[static_cast<size_t>(t * c.n_rows + r)] = v;
    }
  }
  return y;
}

std::vector<const MatmulKernels*> levels() {
  std::vector<const MatmulKernels*> out;
  for (CpuLevel l : all_cpu_levels())
    if (const MatmulKernels* k = matmul_kernels_at(GgmlType::I8, l); k && k->level == l) out.push_back(k);
  return out;
}

TEST(W8a8, ActivationBytesFollowTheDefinitionAtEveryLevel) {
  for (int64_t n : {1, 15, 16, 17, 64, 100, 172, 1000}) {
    Case c = make_case(n, 1, 3, static_cast<uint32_t>(n));
    if (n >= 4) {  // d = 1 exactly; half-way values round to even
      c.x[0] = 127.0f;
      c.x[1] = 2.5f;
      c.x[2] = 3.5f;
      c.x[3] = -2.5f;
    }
    for (const MatmulKernels* k : levels()) {
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        const float* x = &c.x[static_cast<size_t>(t * n)];
        std::vector<uint8_t> row(w8_act_row_bytes(n), 0xee);
        ASSERT_EQ(act_row_bytes(*k, n), row.size());
        k->quantize_act(x, row.data(), n);
        float d = 0, got_d = 0;
        const std::vector<int> q = define_q(x, n, d);
        std::memcpy(&got_d, row.data(), 4);
        EXPECT_EQ(got_d, d) << "n " << n << " level " << static_cast<int>(k->level);
        for (size_t b = 4; b < kW8ActHeader; ++b) EXPECT_EQ(row[b], 0);
        for (int64_t i = 0; i < w8_padded(n); ++i) {
          const int want = i < n ? q[static_cast<size_t>(i)] + 128 : 128;
          ASSERT_EQ(row[kW8ActHeader + static_cast<size_t>(i)], want) << "n " << n << " i " << i;
        }
        if (n >= 4 && t == 0) {
          EXPECT_EQ(static_cast<int>(row[kW8ActHeader + 1]) - 128, 2);
          EXPECT_EQ(static_cast<int>(row[kW8ActHeader + 2]) - 128, 4);
          EXPECT_EQ(static_cast<int>(row[kW8ActHeader + 3]) - 128, -2);
        }
      }
    }
  }
}

TEST(W8a8, ZeroAndNonFiniteActivationsStayDefined) {
  for (const MatmulKernels* k : levels()) {
    std::vector<float> x(40, 0.0f);
    std::vector<uint8_t> row(w8_act_row_bytes(40));
    k->quantize_act(x.data(), row.data(), 40);
    for (int i = 0; i < 40; ++i) EXPECT_EQ(row[kW8ActHeader + i], 128);
    x[3] = NAN;
    x[5] = 2.0f;
    k->quantize_act(x.data(), row.data(), 40);
    float d;
    std::memcpy(&d, row.data(), 4);
    EXPECT_EQ(d, 2.0f / 127.0f);
    EXPECT_EQ(row[kW8ActHeader + 5], 255);
    EXPECT_EQ(row[kW8ActHeader + 3], 1);  // NaN clamps to -127 at every level
  }
}

// The case's tokens as k's activation rows (row stride xs).
std::vector<uint8_t> act_rows(const MatmulKernels& k, const Case& c, size_t xs) {
  std::vector<uint8_t> xq(xs * static_cast<size_t>(c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) k.quantize_act(&c.x[static_cast<size_t>(t * c.n)], xq.data() + t * xs, c.n);
  return xq;
}

// y [n_tokens][n_rows] from k's in-place tiles over the whole matrix.
std::vector<float> tiles_in_place(const MatmulKernels& k, const Case& c, const std::vector<uint8_t>& xq, size_t xs) {
  const int64_t n = c.n, n_rows = c.n_rows, n_tokens = c.n_tokens;
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens), NAN);
  for (int64_t r0 = 0; r0 < n_rows; r0 += k.max_rows)
    for (int64_t c0 = 0; c0 < n_tokens; c0 += k.max_cols)
      k.tile(n, c.w.data() + r0 * n, static_cast<size_t>(n), static_cast<int>(std::min<int64_t>(k.max_rows, n_rows - r0)),
             xq.data() + c0 * xs, xs, static_cast<int>(std::min<int64_t>(k.max_cols, n_tokens - c0)), y.data() + c0 * n_rows + r0,
             static_cast<size_t>(n_rows));
  return y;
}

TEST(W8a8, TilesInPlaceAndPackedEqualTheExactSumAtEveryLevel) {
  for (int64_t n : {1, 63, 64, 65, 172, 256, 700}) {
    for (int64_t n_rows : {1, 5, 32, 33, 70}) {
      const int64_t n_tokens = 14;  // more than a 12-column tile
      const Case c = make_case(n, n_rows, n_tokens, static_cast<uint32_t>(n * 131 + n_rows));
      const std::vector<float> want = expected(c, false);
      for (const MatmulKernels* k : levels()) {
        const size_t xs = act_row_bytes(*k, n);
        const std::vector<uint8_t> xq = act_rows(*k, c, xs);
        std::vector<float> y = tiles_in_place(*k, c, xq, xs);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], want[i]) << "in place: n " << n << " rows " << n_rows << " level " << static_cast<int>(k->level);
        if (!k->packed_tile) continue;
        WeightView w{quant::traits(GgmlType::I8), c.w.data(), n_rows, n, static_cast<size_t>(n)};
        w.row_scale = c.scale.data();
        const size_t bytes = packed_bytes(*k, w);
        ASSERT_EQ(bytes, static_cast<size_t>((n_rows + 31) / 32) * w8_panel_bytes(n));
        auto* buf = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
        pack_weights(*k, w, buf);
        std::fill(y.begin(), y.end(), NAN);
        for (int64_t r0 = 0; r0 < n_rows; r0 += 32)
          for (int64_t c0 = 0; c0 < n_tokens; c0 += k->max_cols)
            k->packed_tile(n, buf + (r0 / 32) * w8_panel_bytes(n), static_cast<int>(std::min<int64_t>(32, n_rows - r0)),
                           xq.data() + c0 * xs, xs, static_cast<int>(std::min<int64_t>(k->max_cols, n_tokens - c0)),
                           y.data() + c0 * n_rows + r0, static_cast<size_t>(n_rows));
        std::free(buf);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "packed: n " << n << " rows " << n_rows;
      }
    }
  }
}

// The largest products every level must sum without saturating (AVX2 pairs
// |w| <= 128 with |x| <= 127 in vpmaddubsw): weights of -128 and 127 against
// activations of +-127, alone and mixed.
TEST(W8a8, ExtremeCodesSumExactlyAtEveryLevel) {
  const int64_t n = 200, n_rows = 4, n_tokens = 3;
  Case c{n, n_rows, n_tokens, std::vector<int8_t>(static_cast<size_t>(n * n_rows)), std::vector<float>(n_rows, 1.0f),
         std::vector<float>(static_cast<size_t>(n * n_tokens))};
  for (int64_t i = 0; i < n; ++i) {
    c.w[static_cast<size_t>(i)] = -128;
    c.w[static_cast<size_t>(n + i)] = 127;
    c.w[static_cast<size_t>(2 * n + i)] = static_cast<int8_t>(i % 2 ? 127 : -128);
    c.w[static_cast<size_t>(3 * n + i)] = static_cast<int8_t>(i % 3 ? -128 : 127);
    c.x[static_cast<size_t>(i)] = 1.0f;                  // q = 127 everywhere
    c.x[static_cast<size_t>(n + i)] = -1.0f;             // q = -127
    c.x[static_cast<size_t>(2 * n + i)] = i % 2 ? -1.0f : 1.0f;
  }
  const std::vector<float> want = expected(c, false);
  for (const MatmulKernels* k : levels()) {
    const size_t xs = act_row_bytes(*k, n);
    const std::vector<float> y = tiles_in_place(*k, c, act_rows(*k, c, xs), xs);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], want[i]) << "output " << i << " level " << static_cast<int>(k->level);
  }
  EXPECT_EQ(want[0], -128.0f * 127 * n / 127.0f);  // token 0, row 0: dx = 1/127
}

TEST(W8a8, MatmulAppliesRowScalesPackedOrNotWhateverTheThreadsAndBatch) {
  const Case c = make_case(300, 77, 19, 7);
  const std::vector<float> want = expected(c, true);
  const MatmulKernels* k = matmul_kernels(GgmlType::I8);
  ASSERT_NE(k, nullptr);
  WeightView w{quant::traits(GgmlType::I8), c.w.data(), c.n_rows, c.n, static_cast<size_t>(c.n)};
  w.row_scale = c.scale.data();
  void* buf = nullptr;
  if (const size_t bytes = packed_bytes(*k, w)) {
    buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    pack_weights(*k, w, buf);
  }
  for (bool packed : {false, true}) {
    if (packed && !buf) continue;
    w.packed = packed ? buf : nullptr;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t n_tokens : {int64_t{1}, int64_t{19}}) {
        std::vector<float> y(static_cast<size_t>(c.n_rows * n_tokens), NAN);
        matmul(w, c.x.data(), y.data(), n_tokens, pool);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "packed " << packed << " threads " << threads;
      }
    }
  }
  std::free(buf);
}

}  // namespace
}  // namespace tern::kernels
