// Q8_0_S24, the 2:4-sparse Q8_0 type (quant/blocks.h, kernels/sparse24.h):
// a row pruned 2:4 encodes to exactly the values Q8_0 gives it, and every
// level's kernels -- through the driver, packed or in place, any token and
// thread count -- compute bit-identical results to the Q8_0 matrix of the
// same zero-filled rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/pack.h"
#include "kernels/ref/ops.h"
#include "kernels/sparse24.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

// Rows of n f32 weights pruned 2:4 (random positions; some groups keep a zero).
std::vector<float> pruned_rows(int64_t n_rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n_rows * n));
  for (size_t g = 0; g < w.size(); g += 4) {
    const int a = static_cast<int>(rng() % 4), b = (a + 1 + static_cast<int>(rng() % 3)) % 4;
    for (int j = 0; j < 4; ++j) w[g + j] = j == a || j == b ? normal(rng) * (g % 96 == 0 ? 8.0f : 1.0f) : 0.0f;
    if (g % 52 == 0) w[g + a] = 0.0f;  // a group with one weight left
  }
  return w;
}

std::vector<uint8_t> encode(GgmlType t, const std::vector<float>& w, int64_t n_rows, int64_t n) {
  const quant::TypeTraits* tr = quant::traits(t);
  const size_t row = quant::row_bytes(*tr, n);
  std::vector<uint8_t> out(row * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) tr->from_float(&w[r * n], out.data() + r * row, n);
  return out;
}

TEST(Sparse24, EncodesPrunedRowsToQ8_0sValuesIn22Bytes) {
  const int64_t n = 256, rows = 8;
  const std::vector<float> w = pruned_rows(rows, n, 1);
  const std::vector<uint8_t> s = encode(GgmlType::Q8_0_S24, w, rows, n), q = encode(GgmlType::Q8_0, w, rows, n);
  EXPECT_EQ(s.size(), static_cast<size_t>(rows * n / 32 * 22));
  std::vector<float> a(n), b(n), x(n);
  for (int64_t j = 0; j < n; ++j) x[j] = std::sin(0.37f * j);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* sr = s.data() + r * (n / 32 * 22);
    const uint8_t* qr = q.data() + r * (n / 32 * 34);
    quant::traits(GgmlType::Q8_0_S24)->to_float(sr, a.data(), n);
    quant::traits(GgmlType::Q8_0)->to_float(qr, b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "row " << r;
    EXPECT_EQ(quant::traits(GgmlType::Q8_0_S24)->vec_dot(sr, x.data(), n),
              quant::traits(GgmlType::Q8_0)->vec_dot(qr, x.data(), n));
    // Exactly 2 positions in every nibble of every mask.
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const auto* bl = reinterpret_cast<const quant::BlockQ8_0S24*>(sr) + blk;
      for (int byte = 0; byte < 4; ++byte) {
        EXPECT_EQ(__builtin_popcount(bl->mask[byte] & 0xf), 2);
        EXPECT_EQ(__builtin_popcount(bl->mask[byte] >> 4), 2);
      }
    }
  }
}

TEST(Sparse24, DenseRowsKeepTheTwoLargestOfEveryFour) {
  std::vector<float> w(32);
  for (int j = 0; j < 32; ++j) w[j] = static_cast<float>((j * 7) % 11) - 5.0f;  // ties and signs
  std::vector<uint8_t> s(22);
  quant::traits(GgmlType::Q8_0_S24)->from_float(w.data(), s.data(), 32);
  std::vector<float> back(32);
  quant::traits(GgmlType::Q8_0_S24)->to_float(s.data(), back.data(), 32);
  for (int g = 0; g < 32; g += 4) {
    // The kept two are the largest magnitudes; of equal ones, the lower column.
    std::vector<int> order = {g, g + 1, g + 2, g + 3};
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return std::fabs(w[a]) > std::fabs(w[b]); });
    for (int i = 0; i < 4; ++i) {
      const int j = order[i];
      if (i >= 2) {
        EXPECT_EQ(back[j], 0.0f) << j;
      } else if (w[j] != 0.0f) {
        EXPECT_NE(back[j], 0.0f) << j;
      }
    }
  }
}

// The packed layout of kernels/sparse24.h, element by element, on one panel.
TEST(Sparse24, PackedBlockHoldsEachGroupsMaskAndValuesByRow) {
  const int64_t n = 64;
  const std::vector<float> w = pruned_rows(32, n, 2);
  const std::vector<uint8_t> s = encode(GgmlType::Q8_0_S24, w, 32, n);
  const uint8_t* rows[32];
  for (int r = 0; r < 32; ++r) rows[r] = s.data() + r * (n / 32 * 22);
  std::vector<uint8_t> blk(kS24PackedBlock);
  pack_s24_block(rows, 1, blk.data());
  for (int r = 0; r < 32; ++r) {
    const auto* b = reinterpret_cast<const quant::BlockQ8_0S24*>(rows[r]) + 1;
    EXPECT_EQ(std::memcmp(blk.data() + 2 * r, &b->d, 2), 0);
    const int h = r / 16, lane = r % 16;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* g = blk.data() + 64 + (h * 8 + k) * 40;
      uint64_t m;
      std::memcpy(&m, g, 8);
      EXPECT_EQ((m >> (4 * lane)) & 0xf, (b->mask[k / 2] >> (4 * (k % 2))) & 0xfu) << r << " " << k;
      EXPECT_EQ(static_cast<int8_t>(g[8 + 2 * lane] ^ 0x80), b->qs[2 * k]);  // stored + 128
      EXPECT_EQ(static_cast<int8_t>(g[8 + 2 * lane + 1] ^ 0x80), b->qs[2 * k + 1]);
    }
  }
}

