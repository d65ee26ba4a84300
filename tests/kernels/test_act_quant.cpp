// Activation quantizers of every SIMD level are bit-exact with the scalar
// reference (quant::traits(T)->from_float, float_to_bf16): random rows plus
// blocks made to hit the corner cases of each rounding rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

// A weight type whose kernels at `level` quantize activations to `act`, or nullptr.
const MatmulKernels* kernels_with_act(GgmlType act, CpuLevel level) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::BF16}) {
    const MatmulKernels* k = matmul_kernels_at(t, level);
    if (k && k->act_type == act) return k;
  }
  return nullptr;
}

// 16 blocks of 256 (so 128 Q8_0 blocks), each stressing something.
std::vector<float> tricky_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * std::exp2(static_cast<float>(static_cast<int>(i / 256) - 8));
  float* b = x.data();
  // Block 0: exact halves at scale 1 (amax 127 -> d = 1): ties round away from zero (Q8_0) / to even (Q8_K).
  for (int j = 0; j < 256; ++j) b[j] = static_cast<float>(j % 64) - 31.5f;
  b[7] = 127.0f;
  b[200] = -127.0f;  // |max| tie of opposite signs: Q8_K keeps the first
  // Block 1: all zero.
  std::fill(b + 256, b + 512, 0.0f);
  // Block 2: tiny values with subnormals among them. (Not a block whose amax is
  // itself subnormal: there 1/d overflows to inf and the reference's lround(inf)
  // is unspecified; d decodes to 0 anyway, so the bytes carry no value.)
  for (int j = 512; j < 768; ++j) b[j] = (j % 2 ? 1e-40f : -3e-36f) * static_cast<float>(j % 7);
  b[600] = -1e-30f;
  // Block 3: large values (fp16 d overflows to inf for the 32-element types).
  for (int j = 768; j < 1024; ++j) b[j] = normal(rng) * 1e7f;
  // Block 4: one non-zero element per 32.
  std::fill(b + 1024, b + 1280, 0.0f);
  for (int j = 1024; j < 1280; j += 32) b[j + 5] = -0.75f;
  return x;
}

TEST(ActQuant, SimdQuantizersAreBitExactWithReference) {
  int n_checked = 0;
  for (CpuLevel level : testing::available_levels()) {
    if (level == CpuLevel::Scalar) continue;
    for (GgmlType act : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
      const MatmulKernels* k = kernels_with_act(act, level);
      if (!k) continue;
      const quant::TypeTraits* tr = quant::traits(act);
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        const std::vector<float> x = tricky_row(seed);
        for (int64_t n : {static_cast<int64_t>(tr->block_elems), static_cast<int64_t>(x.size())}) {
          const size_t bytes = quant::row_bytes(*tr, n);
          std::vector<uint8_t> want(bytes), got(bytes, 0xCD);
          tr->from_float(x.data(), want.data(), n);
          if (k->act_biased) {  // Q8_0 with quants + 128: the bytes after each block's fp16 scale
            ASSERT_EQ(act, GgmlType::Q8_0);
            for (size_t i = 0; i < bytes; ++i)
              if (i % tr->block_bytes >= 2) want[i] ^= 0x80;
          }
          k->quantize_act(x.data(), got.data(), n);
          for (size_t i = 0; i < bytes; ++i)
            ASSERT_EQ(got[i], want[i]) << tr->name << "@" << cpu_level_name(level) << " seed " << seed << " n " << n
                                       << " byte " << i << " (block " << i / tr->block_bytes << ")";
          ++n_checked;
        }
      }
    }
    if (const MatmulKernels* k = kernels_with_act(GgmlType::BF16, level)) {
      std::vector<float> x = tricky_row(7);
      x[3] = NAN;
      x[4] = -INFINITY;
      x[5] = 3.3895314e38f;  // rounds up to inf
      for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{33}, static_cast<int64_t>(x.size())}) {
        std::vector<uint16_t> got(n, 0xCDCD);
        k->quantize_act(x.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float_to_bf16(x[i])) << "BF16 element " << i << " n " << n;
      }
      ++n_checked;
    }
  }
  if (n_checked == 0) GTEST_SKIP() << "no SIMD level on this CPU";
}

}  // namespace
}  // namespace tern::kernels
