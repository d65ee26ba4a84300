// quant/k_quantize.cpp — reference quantizers (from_float) of the K-quant super-blocks.
//
// Each follows ggml's quantize_row_*_K_ref (the path llama-quantize takes
// without an importance matrix) step for step, so that the same floats give the
// same bytes:
//   1. fit every sub-block on its own (a scale search, below) in f32;
//   2. quantize the sub-block scales (and mins) against the largest one with
//      6 bits (Q3_K..Q5_K), 4 bits (Q2_K) or 8 bits (Q6_K), storing the
//      super-scale as fp16;
//   3. re-choose every element's quant against the scales as stored (fp16 super
//      scale times integer sub-scale), so decoding sees what we optimised for;
//   4. pack (layouts in quant/k_blocks.h).
// The f32 expressions keep ggml's operand order; the library is compiled with
// -ffp-contract=off so no multiply-add is fused behind our back.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/k_blocks.h"
#include "quant/rows.h"
#include "quant/scalar_math.h"

namespace tern::quant::rows {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this a sub-block counts as all zero

// Element of largest magnitude (first on ties), with its sign.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// Asymmetric fit x ~ scale * L - min_out with L in 0..nmax and min_out >= 0,
// minimising sum(w * err^2) (or sum(w * |err|) with use_mad). Starts from the
// min/max grid, then tries nstep+1 grids of (nmax + rmin + rdelta*k) steps over
// [min, max], each followed by a closed-form weighted least-squares (scale, min)
// for its L; keeps the best. ggml's make_qkx2_quants. n <= 32.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out, float rmin,
                    float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -min;
    return 0.0f;
  }
  auto error_of = [&](const uint8_t* l, float scale, float offset) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      float diff = scale * static_cast<float>(l[i]) + offset - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      err += w[i] * diff;
    }
    return err;
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(clamp_int(round_nearest_even(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(L, scale, min);
  uint8_t trial[32];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(round_nearest_even(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float err = error_of(trial, this_scale, this_min);
    if (err < best_error) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_error = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Symmetric fit x ~ scale * (L - nmax), L in 0..2*nmax-1, weighted by x^2:
// least squares on the grid that maps the absmax element to -nmax, then 18
// grids with nmax +- 0.1*k steps, keeping the best. ggml's make_qx_quants with
// rmse_type 1 and no importance weights. n <= 16. With imp, the weights are
// imp[i] instead of x[i]^2 (importance-weighted rounding, quant/block_codec.h).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L, const float* imp = nullptr) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto sums_for = [&](float iscale, float* sum_lx, float* sum_l2) {
    *sum_lx = 0.0f;
    *sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(clamp_int(round_nearest_even(iscale * x[i]), -nmax, nmax - 1));
      const float w = imp ? imp[i] : x[i] * x[i];
      *sum_lx += w * x[i] * l;
      *sum_l2 += w * l * l;
    }
  };
  auto set_quants = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp_int(round_nearest_even(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sum_lx, sum_l2;
  sums_for(iscale, &sum_lx, &sum_l2);
  set_quants(iscale);
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums_for(iscale, &sum_lx, &sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      set_quants(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Symmetric 3-bit fit for Q3_K: start from the absmax grid (L in -nmax..nmax-1),
// then up to 5 passes of coordinate descent, moving one quant at a time to the
// value that best fits the least-squares scale of the others, weighted by x^2
// (by imp[i] when given: importance-weighted rounding).
// Returns the scale; L is stored offset by +nmax. ggml's make_q3_quants(do_rmse).
float fit_q3(int n, int nmax, const float* x, int8_t* L, const float* imp = nullptr) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(round_nearest_even(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = imp ? imp[i] : x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = imp ? imp[i] : x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sum_lx - w * x[i] * li;
      if (!(slx > 0.0f)) continue;
      float sl2 = sum_l2 - w * li * li;
      const int new_l = clamp_int(round_nearest_even(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      const float fl = static_cast<float>(new_l);
      slx += w * x[i] * fl;
      sl2 += w * fl * fl;
      if (sl2 > 0.0f && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sum_lx = slx;
        sum_l2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

// Four 2-bit fields per byte: element 128h + 32p + r goes to bits 2p of qs[32h + r].
void pack_two_bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 32; ++r) {
      const uint8_t* l = L + 128 * h + r;
      qs[32 * h + r] = static_cast<uint8_t>(l[0] | l[32] << 2 | l[64] << 4 | l[96] << 6);
    }
  }
}

// Q4_K/Q5_K: 8 six-bit scales and mins into 12 bytes (inverse of unpack_scale_min_k4).
void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      scales[s] = ls[s];
      scales[s + 4] = lm[s];
    } else {
      scales[s + 4] = static_cast<uint8_t>((ls[s] & 0x0f) | (lm[s] & 0x0f) << 4);
      scales[s - 4] = static_cast<uint8_t>(scales[s - 4] | (ls[s] >> 4) << 6);
      scales[s] = static_cast<uint8_t>(scales[s] | (lm[s] >> 4) << 6);
    }
  }
}

// True when imp carries information for these n elements (all-zero importance,
// a dead input channel, falls back to the reference weights).
bool has_importance(const float* imp, int n) {
  if (!imp) return false;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += imp[i];
  return sum > 0.0f;
}

// Steps 1-3 for Q4_K (nmax 15) and Q5_K (nmax 31): 8 sub-blocks of 32 with a
// weighted asymmetric fit (w = rms + |x|, or the importance imp when given),
// 6-bit scales and mins.
void quantize_q45_k(const float* x, int nmax, float rmin, int nstep, uint16_t* d16, uint16_t* dmin16,
                    uint8_t* scales, uint8_t* L, const float* imp) {
  float sub_scale[8], sub_min[8], w[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + 32 * s;
    float sum_x2 = 0.0f;
    for (int i = 0; i < 32; ++i) sum_x2 += xs[i] * xs[i];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    const bool weighted = has_importance(imp ? imp + 32 * s : nullptr, 32);
    for (int i = 0; i < 32; ++i) w[i] = weighted ? imp[32 * s + i] : av_x + std::fabs(xs[i]);
    sub_scale[s] = fit_scale_min(32, nmax, xs, w, L + 32 * s, &sub_min[s], rmin, 0.1f, nstep, false);
    if (sub_scale[s] > max_scale) max_scale = sub_scale[s];
    if (sub_min[s] > max_min) max_min = sub_min[s];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int s = 0; s < 8; ++s) {
    ls[s] = static_cast<uint8_t>(clamp_int(round_nearest_even(inv_scale * sub_scale[s]), 0, 63));
    lm[s] = static_cast<uint8_t>(clamp_int(round_nearest_even(inv_min * sub_min[s]), 0, 63));
  }
  pack_scale_min_k4(ls, lm, scales);
  *d16 = float_to_fp16(max_scale / 63.0f);
  *dmin16 = float_to_fp16(max_min / 63.0f);
  const float d_all = fp16_to_float(*d16), dmin_all = fp16_to_float(*dmin16);
  for (int s = 0; s < 8; ++s) {
    const float d = d_all * static_cast<float>(ls[s]);
    if (d == 0.0f) continue;  // keep the fit's quants (they decode to -min anyway)
    const float dm = dmin_all * static_cast<float>(lm[s]);
    for (int i = 32 * s; i < 32 * (s + 1); ++i) {
      L[i] = static_cast<uint8_t>(clamp_int(round_nearest_even((x[i] + dm) / d), 0, nmax));
    }
  }
}

// imp: importance per element (importance-weighted rounding): a sub-block
// with it is fitted by weighted least squares; without it (or all zero), by
// ggml's |x|-weighted absolute error.
void quantize_block(const float* x, BlockQ2_K* b, const float* imp = nullptr) {
  uint8_t L[kQK_K];
  float sub_scale[16], sub_min[16], w[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 16; ++s) {
    const bool weighted = has_importance(imp ? imp + 16 * s : nullptr, 16);
    for (int i = 0; i < 16; ++i) w[i] = weighted ? imp[16 * s + i] : std::fabs(x[16 * s + i]);
    sub_scale[s] = fit_scale_min(16, 3, x + 16 * s, w, L + 16 * s, &sub_min[s], -0.5f, 0.1f, 15, !weighted);
    if (sub_scale[s] > max_scale) max_scale = sub_scale[s];
    if (sub_min[s] > max_min) max_min = sub_min[s];
  }
  // 4-bit scale (low nibble) and min (high nibble) relative to the largest of each.
  std::memset(b->scales, 0, sizeof(b->scales));
  b->d = float_to_fp16(0.0f);
  b->dmin = float_to_fp16(0.0f);
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<uint8_t>(clamp_int(round_nearest_even(iscale * sub_scale[s]), 0, 15));
    b->d = float_to_fp16(max_scale / 15.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int s = 0; s < 16; ++s) {
      b->scales[s] = static_cast<uint8_t>(b->scales[s] | clamp_int(round_nearest_even(iscale * sub_min[s]), 0, 15) << 4);
    }
    b->dmin = float_to_fp16(max_min / 15.0f);
  }
  const float d_all = fp16_to_float(b->d), dmin_all = fp16_to_float(b->dmin);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(b->scales[s] & 0x0f);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(b->scales[s] >> 4);
    for (int i = 16 * s; i < 16 * (s + 1); ++i) L[i] = static_cast<uint8_t>(clamp_int(round_nearest_even((x[i] + dm) / d), 0, 3));
  }
  pack_two_bit(L, b->qs);
}

void quantize_block(const float* x, BlockQ3_K* b, const float* imp = nullptr) {
  int8_t L[kQK_K];
  float sub_scale[16];
  float amax = 0.0f, max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    const float* w = has_importance(imp ? imp + 16 * s : nullptr, 16) ? imp + 16 * s : nullptr;
    sub_scale[s] = fit_q3(16, 4, x + 16 * s, L + 16 * s, w);
    if (std::fabs(sub_scale[s]) > amax) {
      amax = std::fabs(sub_scale[s]);
      max_scale = sub_scale[s];
    }
  }
  // Signed 6-bit scales, offset by 32; the largest-magnitude one maps to -32.
  std::memset(b->scales, 0, sizeof(b->scales));
  b->d = float_to_fp16(0.0f);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int s = 0; s < 16; ++s) {
      const int l = clamp_int(round_nearest_even(iscale * sub_scale[s]), -32, 31) + 32;
      if (s < 8) {
        b->scales[s] = static_cast<uint8_t>(l & 0x0f);
      } else {
        b->scales[s - 8] = static_cast<uint8_t>(b->scales[s - 8] | (l & 0x0f) << 4);
      }
      b->scales[8 + s % 4] = static_cast<uint8_t>(b->scales[8 + s % 4] | (l >> 4) << (2 * (s / 4)));
    }
    b->d = float_to_fp16(1.0f / iscale);
  }
  const float d_all = fp16_to_float(b->d);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(unpack_scale_q3_k(b->scales, s));
    if (d == 0.0f) continue;
    for (int i = 16 * s; i < 16 * (s + 1); ++i) L[i] = static_cast<int8_t>(clamp_int(round_nearest_even(x[i] / d), -4, 3) + 4);
  }
  // Quants 0..7: bit 2 goes to hmask[e % 32] bit e / 32, bits 0-1 to qs.
  uint8_t low[kQK_K];
  std::memset(b->hmask, 0, sizeof(b->hmask));
  for (int e = 0; e < kQK_K; ++e) {
    if (L[e] > 3) b->hmask[e % 32] = static_cast<uint8_t>(b->hmask[e % 32] | 1 << (e / 32));
    low[e] = static_cast<uint8_t>(L[e] & 3);
  }
  pack_two_bit(low, b->qs);
}

