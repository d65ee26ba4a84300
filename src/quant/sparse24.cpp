// Q8_0_S24 row functions (quant/blocks.h): the scalar reference of the
// 2:4-sparse Q8_0 type. Decoding puts each kept value at its column and zeros
// elsewhere; the dot product adds the kept columns in order, which is the sum
// Q8_0's vec_dot forms over the zero-filled row (adding exact zeros changes no
// float sum), so both give the same result.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/rows.h"

namespace tern::quant::rows {
namespace {

// A mask with more than 16 bits set (a damaged file) reads no further than the block's 16 values.
constexpr int kKept = kQK8_0S24 / 2;

uint32_t mask_of(const BlockQ8_0S24& b) {
  uint32_t m;
  std::memcpy(&m, b.mask, sizeof m);
  return m;
}

}  // namespace

void q8_0_s24_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0S24*>(src);
  for (int64_t i = 0; i < n / kQK8_0S24; ++i) {
    const float d = fp16_to_float(b[i].d);
    const uint32_t m = mask_of(b[i]);
    float* y = dst + i * kQK8_0S24;
    int k = 0;
    for (int j = 0; j < kQK8_0S24; ++j) y[j] = (m >> j & 1u) && k < kKept ? d * b[i].qs[k++] : 0.0f;
  }
}

void q8_0_s24_from_float(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0S24*>(dst);
  for (int64_t i = 0; i < n / kQK8_0S24; ++i) {
    const float* x = src + i * kQK8_0S24;
    uint32_t m = 0;
    for (int g = 0; g < kQK8_0S24; g += 4) {
      // The two largest |x| of the group; ties to the lower column.
      int first = g;
      for (int j = g + 1; j < g + 4; ++j)
        if (std::fabs(x[j]) > std::fabs(x[first])) first = j;
      int second = first == g ? g + 1 : g;
      for (int j = g; j < g + 4; ++j)
        if (j != first && std::fabs(x[j]) > std::fabs(x[second])) second = j;
      m |= 1u << first | 1u << second;
    }
    // Q8_0's rule over the kept values: d = max|x| / 127, q = round(x / d).
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0S24; ++j)
      if (m >> j & 1u) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = float_to_fp16(d);
    std::memcpy(b[i].mask, &m, sizeof m);
    int k = 0;
    for (int j = 0; j < kQK8_0S24; ++j)
      if (m >> j & 1u) b[i].qs[k++] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

float q8_0_s24_vec_dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0S24*>(row);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK8_0S24; ++i) {
    const uint32_t m = mask_of(b[i]);
    const float* xb = x + i * kQK8_0S24;
    float block = 0.0f;
    int k = 0;
    for (int j = 0; j < kQK8_0S24; ++j)
      if ((m >> j & 1u) && k < kKept) block += b[i].qs[k++] * xb[j];
    sum += block * fp16_to_float(b[i].d);
  }
  return sum;
}

}  // namespace tern::quant::rows
