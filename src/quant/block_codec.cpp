#include "quant/block_codec.h"

#include <array>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/rows.h"

namespace tern::quant {
namespace {

using gguf::GgmlType;

template <int N>
constexpr std::array<float, N> offset_grid(int first) {
  std::array<float, N> g{};
  for (int i = 0; i < N; ++i) g[i] = static_cast<float>(first + i);
  return g;
}

constexpr auto kGridQ4_0 = offset_grid<16>(-8);
constexpr auto kGridQ5_0 = offset_grid<32>(-16);
constexpr auto kGridQ8_0 = offset_grid<255>(-127);  // ggml's Q8_0 never writes -128: keep the grid symmetric
constexpr auto kGridQ4_1 = offset_grid<16>(0);
constexpr auto kGridQ5_1 = offset_grid<32>(0);
constexpr std::array<float, 16> kGridIq4Nl = [] {
  std::array<float, 16> g{};
  for (int i = 0; i < 16; ++i) g[i] = kIq4nlValues[i];
  return g;
}();

// MXFP4's 16 codes hold 15 distinct values (+0 and -0): the grid is those, ascending;
// kMxfp4Code maps a grid index back to the code the block stores.
constexpr std::array<float, 15> kGridMxfp4 = {-12, -8, -6, -4, -3, -2, -1, 0, 1, 2, 3, 4, 6, 8, 12};
constexpr uint8_t kMxfp4Code[15] = {15, 14, 13, 12, 11, 10, 9, 0, 1, 2, 3, 4, 5, 6, 7};

const BlockCodec kCodecs[] = {
    {GgmlType::Q4_0, 32, false, kGridQ4_0}, {GgmlType::Q4_1, 32, true, kGridQ4_1},
    {GgmlType::Q5_0, 32, false, kGridQ5_0}, {GgmlType::Q5_1, 32, true, kGridQ5_1},
    {GgmlType::Q8_0, 32, false, kGridQ8_0}, {GgmlType::IQ4_NL, 32, false, kGridIq4Nl},
    {GgmlType::MXFP4, 32, false, kGridMxfp4},
};


// Every grid but IQ4_NL's and MXFP4's is consecutive integers: the nearest index is a rounding.
bool uniform(const BlockCodec& c) { return c.type != GgmlType::IQ4_NL && c.type != GgmlType::MXFP4; }

// Index of the grid value nearest v (in grid units), ties to the upper one.
int nearest_grid(const BlockCodec& c, float v) {
  const int n = static_cast<int>(c.grid.size());
  if (!(v > c.grid[0])) return 0;  // also NaN
  if (v >= c.grid[n - 1]) return n - 1;
  if (uniform(c)) {
    const int q = static_cast<int>(std::floor(v - c.grid[0] + 0.5f));
    return q < 0 ? 0 : (q >= n ? n - 1 : q);
  }
  int lo = 0, hi = n - 1;  // grid[lo] < v < grid[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (c.grid[mid] <= v ? lo : hi) = mid;
  }
  return (v - c.grid[lo] < c.grid[hi] - v) ? lo : hi;
}

double weight(const float* w, int j) { return w ? static_cast<double>(w[j]) : 1.0; }

// Least-squares scale (and offset) for fixed indices; false when the system is singular.
bool refit(const BlockCodec& c, const float* x, const float* w, const uint8_t* q, BlockFit& f) {
  const int n = c.block_elems;
  double sgg = 0, sgx = 0, sg = 0, sx = 0, s1 = 0;
  for (int j = 0; j < n; ++j) {
    const double wj = weight(w, j), g = c.grid[q[j]];
    sgg += wj * g * g;
    sgx += wj * g * x[j];
    sg += wj * g;
    sx += wj * x[j];
    s1 += wj;
  }
  if (!c.affine) {
    if (sgg <= 0) return false;
    f = {stored_scale(c, static_cast<float>(sgx / sgg)), 0.0f};
    return true;
  }
  const double det = sgg * s1 - sg * sg;
  if (!(std::fabs(det) > 1e-12 * sgg * s1)) return false;
  f.d = fp16_round(static_cast<float>((sgx * s1 - sg * sx) / det));
  f.m = fp16_round(static_cast<float>((sgg * sx - sg * sgx) / det));
  return true;
}

void assign(const BlockCodec& c, const BlockFit& f, const float* x, uint8_t* q) {
  for (int j = 0; j < c.block_elems; ++j) q[j] = static_cast<uint8_t>(nearest_index(c, f, x[j]));
}

// The fit ggml's reference quantizer makes (absmax to the grid's negative end; min-max).
BlockFit reference_fit(const BlockCodec& c, const float* x) {
  float amax = 0.0f, max = 0.0f, lo = x[0], hi = x[0];
  for (int j = 0; j < c.block_elems; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  const float last = c.grid[c.grid.size() - 1];
  if (c.affine) return {fp16_round((hi - lo) / last), fp16_round(lo)};
  if (c.type == GgmlType::Q8_0) return {fp16_round(amax / last), 0.0f};
  if (c.type == GgmlType::MXFP4) {  // ggml's exponent (255 is no scale: 254)
    const uint8_t e = rows::mxfp4_exponent(amax);
    return {rows::mxfp4_scale(e < 255 ? e : 254), 0.0f};
  }
  return {fp16_round(max / c.grid[0]), 0.0f};
}

}  // namespace

float stored_scale(const BlockCodec& c, float v) {
  if (c.type != GgmlType::MXFP4) return fp16_round(v);
  if (!(std::fabs(v) > 0.0f)) return 0.0f;  // also NaN
  if (!std::isfinite(v)) return rows::mxfp4_scale(254);
  // The power of two nearest in the log domain (scales multiply), sign dropped:
  // the grid is symmetric, so a negative scale is the positive one with every
  // index mirrored, and the least-squares scale of a non-empty block is >= 0.
  const int e = static_cast<int>(std::lround(std::log2(std::fabs(v)))) + 128;
  return rows::mxfp4_scale(static_cast<uint8_t>(e < 0 ? 0 : (e > 254 ? 254 : e)));
}

const BlockCodec* block_codec(GgmlType type) {
  for (const BlockCodec& c : kCodecs)
    if (c.type == type) return &c;
  return nullptr;
}

int nearest_index(const BlockCodec& c, const BlockFit& f, float x) {
  if (c.affine) return f.d == 0.0f ? 0 : nearest_grid(c, (x - f.m) / f.d);
  if (f.d == 0.0f) return nearest_grid(c, 0.0f);
  return nearest_grid(c, x / f.d);
}

double block_error(const BlockCodec& c, const BlockFit& f, const float* x, const float* w) {
  double e = 0.0;
  for (int j = 0; j < c.block_elems; ++j) {
    const double r = static_cast<double>(x[j]) - level(c, f, nearest_index(c, f, x[j]));
    e += weight(w, j) * r * r;
  }
  return e;
}

BlockFit fit_block(const BlockCodec& c, const float* x, const float* w) {
  const int n = c.block_elems;
  double wsum = 0.0;
  for (int j = 0; j < n; ++j) wsum += weight(w, j);
  if (!(wsum > 0.0)) w = nullptr;  // no information (a dead input channel): plain least squares

  BlockFit best = reference_fit(c, x);
  double best_err = block_error(c, best, x, w);
  float amax = 0.0f, xm = 0.0f, lo = x[0], hi = x[0];
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      xm = x[j];
    }
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  if (amax == 0.0f) return best;
  if (c.type == GgmlType::MXFP4) {
    // Powers of two only: the reference exponent and its neighbours, each with
    // its nearest indices (a least-squares refit would leave the grid of scales).
    const BlockFit ref = best;
    for (float k : {0.25f, 0.5f, 2.0f}) {
      const BlockFit f{ref.d * k, 0.0f};
      if (!(f.d >= rows::mxfp4_scale(0) && f.d <= rows::mxfp4_scale(254))) continue;  // no E8M0 byte holds it
      const double e = block_error(c, f, x, w);
      if (e < best_err) {
        best_err = e;
        best = f;
      }
    }
    return best;
  }

