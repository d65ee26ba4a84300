// kernels::matmul (the tiled driver at the best level this CPU runs) against
// the scalar reference within the kernels' error budget: every type, thread
// counts 1..3, token counts that leave partial row and column tiles.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/pack.h"
#include "kernels/ref/ops.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

TEST(MatmulDriver, MatchesReferenceForEveryTypeThreadCountAndTokenCount) {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::MXFP4,
                            GgmlType::F8_E4M3, GgmlType::F8_E5M2, GgmlType::Q8_0_S24};
  for (GgmlType t : types) {
    const quant::TypeTraits* tr = quant::traits(t);
    const MatmulKernels* k = matmul_kernels(t);
    ASSERT_NE(k, nullptr);
    const int64_t n = tr->block_elems == 256 ? 512 : 96;
    for (int64_t n_tokens : {1, 3, 17, 64}) {
      // 37 rows: a partial row tile for every max_rows > 1.
      const testing::Problem p = testing::make_problem(t, n, 37, n_tokens, static_cast<uint32_t>(n_tokens));
      const std::vector<float> want = testing::reference(p);
      const std::vector<double> bounds = testing::budgets(p, k->act_type);
      WeightView view{tr, p.w.data(), p.n_rows, p.n, p.w_stride};
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(n_tokens * p.n_rows, NAN);
        matmul(view, p.x.data(), y.data(), n_tokens, pool);
        for (int64_t c = 0; c < n_tokens; ++c)
          for (int64_t r = 0; r < p.n_rows; ++r)
            ASSERT_LE(std::fabs(double(y[c * p.n_rows + r]) - want[c * p.n_rows + r]), bounds[c * p.n_rows + r])
                << tr->name << "@" << cpu_level_name(k->level) << " threads " << threads << " tokens " << n_tokens
                << " r " << r << " c " << c << " got " << y[c * p.n_rows + r] << " want " << want[c * p.n_rows + r];
      }
    }
  }
}

// matmul_group (shared input, one quantization per activation format, one
// parallel pass) gives every output bit-identical to its own matmul call, for
// mixed weight types and any thread or token count.
TEST(MatmulDriver, GroupEqualsSeparateCallsBitForBit) {
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16};
  const int64_t n = 512;
  const int64_t rows[] = {100, 37, 64, 9};
  for (int64_t n_tokens : {1, 5, 40}) {
    std::vector<testing::Problem> probs;
    for (int i = 0; i < 4; ++i) probs.push_back(testing::make_problem(types[i], n, rows[i], n_tokens, 7 + i));
    for (int i = 1; i < 4; ++i) probs[i].x = probs[0].x;  // one shared input
    std::vector<WeightView> views;
    for (const auto& p : probs) views.push_back({quant::traits(p.type), p.w.data(), p.n_rows, p.n, p.w_stride});
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> sep(4), grp(4);
      MatmulJob jobs[4];
      for (int i = 0; i < 4; ++i) {
        sep[i].assign(n_tokens * rows[i], NAN);
        grp[i].assign(n_tokens * rows[i], NAN);
        matmul(views[i], probs[0].x.data(), sep[i].data(), n_tokens, pool);
        jobs[i] = {&views[i], grp[i].data()};
      }
      matmul_group(jobs, 4, probs[0].x.data(), n_tokens, pool);
      for (int i = 0; i < 4; ++i)
        for (size_t e = 0; e < sep[i].size(); ++e)
          ASSERT_EQ(std::bit_cast<uint32_t>(grp[i][e]), std::bit_cast<uint32_t>(sep[i][e]))
              << "job " << i << " elem " << e << " threads " << threads << " tokens " << n_tokens;
    }
  }
}

// Packed panels (kernels/pack.h) are only a re-ordering of the same bytes:
// matmul through them is bit-identical to the matrix in place, for every
// type with a packed form, partial last panels, any token and thread count.
TEST(MatmulDriver, PackedWeightsGiveBitIdenticalResults) {
  int n_packed_types = 0;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::Q4_1, GgmlType::F16, GgmlType::F8_E4M3, GgmlType::F8_E5M2,
                     GgmlType::Q8_0_S24}) {
    const quant::TypeTraits* tr = quant::traits(t);
    const MatmulKernels* k = matmul_kernels(t);
    ASSERT_NE(k, nullptr);
    const int64_t n = tr->block_elems == 256 ? 512 : 160;
    for (int64_t n_rows : {1, 31, 32, 77}) {
      const testing::Problem p = testing::make_problem(t, n, n_rows, 41, static_cast<uint32_t>(n_rows), 8);
      const WeightView view{tr, p.w.data(), p.n_rows, p.n, p.w_stride};
      const size_t bytes = packed_bytes(*k, view);
      if (bytes == 0) continue;  // no packed form for this type at this CPU level
      ++n_packed_types;
      EXPECT_EQ(bytes, static_cast<size_t>((n_rows + 31) / 32 * 32) * (n / tr->block_elems) * tr->block_bytes);
      std::vector<uint8_t> packed(bytes + 64);
      uint8_t* aligned = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
      pack_weights(*k, view, aligned);
      {  // packing panels in parallel writes the same bytes
        std::vector<uint8_t> parallel(bytes);
        ThreadPool pack_pool(3);
        pack_weights(*k, view, parallel.data(), &pack_pool);
        ASSERT_EQ(0, std::memcmp(parallel.data(), aligned, bytes)) << tr->name << " rows " << n_rows;
      }
      WeightView packed_view = view;
      packed_view.packed = aligned;
      for (int64_t n_tokens : {1, 2, 9, 41}) {
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          std::vector<float> a(n_tokens * n_rows, NAN), b(n_tokens * n_rows, NAN);
          matmul(view, p.x.data(), a.data(), n_tokens, pool);
          matmul(packed_view, p.x.data(), b.data(), n_tokens, pool);
          for (size_t e = 0; e < a.size(); ++e)
            ASSERT_EQ(std::bit_cast<uint32_t>(a[e]), std::bit_cast<uint32_t>(b[e]))
                << tr->name << " rows " << n_rows << " tokens " << n_tokens << " threads " << threads << " elem " << e;
        }
      }
    }
  }
  if (best_cpu_level() == CpuLevel::Avx512 || best_cpu_level() == CpuLevel::Avx2) {
    EXPECT_GT(n_packed_types, 0);
  }
}

}  // namespace
}  // namespace tern::kernels
