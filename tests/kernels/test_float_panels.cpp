// Float weights (F32, F16, BF16) over rows long enough for the AVX-512 panel to
// run several K chunks and a partial last vector: every tile shape, and the
// driver at every token count, must give bit-identical results per (row, token)
// — decode (register tiles) and prompt (panel) included — within the budget of
// matmul_test_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ref/ops.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

constexpr GgmlType kFloatTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::F8_E4M3, GgmlType::F8_E5M2};
// 2 chunks + 476 elements (F32/F16: 512-element chunks; BF16 with vdpbf16ps: 1024), tail of 12 or 28.
constexpr int64_t kN = 1500;

std::string label(GgmlType t, CpuLevel l) {
  return std::string(quant::traits(t)->name) + "@" + cpu_level_name(l);
}

TEST(FloatPanels, EveryTileShapeIsBitIdenticalOverSeveralChunks) {
  for (GgmlType t : kFloatTypes) {
    for (CpuLevel level : testing::available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      // Arm's dotprod and i8mm levels add integer instructions only: float
      // weights run the Neon level's kernels there.
      if (!k && testing::adds_integer_instructions_only(level)) continue;
      ASSERT_NE(k, nullptr) << label(t, level);
      const testing::Problem p = testing::make_problem(t, kN, k->max_rows, k->max_cols, 11, /*pad_bytes=*/64);
      const size_t x_stride = act_row_bytes(*k, p.n) + 64;
      const std::vector<uint8_t> xq = testing::quantize_activations(*k, p, x_stride);
      const std::vector<float> want = testing::reference(p);
      const std::vector<double> bounds = testing::budgets(p, k->act_type);
      const size_t ldy = static_cast<size_t>(k->max_rows);
      std::vector<float> full(ldy * k->max_cols);
      k->tile(p.n, p.w.data(), p.w_stride, k->max_rows, xq.data(), x_stride, k->max_cols, full.data(), ldy);
      for (int c = 0; c < k->max_cols; ++c)
        for (int r = 0; r < k->max_rows; ++r)
          ASSERT_LE(std::fabs(double(full[c * ldy + r]) - want[c * p.n_rows + r]), bounds[c * p.n_rows + r])
              << label(t, level) << " r " << r << " c " << c;
      for (int nr = 1; nr <= k->max_rows; ++nr)
        for (int nc = 1; nc <= k->max_cols; ++nc)
          for (int r0 : {0, k->max_rows - nr})
            for (int c0 : {0, k->max_cols - nc}) {
              std::vector<float> y(ldy * nc);
              k->tile(p.n, p.w.data() + r0 * p.w_stride, p.w_stride, nr, xq.data() + c0 * x_stride, x_stride,
                      nc, y.data(), ldy);
              for (int c = 0; c < nc; ++c)
                for (int r = 0; r < nr; ++r)
                  ASSERT_EQ(y[c * ldy + r], full[(c0 + c) * ldy + r0 + r])
                      << label(t, level) << " tile " << nr << "x" << nc << " at (" << r0 << ", " << c0
                      << ") r " << r << " c " << c;
            }
    }
  }
}

// The driver at the best level: token t's outputs are the same bits whether it
// is computed alone (decode) or among 1..70 tokens (prompt).
TEST(FloatPanels, DriverOutputDoesNotDependOnTokenCount) {
  constexpr int64_t kRows = 53, kTokens = 70;
  for (GgmlType t : kFloatTypes) {
    const quant::TypeTraits* tr = quant::traits(t);
    const testing::Problem p = testing::make_problem(t, kN, kRows, kTokens, 5);
    const WeightView view{tr, p.w.data(), p.n_rows, p.n, p.w_stride};
    ThreadPool pool(2);
    std::vector<float> all(kTokens * kRows);
    matmul(view, p.x.data(), all.data(), kTokens, pool);
    for (int64_t n_tokens : {1, 2, 3, 5, 17, 33}) {
      for (int64_t t0 : {int64_t{0}, kTokens - n_tokens}) {
        std::vector<float> y(n_tokens * kRows);
        matmul(view, p.x.data() + t0 * p.n, y.data(), n_tokens, pool);
        for (int64_t c = 0; c < n_tokens; ++c)
          for (int64_t r = 0; r < kRows; ++r)
            ASSERT_EQ(y[c * kRows + r], all[(t0 + c) * kRows + r])
                << tr->name << " tokens " << n_tokens << " from " << t0 << " r " << r << " c " << c;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
