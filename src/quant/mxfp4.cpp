// MXFP4 rows (quant/blocks.h), bit-exact with ggml's dequantize_row_mxfp4 and
// quantize_row_mxfp4_ref: the block's exponent from the largest magnitude,
// then each element the nearest of the 16 values, the first in table order on
// a tie.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/rows.h"

namespace tern::quant::rows {

float mxfp4_scale(uint8_t e) {
  // 2^(e - 128): the E8M0 value halved; e < 2 gives subnormal floats.
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

uint8_t mxfp4_exponent(float amax) {
  // log2f as ggml computes it, so the bytes match; clamped where ggml's cast would be undefined.
  const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
  return static_cast<uint8_t>(std::clamp(e, 0.0f, 255.0f));
}

void mxfp4_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockMxfp4*>(src);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, dst += kQK_MXFP4) {
    const float d = mxfp4_scale(b[i].e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      dst[j] = static_cast<float>(kMxfp4Values[b[i].qs[j] & 0x0f]) * d;
      dst[j + kQK_MXFP4 / 2] = static_cast<float>(kMxfp4Values[b[i].qs[j] >> 4]) * d;
    }
  }
}

namespace {

uint8_t nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void mxfp4_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockMxfp4*>(dst);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, src += kQK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_MXFP4; ++j) amax = std::max(amax, std::fabs(src[j]));
    b[i].e = mxfp4_exponent(amax);
    const float d = mxfp4_scale(b[i].e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j)
      b[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(src[j], d) | nearest_mxfp4(src[j + kQK_MXFP4 / 2], d) << 4);
  }
}

float mxfp4_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockMxfp4*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, x += kQK_MXFP4) {
    float sum_qx = 0.0f;
    for (int j = 0; j < kQK_MXFP4 / 2; ++j)
      sum_qx += static_cast<float>(kMxfp4Values[b[i].qs[j] & 0x0f]) * x[j] +
                static_cast<float>(kMxfp4Values[b[i].qs[j] >> 4]) * x[j + kQK_MXFP4 / 2];
    sum += mxfp4_scale(b[i].e) * sum_qx;
  }
  return sum;
}

}  // namespace tern::quant::rows