void quantize_block(const float* x, BlockQ4_K* b, const float* imp = nullptr) {
  uint8_t L[kQK_K];
  quantize_q45_k(x, 15, -1.0f, 20, &b->d, &b->dmin, b->scales, L, imp);
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < 32; ++r) b->qs[32 * c + r] = static_cast<uint8_t>(L[64 * c + r] | L[64 * c + 32 + r] << 4);
  }
}

void quantize_block(const float* x, BlockQ5_K* b, const float* imp = nullptr) {
  uint8_t L[kQK_K];
  quantize_q45_k(x, 31, -0.5f, 15, &b->d, &b->dmin, b->scales, L, imp);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < 32; ++r) {
      const int lo = L[64 * c + r], hi = L[64 * c + 32 + r];
      b->qs[32 * c + r] = static_cast<uint8_t>((lo & 0x0f) | (hi & 0x0f) << 4);
      b->qh[r] = static_cast<uint8_t>(b->qh[r] | (lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
  }
}

void quantize_block(const float* x, BlockQ6_K* b, const float* imp = nullptr) {
  int8_t L[kQK_K];
  float sub_scale[16];
  float amax = 0.0f, max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    const float* w = has_importance(imp ? imp + 16 * s : nullptr, 16) ? imp + 16 * s : nullptr;
    sub_scale[s] = fit_symmetric(16, 32, x + 16 * s, L + 16 * s, w);
    if (std::fabs(sub_scale[s]) > amax) {
      amax = std::fabs(sub_scale[s]);
      max_scale = sub_scale[s];
    }
  }
  std::memset(b, 0, sizeof(*b));
  if (amax < kGroupMaxEps) return;  // all zero: d = 0
  // Signed 8-bit scales; the largest-magnitude one maps to -128.
  const float iscale = -128.0f / max_scale;
  b->d = float_to_fp16(1.0f / iscale);
  for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<int8_t>(clamp_int(round_nearest_even(iscale * sub_scale[s]), -128, 127));
  const float d_all = fp16_to_float(b->d);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(b->scales[s]);
    if (d == 0.0f) continue;
    for (int i = 16 * s; i < 16 * (s + 1); ++i) L[i] = static_cast<int8_t>(clamp_int(round_nearest_even(x[i] / d), -32, 31) + 32);
  }
  // Element 128h + 32p + r: low nibble to ql[64h + 32(p&1) + r] (nibble p>>1), top 2 bits to qh[32h + r] bits 2p.
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, p = (e % 128) / 32, r = e % 32;
    const int q = L[e];
    uint8_t& ql = b->ql[64 * h + 32 * (p & 1) + r];
    ql = static_cast<uint8_t>(ql | (q & 0x0f) << (4 * (p >> 1)));
    b->qh[32 * h + r] = static_cast<uint8_t>(b->qh[32 * h + r] | (q >> 4) << (2 * p));
  }
}

