// quant/legacy_quants.cpp — Q4_1, Q5_0, Q5_1, Q8_1 and IQ4_NL (32-element blocks).
//
// Decoders are bit-exact with ggml's dequantize_row_*: the same float
// operations in the same order (x = q*d or q*d + m, one rounding each).
// Quantizers follow ggml's reference rules (min/max or signed-absmax scale,
// truncation after +0.5) so that, fed the same floats, they emit the same bytes.
// vec_dot factors the block scale out of the per-block sum, as fast kernels do.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/rows.h"
#include "quant/scalar_math.h"

namespace tern::quant::rows {
namespace {

constexpr int kHalf = 16;  // elements per nibble half of a 32-element block

uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

void store_qh(uint8_t qh[4], uint32_t bits) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(bits >> (8 * i));
}

// The 5-bit quant of element j (0..31) of a Q5_0/Q5_1 block.
int q5_quant(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kHalf ? (qs[j] & 0x0f) : (qs[j - kHalf] >> 4);
  return nibble | static_cast<int>((qh >> j) & 1u) << 4;
}

// Minimum and maximum of 32 floats, seeded like ggml (FLT_MAX / -FLT_MAX).
void min_max32(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// The element of largest magnitude (first one on ties), with its sign.
float signed_absmax32(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

// ---- Q4_1: x = d*q + m, q in 0..15 ----------------------------------------------

void q4_1_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK4_1; ++i, dst += kQK4_1) {
    const float d = fp16_to_float(b[i].d), m = fp16_to_float(b[i].m);
    for (int j = 0; j < kHalf; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      dst[j + kHalf] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// d = (max - min) / 15, q = min(15, trunc((x - min) / d + 0.5)).
void q4_1_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK4_1; ++i, src += kQK4_1) {
    float min, max;
    min_max32(src, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    b[i].m = float_to_fp16(min);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = trunc_clamp((src[j] - min) * id + 0.5f, 15);
      const int q1 = trunc_clamp((src[j + kHalf] - min) * id + 0.5f, 15);
      b[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

float q4_1_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_1; ++i, x += kQK4_1) {
    float sum_qx = 0.0f, sum_x = 0.0f;
    for (int j = 0; j < kHalf; ++j) {
      sum_qx += static_cast<float>(b[i].qs[j] & 0x0f) * x[j] + static_cast<float>(b[i].qs[j] >> 4) * x[j + kHalf];
      sum_x += x[j] + x[j + kHalf];
    }
    sum += fp16_to_float(b[i].d) * sum_qx + fp16_to_float(b[i].m) * sum_x;
  }
  return sum;
}

// ---- Q5_0: x = d*(q - 16), q in 0..31 --------------------------------------------

void q5_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK5_0; ++i, dst += kQK5_0) {
    const float d = fp16_to_float(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK5_0; ++j) dst[j] = static_cast<float>(q5_quant(b[i].qs, qh, j) - 16) * d;
  }
}

// The signed value of largest magnitude maps to -16: d = max / -16,
// q = min(31, trunc(x / d + 16.5)).
void q5_0_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK5_0; ++i, src += kQK5_0) {
    const float d = signed_absmax32(src) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = trunc_clamp(src[j] * id + 16.5f, 31);
      const int q1 = trunc_clamp(src[j + kHalf] * id + 16.5f, 31);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    store_qh(b[i].qh, qh);
  }
}

float q5_0_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_0; ++i, x += kQK5_0) {
    const uint32_t qh = load_qh(b[i].qh);
    float sum_qx = 0.0f;
    for (int j = 0; j < kQK5_0; ++j) sum_qx += static_cast<float>(q5_quant(b[i].qs, qh, j) - 16) * x[j];
    sum += fp16_to_float(b[i].d) * sum_qx;
  }
  return sum;
}

// ---- Q5_1: x = d*q + m, q in 0..31 -----------------------------------------------

void q5_1_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK5_1; ++i, dst += kQK5_1) {
    const float d = fp16_to_float(b[i].d), m = fp16_to_float(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK5_1; ++j) dst[j] = static_cast<float>(q5_quant(b[i].qs, qh, j)) * d + m;
  }
}

// d = (max - min) / 31, q = trunc((x - min) / d + 0.5) (never above 31 for finite data).
void q5_1_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK5_1; ++i, src += kQK5_1) {
    float min, max;
    min_max32(src, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    b[i].m = float_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = trunc_clamp((src[j] - min) * id + 0.5f, 31);
      const int q1 = trunc_clamp((src[j + kHalf] - min) * id + 0.5f, 31);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    store_qh(b[i].qh, qh);
  }
}

float q5_1_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_1; ++i, x += kQK5_1) {
    const uint32_t qh = load_qh(b[i].qh);
    float sum_qx = 0.0f, sum_x = 0.0f;
    for (int j = 0; j < kQK5_1; ++j) {
      sum_qx += static_cast<float>(q5_quant(b[i].qs, qh, j)) * x[j];
      sum_x += x[j];
    }
    sum += fp16_to_float(b[i].d) * sum_qx + fp16_to_float(b[i].m) * sum_x;
  }
  return sum;
}

// ---- Q8_1: x = d*q, s = d*sum(q) -------------------------------------------------

