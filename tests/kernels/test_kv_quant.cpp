// The SIMD q8_0 roundings against core/kv_format.h's scalar codecs: the same
// bytes, on random rows, on exact halves (ties), zeros, NaN and infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kv_quant.h"

namespace tern::kernels {
namespace {

std::vector<std::vector<float>> rows(int hd) {
  std::mt19937 rng(static_cast<uint32_t>(hd));
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < 200; ++r) {
    std::vector<float> x(static_cast<size_t>(hd));
    for (float& v : x) v = dist(rng);
    out.push_back(x);
  }
  // Ties: amax 127 makes d = 1 (query) so k + 0.5 is an exact half; and -0.0.
  std::vector<float> ties(static_cast<size_t>(hd));
  for (int i = 0; i < hd; ++i) ties[static_cast<size_t>(i)] = i == 0 ? 127.0f : (i % 2 ? -1.0f : 1.0f) * (i % 100 + 0.5f);
  if (hd > 1) ties[1] = -0.0f;
  out.push_back(ties);
  out.push_back(std::vector<float>(static_cast<size_t>(hd), 0.0f));
  std::vector<float> odd = out[0];
  odd[0] = std::numeric_limits<float>::quiet_NaN();
  if (hd > 2) odd[2] = std::numeric_limits<float>::infinity();
  if (hd > 3) odd[3] = -1e30f;
  out.push_back(odd);
  return out;
}

TEST(KvQuant, QueryCodesEqualTheScalarRule) {
  for (int hd : {8, 16, 24, 64, 80, 128, 256}) {
    const int groups = hd / kv_group_elems(KvType::Q8_0, hd);
    for (const auto& x : rows(hd)) {
      std::vector<int8_t> c0(x.size()), c1(x.size());
      std::vector<float> d0(static_cast<size_t>(groups)), d1(d0.size());
      kv_quantize_query(x.data(), hd, c0.data(), d0.data());
      quantize_query(x.data(), hd, c1.data(), d1.data());
      ASSERT_EQ(c0, c1) << "hd " << hd;
      for (size_t k = 0; k < d0.size(); ++k) ASSERT_EQ(std::memcmp(&d0[k], &d1[k], 4), 0) << "hd " << hd;
    }
  }
}

TEST(KvQuant, StoredRowsEqualTheScalarCodec) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8})
    for (int hd : {8, 16, 64, 80, 128}) {
      const int n_kv_head = 3;
      for (const auto& head : rows(hd)) {
        std::vector<float> x;
        for (int h = 0; h < n_kv_head; ++h) x.insert(x.end(), head.begin(), head.end());
        x[static_cast<size_t>(hd)] += 1.0f;  // heads differ
        std::vector<uint8_t> b0(kv_row_bytes(t, n_kv_head, hd)), b1(b0.size(), 0xee);
        kv_encode_row(t, x.data(), n_kv_head, hd, b0.data());
        encode_kv_row(t, x.data(), n_kv_head, hd, b1.data());
        ASSERT_EQ(b0, b1) << kv_type_name(t) << " hd " << hd;
      }
    }
}

}  // namespace
}  // namespace tern::kernels