// Every level's tiles: S24 (packed -- the sparse layout, or the rows expanded to
// Q8_0 where a level has no sparse kernel -- and in place) == Q8_0 of the same rows, bit for bit.
TEST(Sparse24, EveryLevelEqualsQ8_0OnTheSameZeroFilledRows) {
  const int64_t n = 320;
  int levels = 0;
  for (CpuLevel level : testing::available_levels()) {
    const MatmulKernels* ks = matmul_kernels_at(GgmlType::Q8_0_S24, level);
    const MatmulKernels* kq = matmul_kernels_at(GgmlType::Q8_0, level);
    ASSERT_NE(ks, nullptr) << cpu_level_name(level);
    ASSERT_NE(kq, nullptr) << cpu_level_name(level);
    ++levels;
    for (int64_t n_rows : {1, 31, 32, 77}) {
      const std::vector<float> w = pruned_rows(n_rows, n, static_cast<uint32_t>(n_rows));
      const std::vector<uint8_t> s = encode(GgmlType::Q8_0_S24, w, n_rows, n), q = encode(GgmlType::Q8_0, w, n_rows, n);
      for (int64_t tokens : {1, 3, 8, 40}) {
        std::vector<float> x(static_cast<size_t>(tokens * n));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i)) * (i % 17 == 0 ? 9.0f : 1.0f);
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          const int64_t sr = n / 32 * 22, qr = n / 32 * 34;
          std::vector<float> ys(static_cast<size_t>(tokens * n_rows)), yq(ys.size()), yp(ys.size());
          // Each level's own tiles, through a driver at that level: compare the tables directly.
          const WeightView view{quant::traits(GgmlType::Q8_0_S24), s.data(), n_rows, n, static_cast<size_t>(sr)};
          auto run = [&](const MatmulKernels& k, const uint8_t* wbytes, size_t stride, const void* packed, float* y) {
            const size_t xs = act_row_bytes(k, n);
            std::vector<uint8_t> xq(xs * tokens);
            for (int64_t t = 0; t < tokens; ++t) k.quantize_act(&x[t * n], xq.data() + t * xs, n);
            for (int64_t r0 = 0; r0 < n_rows; r0 += k.max_rows) {
              const int nr = static_cast<int>(std::min<int64_t>(k.max_rows, n_rows - r0));
              for (int64_t c0 = 0; c0 < tokens; c0 += k.max_cols) {
                const int nc = static_cast<int>(std::min<int64_t>(k.max_cols, tokens - c0));
                std::vector<float> tile(static_cast<size_t>(nr) * nc);
                if (packed)
                  k.packed_tile(n, static_cast<const uint8_t*>(packed) + (r0 / 32) * packed_panel_bytes(k, view), nr,
                                xq.data() + c0 * xs, xs, nc, tile.data(), nr);
                else
                  k.tile(n, wbytes + r0 * stride, stride, nr, xq.data() + c0 * xs, xs, nc, tile.data(), nr);
                for (int c = 0; c < nc; ++c)
                  for (int r = 0; r < nr; ++r) y[(c0 + c) * n_rows + r0 + r] = tile[c * nr + r];
              }
            }
          };
          run(*ks, s.data(), sr, nullptr, ys.data());
          run(*kq, q.data(), qr, nullptr, yq.data());
          ASSERT_EQ(std::memcmp(ys.data(), yq.data(), ys.size() * sizeof(float)), 0)
              << cpu_level_name(level) << " rows " << n_rows << " tokens " << tokens;
          if (ks->packed_tile && ks->max_rows == 32 && packed_bytes(*ks, view) > 0) {
            std::vector<uint8_t> buf(packed_bytes(*ks, view) + 64);
            uint8_t* aligned = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
            pack_weights(*ks, view, aligned, &pool);
            run(*ks, nullptr, 0, aligned, yp.data());
            ASSERT_EQ(std::memcmp(yp.data(), yq.data(), yp.size() * sizeof(float)), 0)
                << cpu_level_name(level) << " packed, rows " << n_rows << " tokens " << tokens;
          }
        }
      }
    }
  }
  EXPECT_GE(levels, 1);
}

}  // namespace
}  // namespace tern::kernels
