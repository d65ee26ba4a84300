#include "quant/k_grid.h"

#include <cmath>

#include "core/assert.h"
#include "core/fp16.h"
#include "quant/block_codec.h"
#include "quant/k_blocks.h"
#include "quant/quant.h"

namespace tern::quant {

using gguf::GgmlType;

int KGrid::nearest(int e, float x) const {
  const int s = e / sub_elems;
  if (dl[s] == 0.0f) return qmin <= 0 && 0 <= qmax ? 0 : qmin;  // every q gives -ml
  const long q = std::lround((static_cast<double>(x) + ml[s]) / dl[s]);
  return static_cast<int>(q < qmin ? qmin : q > qmax ? qmax : q);
}

bool k_grid_supported(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K;
}

KGrid k_grid_fit(GgmlType type, const float* x, const float* w, void* block) {
  TERN_ASSERT(k_grid_supported(type));
  if (w)
    encode_row_importance(type, x, w, block, kQK_K);
  else
    traits(type)->from_float(x, block, kQK_K);
  KGrid g;
  if (type == GgmlType::Q6_K) {
    const auto* b = static_cast<const BlockQ6_K*>(block);
    g.sub_elems = 16;
    g.qmin = -32;
    g.qmax = 31;
    const float d = fp16_to_float(b->d);
    for (int s = 0; s < 16; ++s) g.dl[s] = d * static_cast<float>(b->scales[s]);
    return g;
  }
  // Q4_K and Q5_K share d, dmin and the packed six-bit scales and mins.
  const bool q4 = type == GgmlType::Q4_K;
  const uint16_t d16 = q4 ? static_cast<const BlockQ4_K*>(block)->d : static_cast<const BlockQ5_K*>(block)->d;
  const uint16_t dmin16 = q4 ? static_cast<const BlockQ4_K*>(block)->dmin : static_cast<const BlockQ5_K*>(block)->dmin;
  const uint8_t* scales = q4 ? static_cast<const BlockQ4_K*>(block)->scales : static_cast<const BlockQ5_K*>(block)->scales;
  g.qmax = q4 ? 15 : 31;
  const float d = fp16_to_float(d16), dmin = fp16_to_float(dmin16);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    unpack_scale_min_k4(scales, s, &sc, &m);
    g.dl[s] = d * static_cast<float>(sc);
    g.ml[s] = dmin * static_cast<float>(m);
  }
  return g;
}

void k_grid_set(GgmlType type, void* block, int e, int q) {
  if (type == GgmlType::Q6_K) {
    auto* b = static_cast<BlockQ6_K*>(block);
    const int u = q + 32, h = e / 128, p = (e % 128) / 32, r = e % 32;
    uint8_t& lo = b->ql[64 * h + 32 * (p & 1) + r];
    const int shift = 4 * (p >> 1);
    lo = static_cast<uint8_t>((lo & ~(0x0f << shift)) | ((u & 0x0f) << shift));
    uint8_t& hi = b->qh[32 * h + r];
    hi = static_cast<uint8_t>((hi & ~(3 << (2 * p))) | ((u >> 4) << (2 * p)));
    return;
  }
  // Q4_K / Q5_K: low nibble k of qs[32c + r] (e = 64c + 32k + r); Q5_K's fifth bit in qh[r], bit e / 32.
  uint8_t* qs = type == GgmlType::Q4_K ? static_cast<BlockQ4_K*>(block)->qs : static_cast<BlockQ5_K*>(block)->qs;
  const int c = e / 64, k = (e % 64) / 32, r = e % 32;
  uint8_t& byte = qs[32 * c + r];
  byte = static_cast<uint8_t>((byte & ~(0x0f << (4 * k))) | ((q & 0x0f) << (4 * k)));
  if (type == GgmlType::Q5_K) {
    uint8_t& hb = static_cast<BlockQ5_K*>(block)->qh[r];
    hb = static_cast<uint8_t>((hb & ~(1 << (e / 32))) | (((q >> 4) & 1) << (e / 32)));
  }
}

}  // namespace tern::quant