  // Candidates stretch the extreme element to a little past or short of the
  // grid's end (clipping it buys resolution for the rest); each is refined by
  // least squares on its indices, then re-rounded once.
  constexpr int kSteps = 10;
  constexpr float kRel = 0.0125f;
  uint8_t q[256];
  auto consider = [&](BlockFit f) {
    assign(c, f, x, q);
    if (!refit(c, x, w, q, f)) return;
    const double e = block_error(c, f, x, w);
    if (e < best_err) {
      best_err = e;
      best = f;
    }
  };
  const float ends[2] = {c.grid[0], c.grid[c.grid.size() - 1]};
  for (int t = -kSteps; t <= kSteps; ++t) {
    const float stretch = 1.0f + kRel * static_cast<float>(t);
    if (c.affine) {
      if (hi > lo) consider({(hi - lo) / (ends[1] * stretch), lo});
      continue;
    }
    for (float end : ends)
      if (end != 0.0f) consider({xm / (end * stretch), 0.0f});
  }
  return best;
}

void store_block(const BlockCodec& c, const BlockFit& f, const uint8_t* q, void* block) {
  const uint16_t d = float_to_fp16(f.d), m = float_to_fp16(f.m);
  auto nibbles = [&](uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
  };
  auto high_bits = [&](uint8_t* qh) {
    uint32_t bits = 0;
    for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>(q[j] >> 4 & 1) << j;
    for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(bits >> (8 * i));
  };
  switch (c.type) {
    case GgmlType::Q4_0: {
      auto* b = static_cast<BlockQ4_0*>(block);
      b->d = d;
      nibbles(b->qs);
      break;
    }
    case GgmlType::Q4_1: {
      auto* b = static_cast<BlockQ4_1*>(block);
      b->d = d;
      b->m = m;
      nibbles(b->qs);
      break;
    }
    case GgmlType::Q5_0: {
      auto* b = static_cast<BlockQ5_0*>(block);
      b->d = d;
      high_bits(b->qh);
      nibbles(b->qs);
      break;
    }
    case GgmlType::Q5_1: {
      auto* b = static_cast<BlockQ5_1*>(block);
      b->d = d;
      b->m = m;
      high_bits(b->qh);
      nibbles(b->qs);
      break;
    }
    case GgmlType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(block);
      b->d = d;
      for (int j = 0; j < 32; ++j) b->qs[j] = static_cast<int8_t>(static_cast<int>(q[j]) - 127);
      break;
    }
    case GgmlType::IQ4_NL: {
      auto* b = static_cast<BlockIq4Nl*>(block);
      b->d = d;
      nibbles(b->qs);
      break;
    }
    case GgmlType::MXFP4: {
      auto* b = static_cast<BlockMxfp4*>(block);
      // d = 2^(e - 128) exactly (stored_scale); 0 only when every index is the zero's.
      b->e = f.d > 0.0f ? static_cast<uint8_t>(std::ilogb(f.d) + 128) : 0;
      for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(kMxfp4Code[q[j]] | kMxfp4Code[q[j + 16]] << 4);
      break;
    }
    default:
      break;
  }
}

