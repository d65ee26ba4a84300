#include "quant/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/assert.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "quant/blocks.h"
#include "quant/rows.h"

namespace tern::quant {
namespace {

// ---- F32 / F16 / BF16 -------------------------------------------------------

void f32_to_float(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void f32_from_float(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
float f32_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* w = static_cast<const float*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(h[i]);
}
void f16_from_float(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_fp16(src[i]);
}
float f16_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_float(h[i]) * x[i];
  return sum;
}

void bf16_row_to_float(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = tern::bf16_to_float(h[i]);
}
void bf16_row_from_float(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = tern::float_to_bf16(src[i]);
}
float bf16_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += tern::bf16_to_float(h[i]) * x[i];
  return sum;
}

// ---- Q8_0 ---------------------------------------------------------------------

void q8_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float d = fp16_to_float(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) dst[i * kQK8_0 + j] = d * b[i].qs[j];
  }
}

// Same rule as ggml's reference: d = max|x| / 127, q = round(x / d).
void q8_0_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

float q8_0_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    float block = 0.0f;
    const float* xb = x + i * kQK8_0;
    for (int j = 0; j < kQK8_0; ++j) block += b[i].qs[j] * xb[j];
    sum += block * fp16_to_float(b[i].d);
  }
  return sum;
}

// ---- Q4_0 ---------------------------------------------------------------------

void q4_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float d = fp16_to_float(b[i].d);
    float* y = dst + i * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * (static_cast<int>(b[i].qs[j] & 0x0f) - 8);
      y[j + kQK4_0 / 2] = d * (static_cast<int>(b[i].qs[j] >> 4) - 8);
    }
  }
}

// Same rule as ggml's reference: the signed value of largest magnitude maps
// to -8, d = max / -8, q = clamp(trunc(x / d + 8.5), 0, 15).
void q4_0_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* x = src + i * kQK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK4_0 / 2] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

float q4_0_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* xb = x + i * kQK4_0;
    float block = 0.0f;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      block += (static_cast<int>(b[i].qs[j] & 0x0f) - 8) * xb[j];
      block += (static_cast<int>(b[i].qs[j] >> 4) - 8) * xb[j + kQK4_0 / 2];
    }
    sum += block * fp16_to_float(b[i].d);
  }
  return sum;
}

// ---- I8 ----------------------------------------------------------------------
// The quants of a W8A8 matrix (docs/quantize.md): one int8 per weight, the
// row's scale held apart (WeightView::row_scale, the file's "<name>.scale"
// tensor), so these functions see the quants only and leave scaling to their
// callers. No from_float: a row's quants depend on its scale, which this
// per-row signature cannot return (model/quantize.cpp writes both).
void i8_to_float(const void* src, float* dst, int64_t n) {
  const auto* q = static_cast<const int8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(q[i]);
}
float i8_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* q = static_cast<const int8_t*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(q[i]) * x[i];
  return sum;
}

// ---- F8_E4M3, F8_E5M2 ------------------------------------------------------------
// FP8 weights (docs/quantize.md): one OCP FP8 code per weight, the row's scale
// held apart as for I8.
template <float (*Decode)(uint8_t)>
void f8_to_float(const void* src, float* dst, int64_t n) {
  const auto* q = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Decode(q[i]);
}
template <float (*Decode)(uint8_t)>
float f8_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* q = static_cast<const uint8_t*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += Decode(q[i]) * x[i];
  return sum;
}

}  // namespace

bool has_row_scale(GgmlType type) {
  return type == GgmlType::I8 || is_fp8(type);
}

float quantize_row_scaled(GgmlType type, const float* x, int64_t n, void* q) {
  if (type == GgmlType::I8) return quantize_row_i8(x, n, static_cast<int8_t*>(q));
  TERN_ASSERT(is_fp8(type));
  const bool e4m3 = type == GgmlType::F8_E4M3;
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  // The row's largest magnitude lands on the format's largest finite value.
  const float d = amax / (e4m3 ? 448.0f : 57344.0f);
  auto* c = static_cast<uint8_t*>(q);
  for (int64_t i = 0; i < n; ++i) {
    const float v = d != 0.0f ? x[i] / d : 0.0f;
    c[i] = e4m3 ? float_to_fp8_e4m3(v) : float_to_fp8_e5m2(v);
  }
  return d;
}