// Q8_K: the absmax element maps to -127 (so q stays in -127..127), d = 1 / iscale in f32.
void quantize_block(const float* x, BlockQ8_K* b) {
  std::memset(b, 0, sizeof(*b));
  const float max = signed_absmax(x, kQK_K);
  if (max == 0.0f) return;
  const float iscale = -127.0f / max;
  for (int e = 0; e < kQK_K; ++e) b->qs[e] = static_cast<int8_t>(clamp_int(round_nearest_even(iscale * x[e]), -128, 127));
  for (int s = 0; s < 16; ++s) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b->qs[16 * s + i];
    b->bsums[s] = static_cast<int16_t>(sum);
  }
  b->d = 1.0f / iscale;
}

template <class Block>
void from_float_rows(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) quantize_block(src + i * kQK_K, b + i);
}

}  // namespace

void q2_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ2_K>(src, dst, n); }
void q3_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ3_K>(src, dst, n); }
void q4_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ4_K>(src, dst, n); }
void q5_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ5_K>(src, dst, n); }
void q6_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ6_K>(src, dst, n); }
void q8_k_from_float(const float* src, void* dst, int64_t n) { from_float_rows<BlockQ8_K>(src, dst, n); }

namespace {
template <class Block>
void weighted_rows(const float* src, const float* imp, void* dst, int64_t n) {
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) quantize_block(src + i * kQK_K, b + i, imp + i * kQK_K);
}
}  // namespace

void q2_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n) {
  weighted_rows<BlockQ2_K>(src, imp, dst, n);
}
void q3_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n) {
  weighted_rows<BlockQ3_K>(src, imp, dst, n);
}
void q4_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n) {
  weighted_rows<BlockQ4_K>(src, imp, dst, n);
}
void q5_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n) {
  weighted_rows<BlockQ5_K>(src, imp, dst, n);
}
void q6_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n) {
  weighted_rows<BlockQ6_K>(src, imp, dst, n);
}

}  // namespace tern::quant::rows