void encode_row_weighted(const BlockCodec& c, const float* x, const float* w, void* dst, int64_t n) {
  const size_t block_bytes = traits(c.type)->block_bytes;
  uint8_t q[256];
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; i += c.block_elems, out += block_bytes) {
    const BlockFit f = fit_block(c, x + i, w ? w + i : nullptr);
    assign(c, f, x + i, q);
    store_block(c, f, q, out);
  }
}

bool supports_weighted(GgmlType type) {
  return block_codec(type) || type == GgmlType::Q2_K || type == GgmlType::Q3_K || type == GgmlType::Q4_K ||
         type == GgmlType::Q5_K || type == GgmlType::Q6_K;
}

bool encode_row_importance(GgmlType type, const float* x, const float* w, void* dst, int64_t n) {
  if (const BlockCodec* c = block_codec(type)) {
    encode_row_weighted(*c, x, w, dst, n);
    return true;
  }
  switch (type) {
    case GgmlType::Q2_K: rows::q2_k_from_float_weighted(x, w, dst, n); return true;
    case GgmlType::Q3_K: rows::q3_k_from_float_weighted(x, w, dst, n); return true;
    case GgmlType::Q4_K: rows::q4_k_from_float_weighted(x, w, dst, n); return true;
    case GgmlType::Q5_K: rows::q5_k_from_float_weighted(x, w, dst, n); return true;
    case GgmlType::Q6_K: rows::q6_k_from_float_weighted(x, w, dst, n); return true;
    default: return false;
  }
}

}  // namespace tern::quant
