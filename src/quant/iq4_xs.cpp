// quant/iq4_xs.cpp — IQ4_XS: IQ4_NL's non-uniform 4-bit code book in 256-element super-blocks
// (4.25 bits per weight against IQ4_NL's 4.5). Each of the eight 32-element sub-blocks gets the
// IQ4_NL scale search; the super-block keeps one fp16 scale d = -(largest-magnitude sub-block
// scale) / 32 and each sub-block a 6-bit multiple of it, and the codes are re-chosen for the
// scale the file really holds — the rules of ggml's quantize_row_iq4_xs_ref without importance
// weights, so files match what llama-quantize writes.
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "core/fp16.h"
#include "quant/k_blocks.h"
#include "quant/rows.h"
#include "quant/scalar_math.h"

namespace tern::quant::rows {
namespace {

constexpr int kSub = 32;                  // elements per sub-block
constexpr int kNSub = kQK_K / kSub;       // 8 sub-blocks

void quantize_block(const float* x, BlockIq4Xs* b) {
  uint8_t L[kQK_K];
  float scales[kNSub];
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int s = 0; s < kNSub; ++s) {
    scales[s] = iq4_best_scale(x + s * kSub, 7, L + s * kSub);
    if (std::fabs(scales[s]) > amax_scale) {
      amax_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  // The largest scale becomes -32 d exactly (6-bit scales run -32..31).
  const float d = -max_scale / 32.0f;
  b->d = float_to_fp16(d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof(b->scales_l));
  for (int s = 0; s < kNSub; ++s) {
    const int l = clamp_int(round_nearest_even(id * scales[s]), -32, 31);
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int j = 0; j < kSub; ++j)
      L[s * kSub + j] = static_cast<uint8_t>(nearest_index16(kIq4nlValues, idl * x[s * kSub + j]));
    const int biased = l + 32;
    b->scales_l[s / 2] = static_cast<uint8_t>(b->scales_l[s / 2] | (biased & 0x0f) << (4 * (s % 2)));
    b->scales_h = static_cast<uint16_t>(b->scales_h | (biased >> 4) << (2 * s));
  }
  for (int s = 0; s < kNSub; ++s)
    for (int j = 0; j < kSub / 2; ++j)
      b->qs[s * 16 + j] = static_cast<uint8_t>(L[s * kSub + j] | L[s * kSub + j + 16] << 4);
}

}  // namespace

void iq4_xs_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIq4Xs*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_float(b[i].d);
    for (int s = 0; s < kNSub; ++s, dst += kSub) {
      const float dl = d * static_cast<float>(unpack_scale_iq4_xs(b[i], s));
      const uint8_t* q = b[i].qs + s * 16;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4nlValues[q[j] & 0x0f]);
        dst[j + 16] = dl * static_cast<float>(kIq4nlValues[q[j] >> 4]);
      }
    }
  }
}

void iq4_xs_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIq4Xs*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) quantize_block(src + i * kQK_K, b + i);
}

float iq4_xs_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIq4Xs*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_float(b[i].d);
    float block = 0.0f;
    for (int s = 0; s < kNSub; ++s, x += kSub) {
      const uint8_t* q = b[i].qs + s * 16;
      float sum_qx = 0.0f;
      for (int j = 0; j < 16; ++j) {
        sum_qx += static_cast<float>(kIq4nlValues[q[j] & 0x0f]) * x[j] +
                  static_cast<float>(kIq4nlValues[q[j] >> 4]) * x[j + 16];
      }
      block += static_cast<float>(unpack_scale_iq4_xs(b[i], s)) * sum_qx;
    }
    sum += d * block;
  }
  return sum;
}

}  // namespace tern::quant::rows