float quantize_row_i8(const float* x, int64_t n, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  // nearbyint under the default mode rounds half to even, as vcvtps2dq does.
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(std::fmin(std::fmax(x[i] * id, -127.0f), 127.0f)));
  return d;
}

namespace {

using namespace rows;  // NOLINT: the per-type row functions of rows.h

// One row per type. The last column is the activation type ggml's fast kernels
// pair with the weight type (our scalar vec_dot takes f32 activations directly).
const TypeTraits kTraits[] = {
    {GgmlType::F32, "F32", 1, 4, f32_to_float, f32_from_float, f32_vec_dot, GgmlType::F32},
    {GgmlType::F16, "F16", 1, 2, f16_to_float, f16_from_float, f16_vec_dot, GgmlType::F16},
    {GgmlType::BF16, "BF16", 1, 2, bf16_row_to_float, bf16_row_from_float, bf16_vec_dot, GgmlType::BF16},
    {GgmlType::Q8_0, "Q8_0", 32, 34, q8_0_to_float, q8_0_from_float, q8_0_vec_dot, GgmlType::Q8_0},
    {GgmlType::Q4_0, "Q4_0", 32, 18, q4_0_to_float, q4_0_from_float, q4_0_vec_dot, GgmlType::Q8_0},
    {GgmlType::Q4_1, "Q4_1", 32, 20, q4_1_to_float, q4_1_from_float, q4_1_vec_dot, GgmlType::Q8_1},
    {GgmlType::Q5_0, "Q5_0", 32, 22, q5_0_to_float, q5_0_from_float, q5_0_vec_dot, GgmlType::Q8_0},
    {GgmlType::Q5_1, "Q5_1", 32, 24, q5_1_to_float, q5_1_from_float, q5_1_vec_dot, GgmlType::Q8_1},
    {GgmlType::Q8_1, "Q8_1", 32, 36, q8_1_to_float, q8_1_from_float, q8_1_vec_dot, GgmlType::Q8_1},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, iq4_nl_to_float, iq4_nl_from_float, iq4_nl_vec_dot, GgmlType::Q8_0},
    {GgmlType::Q8_0_S24, "Q8_0_S24", 32, 22, q8_0_s24_to_float, q8_0_s24_from_float, q8_0_s24_vec_dot, GgmlType::Q8_0},
    {GgmlType::MXFP4, "MXFP4", 32, 17, mxfp4_to_float, mxfp4_from_float, mxfp4_vec_dot, GgmlType::Q8_0},
    {GgmlType::Q2_K, "Q2_K", 256, 84, q2_k_to_float, q2_k_from_float, q2_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::Q3_K, "Q3_K", 256, 110, q3_k_to_float, q3_k_from_float, q3_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::Q4_K, "Q4_K", 256, 144, q4_k_to_float, q4_k_from_float, q4_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::Q5_K, "Q5_K", 256, 176, q5_k_to_float, q5_k_from_float, q5_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::Q6_K, "Q6_K", 256, 210, q6_k_to_float, q6_k_from_float, q6_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::Q8_K, "Q8_K", 256, 292, q8_k_to_float, q8_k_from_float, q8_k_vec_dot, GgmlType::Q8_K},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, iq4_xs_to_float, iq4_xs_from_float, iq4_xs_vec_dot, GgmlType::Q8_K},
    // Activations of W8A8 are int8 per token (kernels/w8a8.h), a row format with no GGUF type.
    {GgmlType::I8, "I8", 1, 1, i8_to_float, nullptr, i8_vec_dot, GgmlType::I8},
    {GgmlType::F8_E4M3, "F8_E4M3", 1, 1, f8_to_float<fp8_e4m3_to_float>, nullptr, f8_vec_dot<fp8_e4m3_to_float>,
     GgmlType::F32},
    {GgmlType::F8_E5M2, "F8_E5M2", 1, 1, f8_to_float<fp8_e5m2_to_float>, nullptr, f8_vec_dot<fp8_e5m2_to_float>,
     GgmlType::F32},
};

}  // namespace

const TypeTraits* traits(GgmlType type) {
  for (const auto& t : kTraits)
    if (t.type == type) return &t;
  return nullptr;
}

}  // namespace tern::quant
