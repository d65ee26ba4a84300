// Every kernel table row at every level this CPU runs, against the scalar
// reference: all tile shapes 1..max_rows x 1..max_cols, several lengths
// (one block, group remainders, long rows), padded strides. Error budgets:
// matmul_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/pack.h"
#include "kernels/ref/ops.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;
using testing::available_levels;
using testing::make_problem;
using testing::Problem;

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                               GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                               GgmlType::MXFP4, GgmlType::F8_E4M3, GgmlType::F8_E5M2, GgmlType::Q8_0_S24};

// Row lengths to try: one block, every remainder of a 4-block group, and longer rows.
std::vector<int64_t> lengths(GgmlType t) {
  const int64_t b = quant::traits(t)->block_elems;
  if (b == 1) return {1, 7, 16, 31, 33, 64, 100, 257, 1024};
  if (b == 32) return {32, 64, 96, 128, 160, 224, 288, 1024};
  return {256, 512, 768, 1024, 2048};
}

std::string label(GgmlType t, CpuLevel l) {
  return std::string(quant::traits(t)->name) + "@" + cpu_level_name(l);
}

// Runs one tile of every shape on problem p with kernels k; raises *worst to the worst error / budget.
void check_all_shapes(const MatmulKernels& k, const Problem& p, const std::string& what, double* worst) {
  const size_t x_stride = act_row_bytes(k, p.n) + 48;  // padded: the tile must use the stride
  const std::vector<uint8_t> xq = testing::quantize_activations(k, p, x_stride);
  const std::vector<float> want = testing::reference(p);
  const std::vector<double> bounds = testing::budgets(p, k.act_type);
  for (int nr = 1; nr <= k.max_rows; ++nr)
    for (int nc = 1; nc <= k.max_cols; ++nc) {
      const size_t ldy = static_cast<size_t>(nr) + 3;
      std::vector<float> y(ldy * nc, NAN);
      k.tile(p.n, p.w.data(), p.w_stride, nr, xq.data(), x_stride, nc, y.data(), ldy);
      for (int c = 0; c < nc; ++c) {
        for (int r = 0; r < nr; ++r) {
          const double err = std::fabs(double(y[c * ldy + r]) - want[c * p.n_rows + r]);
          const double b = bounds[c * p.n_rows + r];
          *worst = std::max(*worst, b > 0 ? err / b : (err > 0 ? INFINITY : 0.0));
          ASSERT_LE(err, b) << what << " n=" << p.n << " tile " << nr << "x" << nc << " r=" << r << " c=" << c
                            << " got " << y[c * ldy + r] << " want " << want[c * p.n_rows + r];
        }
        for (size_t r = nr; r < ldy; ++r) ASSERT_TRUE(std::isnan(y[c * ldy + r])) << what << ": wrote past n_rows";
      }
    }
}

TEST(MatmulKernels, EveryTypeAndLevelMatchesScalarWithinBudget) {
  for (GgmlType t : kTypes) {
    for (CpuLevel level : available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      if (level == CpuLevel::Scalar) {
        ASSERT_NE(k, nullptr) << label(t, level);
      }
      if (!k) continue;
      EXPECT_EQ(k->level, level);
      double worst = 0.0;
      uint32_t seed = 1;
      for (int64_t n : lengths(t)) {
        ++seed;
        const Problem p = make_problem(t, n, k->max_rows, k->max_cols, seed, /*pad_bytes=*/seed % 2 ? 0 : 40);
        check_all_shapes(*k, p, label(t, level), &worst);
        if (HasFatalFailure()) return;
      }
      std::printf("  %-14s act %-5s tile %dx%d  worst err/budget %.3f\n", label(t, level).c_str(),
                  std::string(gguf::type_name(k->act_type)).c_str(), k->max_rows, k->max_cols, worst);
    }
  }
}

// Batch invariance at the kernel level: output (r, c) is bit-identical whatever
// tile shape it was computed in (and so whatever the batch size), as the
// engine's invariance tests require of the whole forward pass.
TEST(MatmulKernels, ResultsDoNotDependOnTileShape) {
  for (GgmlType t : kTypes) {
    for (CpuLevel level : available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      if (!k) continue;
      const int64_t n = quant::traits(t)->block_elems == 1 ? 100 : 512;
      const Problem p = make_problem(t, n, k->max_rows, k->max_cols, 7);
      const size_t x_stride = act_row_bytes(*k, p.n);
      const std::vector<uint8_t> xq = testing::quantize_activations(*k, p, x_stride);
      const size_t ldy = static_cast<size_t>(k->max_rows);
      std::vector<float> full(ldy * k->max_cols);
      k->tile(p.n, p.w.data(), p.w_stride, k->max_rows, xq.data(), x_stride, k->max_cols, full.data(), ldy);
      for (int nr = 1; nr <= k->max_rows; ++nr)
        for (int nc = 1; nc <= k->max_cols; ++nc)
          for (int r0 : {0, k->max_rows - nr})
            for (int c0 : {0, k->max_cols - nc}) {
              std::vector<float> y(ldy * nc);
              k->tile(p.n, p.w.data() + r0 * p.w_stride, p.w_stride, nr, xq.data() + c0 * x_stride, x_stride, nc,
                      y.data(), ldy);
              for (int c = 0; c < nc; ++c)
                for (int r = 0; r < nr; ++r)
                  ASSERT_EQ(y[c * ldy + r], full[(c0 + c) * ldy + r0 + r])
                      << label(t, level) << " tile " << nr << "x" << nc << " at (" << r0 << ", " << c0 << ") r " << r
                      << " c " << c;
            }
    }
  }
}