void q8_1_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK8_1; ++i, dst += kQK8_1) {
    const float d = fp16_to_float(b[i].d);
    for (int j = 0; j < kQK8_1; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// d = amax / 127, q = round-half-away(x / d), s = d * sum(q).
void q8_1_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK8_1; ++i, src += kQK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      b[i].qs[j] = static_cast<int8_t>(clamp_int(static_cast<int>(std::round(src[j] * id)), -127, 127));
      sum += b[i].qs[j];
    }
    b[i].s = float_to_fp16(static_cast<float>(sum) * d);
  }
}

float q8_1_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK8_1; ++i, x += kQK8_1) {
    float sum_qx = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) sum_qx += static_cast<float>(b[i].qs[j]) * x[j];
    sum += fp16_to_float(b[i].d) * sum_qx;
  }
  return sum;
}

// ---- IQ4_NL: x = d * kIq4nlValues[q] ---------------------------------------------

void iq4_nl_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIq4Nl*>(src);
  for (int64_t i = 0; i < n / kQK4_NL; ++i, dst += kQK4_NL) {
    const float d = fp16_to_float(b[i].d);
    for (int j = 0; j < kHalf; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] & 0x0f]);
      dst[j + kHalf] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] >> 4]);
    }
  }
}

namespace {

// Weighted least-squares fit of one block to scale * table[L] for the indices
// chosen at inverse scale `id`: returns sum(w q x) and sum(w q^2), w = x^2.
void iq4_nl_fit(const float* x, float id, uint8_t* L, float* sum_qx, float* sum_q2) {
  *sum_qx = 0.0f;
  *sum_q2 = 0.0f;
  for (int j = 0; j < kQK4_NL; ++j) {
    const int l = nearest_index16(kIq4nlValues, id * x[j]);
    if (L) L[j] = static_cast<uint8_t>(l);
    const float q = kIq4nlValues[l], w = x[j] * x[j];
    *sum_qx += w * q * x[j];
    *sum_q2 += w * q * q;
  }
}

}  // namespace

// As ggml's quantize_row_iq4_nl_impl searches one 32-element block without importance weights:
// a first fit with the absmax element on a table end, then (n_try > 0) 2*n_try+1 inverse scales
// that put it at table entry -127 + t, keeping the scale of best weighted error.
float iq4_best_scale(const float* x, int n_try, uint8_t* L) {
  const float max = signed_absmax32(x);
  float d = 0.0f;
  if (std::fabs(max) >= 1e-15f) {
    const float first = kIq4nlValues[0];
    d = n_try > 0 ? -max / first : max / first;
    float sum_qx, sum_q2;
    iq4_nl_fit(x, 1.0f / d, L, &sum_qx, &sum_q2);
    d = sum_q2 > 0.0f ? sum_qx / sum_q2 : 0.0f;
    float best = d * sum_qx;
    for (int t = -n_try; t <= n_try; ++t) {
      iq4_nl_fit(x, static_cast<float>(t + kIq4nlValues[0]) / max, nullptr, &sum_qx, &sum_q2);
      if (sum_q2 > 0.0f && sum_qx * sum_qx > best * sum_q2) {
        d = sum_qx / sum_q2;
        best = d * sum_qx;
      }
    }
  } else {
    // All (near) zero: ggml leaves the indices of the previous block here when
    // n_try <= 0; we always use the index of the value nearest 0.
    std::memset(L, 8, kQK4_NL);
  }
  return d;
}

namespace {

// One IQ4_NL block: the scale search, then (n_try > 0) the indices re-chosen for the final
// (f32) scale.
void iq4_nl_quantize_block(const float* x, BlockIq4Nl* b, int n_try) {
  uint8_t L[kQK4_NL];
  const float d = iq4_best_scale(x, n_try, L);
  b->d = float_to_fp16(d);
  if (n_try > 0) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQK4_NL; ++j) L[j] = static_cast<uint8_t>(nearest_index16(kIq4nlValues, id * x[j]));
  }
  for (int j = 0; j < kHalf; ++j) b->qs[j] = static_cast<uint8_t>(L[j] | L[j + kHalf] << 4);
}

}  // namespace

void iq4_nl_from_float_ntry(const float* src, void* dst, int64_t n, int n_try) {
  auto* b = static_cast<BlockIq4Nl*>(dst);
  for (int64_t i = 0; i < n / kQK4_NL; ++i) iq4_nl_quantize_block(src + i * kQK4_NL, b + i, n_try);
}

void iq4_nl_from_float(const float* src, void* dst, int64_t n) { iq4_nl_from_float_ntry(src, dst, n, 7); }

float iq4_nl_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockIq4Nl*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_NL; ++i, x += kQK4_NL) {
    float sum_qx = 0.0f;
    for (int j = 0; j < kHalf; ++j) {
      sum_qx += static_cast<float>(kIq4nlValues[b[i].qs[j] & 0x0f]) * x[j] +
                static_cast<float>(kIq4nlValues[b[i].qs[j] >> 4]) * x[j + kHalf];
    }
    sum += fp16_to_float(b[i].d) * sum_qx;
  }
  return sum;
}

}  // namespace tern::quant::rows