// Every level's packed panels (kernels/pack.h) against the same kernel on the
// rows in place: bit-identical for every row count of a panel and column
// count, at every level this CPU runs (the driver test covers the best level only).
TEST(MatmulKernels, PackedPanelsEqualRowsInPlaceAtEveryLevel) {
  int checked = 0;
  for (GgmlType t : kTypes) {
    for (CpuLevel level : available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      if (!k || !k->packed_tile) continue;
      const quant::TypeTraits* tr = quant::traits(t);
      const int64_t n = tr->block_elems == 256 ? 512 : tr->block_elems == 1 ? 96 : 160;
      const Problem p = make_problem(t, n, 32, 9, 11, 8);
      const WeightView view{tr, p.w.data(), p.n_rows, p.n, p.w_stride};
      const size_t bytes = packed_bytes(*k, view);
      if (bytes == 0) continue;
      ++checked;
      std::vector<uint8_t> packed(bytes + 64);
      uint8_t* aligned = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
      pack_weights(*k, view, aligned);
      const size_t x_stride = act_row_bytes(*k, p.n);
      const std::vector<uint8_t> xq = testing::quantize_activations(*k, p, x_stride);
      for (int nr : {1, 7, 8, 9, 17, 31, 32})
        for (int nc : {1, 2, 3, 4, 5, 9}) {
          const size_t ldy = 32;
          std::vector<float> a(ldy * nc, NAN), b(ldy * nc, NAN);
          k->tile(p.n, p.w.data(), p.w_stride, nr, xq.data(), x_stride, nc, a.data(), ldy);
          k->packed_tile(p.n, aligned, nr, xq.data(), x_stride, nc, b.data(), ldy);
          for (size_t e = 0; e < a.size(); ++e)
            ASSERT_EQ(std::bit_cast<uint32_t>(a[e]), std::bit_cast<uint32_t>(b[e]))
                << label(t, level) << " rows " << nr << " cols " << nc << " elem " << e;
        }
    }
  }
  if (best_cpu_level() == CpuLevel::Avx512 || best_cpu_level() == CpuLevel::Avx2) {
    EXPECT_GT(checked, 0);
  }
}

// Arm's three levels differ only in the instructions that form exact integer
// block sums (kernels/arm/arm_impl.h): their outputs are bit-identical, for
// every shape. (Skipped where the CPU has fewer than two of them.)
TEST(MatmulKernels, ArmLevelsAgreeBitForBit) {
  int compared = 0;
  for (GgmlType t : kTypes) {
    const MatmulKernels* base = matmul_kernels_at(t, CpuLevel::Neon);
    if (!base) continue;
    for (CpuLevel level : {CpuLevel::NeonDot, CpuLevel::NeonI8mm}) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      if (!k) continue;
      ASSERT_EQ(k->act_type, base->act_type) << label(t, level);
      for (int64_t n : lengths(t)) {
        const Problem p = make_problem(t, n, k->max_rows, k->max_cols, static_cast<uint32_t>(n));
        const size_t x_stride = act_row_bytes(*k, p.n);
        const std::vector<uint8_t> xq = testing::quantize_activations(*k, p, x_stride);
        for (int nr = 1; nr <= k->max_rows; ++nr)
          for (int nc = 1; nc <= k->max_cols; ++nc) {
            const size_t ldy = static_cast<size_t>(nr);
            std::vector<float> a(ldy * nc), b(ldy * nc);
            base->tile(p.n, p.w.data(), p.w_stride, nr, xq.data(), x_stride, nc, a.data(), ldy);
            k->tile(p.n, p.w.data(), p.w_stride, nr, xq.data(), x_stride, nc, b.data(), ldy);
            for (size_t i = 0; i < a.size(); ++i)
              ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
                  << label(t, level) << " vs neon, n " << n << " tile " << nr << "x" << nc << " elem " << i;
          }
      }
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "fewer than two Arm kernel levels on this CPU";
}

// Large-magnitude and all-zero rows: the integer paths must not overflow or
// produce NaN (Q8_0 x Q8_0 at full scale is the worst case for vpdpbusd sums).
TEST(MatmulKernels, ExtremeValuesStayFinite) {
  for (GgmlType t : kTypes) {
    for (CpuLevel level : available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      if (!k) continue;
      const int64_t n = quant::traits(t)->block_elems == 1 ? 64 : 1024;
      Problem p = make_problem(t, n, k->max_rows, k->max_cols, 99);
      // Every activation at +-full scale, same sign as the weights: the largest possible integer dot.
      for (int64_t c = 0; c < p.n_cols; ++c)
        for (int64_t j = 0; j < n; ++j) p.x[c * n + j] = (p.w_f32[j] >= 0 ? 1.0f : -1.0f) * (c == 0 ? 1000.0f : 0.0f);
      double worst = 0.0;
      check_all_shapes(*k, p, label(t, level) + " extreme", &worst);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace tern::kernels

namespace tern::kernels {
namespace {

// IQ4_XS's fast kernel sums integers exactly: against the exact dot product of the stored codes
// with the Q8_K activations it was given (not with the f32 x, as the budgets above), it may differ
// only by the f32 rounding of a few products and sums per super-block — a scale taken from the
// wrong sub-block or a missed +128 correction is off by far more.
TEST(MatmulKernels, Iq4XsIsExactOnTheQuantizedActivations) {
  const quant::TypeTraits* w_tr = quant::traits(GgmlType::IQ4_XS);
  for (CpuLevel level : available_levels()) {
    const MatmulKernels* k = matmul_kernels_at(GgmlType::IQ4_XS, level);
    if (!k || k->act_type != GgmlType::Q8_K) continue;
    SCOPED_TRACE(cpu_level_name(level));
    for (int64_t n : {256, 1024, 4096}) {
      const int rows = std::min(3, k->max_rows), cols = std::min(2, k->max_cols);
      const Problem p = make_problem(GgmlType::IQ4_XS, n, rows, cols, static_cast<uint32_t>(n));
      const size_t x_stride = act_row_bytes(*k, n);
      const std::vector<uint8_t> xq = testing::quantize_activations(*k, p, x_stride);
      std::vector<float> y(static_cast<size_t>(rows * cols));
      k->tile(n, p.w.data(), p.w_stride, rows, xq.data(), x_stride, cols, y.data(), static_cast<size_t>(rows));
      std::vector<float> xd(static_cast<size_t>(n)), wd(static_cast<size_t>(n));
      for (int c = 0; c < cols; ++c) {
        quant::traits(GgmlType::Q8_K)->to_float(xq.data() + c * x_stride, xd.data(), n);
        for (int r = 0; r < rows; ++r) {
          w_tr->to_float(p.w.data() + r * p.w_stride, wd.data(), n);
          double want = 0.0, mag = 0.0;
          for (int64_t i = 0; i < n; ++i) {
            want += static_cast<double>(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)];
            mag += std::fabs(static_cast<double>(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)]);
          }
          EXPECT_NEAR(y[static_cast<size_t>(c * rows + r)], want, 2e-6 * mag + 1e-30) << "n=" << n << " r=" << r << " c=" << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels

namespace tern::kernels {
namespace {

// Every finite FP8 code decodes exactly at every level: row r holds code r at
// element 5 of 16 (the rest 0), one column of x is 1 there, so each output is
// the code's value, which the SIMD kernels rebuild through half bits.
TEST(MatmulKernels, EveryFiniteFp8CodeDecodesExactly) {
  for (GgmlType t : {GgmlType::F8_E4M3, GgmlType::F8_E5M2}) {
    const quant::TypeTraits* tr = quant::traits(t);
    std::vector<uint8_t> codes;
    for (int c = 0; c < 256; ++c) {
      float v = 0;
      tr->to_float(&c, &v, 1);  // little-endian: the int's first byte is c
      if (std::isfinite(v)) codes.push_back(static_cast<uint8_t>(c));
    }
    ASSERT_EQ(codes.size(), t == GgmlType::F8_E4M3 ? 254u : 248u);
    for (CpuLevel level : available_levels()) {
      const MatmulKernels* k = matmul_kernels_at(t, level);
      // Arm's dotprod and i8mm levels add integer instructions only: float
      // weights run the Neon level's kernels there.
      if (!k && testing::adds_integer_instructions_only(level)) continue;
      ASSERT_NE(k, nullptr);
      constexpr int64_t n = 16;
      std::vector<float> x(n, 0.0f);
      x[5] = 1.0f;
      std::vector<uint8_t> xq(act_row_bytes(*k, n));
      k->quantize_act(x.data(), xq.data(), n);
      for (size_t r0 = 0; r0 < codes.size(); r0 += static_cast<size_t>(k->max_rows)) {
        const int rows = static_cast<int>(std::min<size_t>(static_cast<size_t>(k->max_rows), codes.size() - r0));
        std::vector<uint8_t> w(static_cast<size_t>(rows) * n, 0);
        for (int r = 0; r < rows; ++r) w[static_cast<size_t>(r) * n + 5] = codes[r0 + static_cast<size_t>(r)];
        std::vector<float> y(static_cast<size_t>(rows), NAN);
        k->tile(n, w.data(), n, rows, xq.data(), xq.size(), 1, y.data(), static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r) {
          float want = 0;
          tr->to_float(&codes[r0 + static_cast<size_t>(r)], &want, 1);
          ASSERT_EQ(y[static_cast<size_t>(r)], want) << label(t, level) << " code " << int(codes[r0 + static_cast<size_t>(r)]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
