#include "kernels/matmul_test_util.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "quant/quant.h"

namespace tern::kernels::testing {

using gguf::GgmlType;

Problem make_problem(GgmlType type, int64_t n, int64_t n_rows, int64_t n_cols, uint32_t seed, size_t pad_bytes) {
  const quant::TypeTraits* tr = quant::traits(type);
  Problem p;
  p.type = type;
  p.n = n;
  p.n_rows = n_rows;
  p.n_cols = n_cols;
  p.w_stride = quant::row_bytes(*tr, n) + pad_bytes;
  p.w.assign(p.w_stride * n_rows, 0xA5);  // padding bytes are garbage on purpose
  p.w_f32.resize(n * n_rows);
  p.x.resize(n * n_cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  std::vector<float> row(n);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float scale = std::exp2(static_cast<float>(static_cast<int>(uni(rng) * 8.0f) - 4));  // 1/16 .. 8
    const float shift = (r % 3 == 2) ? 0.5f * scale : 0.0f;  // some rows off-centre (asymmetric types)
    for (auto& v : row) v = normal(rng) * scale + shift;
    if (n > 8) row[static_cast<size_t>(uni(rng) * n) % n] *= 6.0f;  // an outlier
    if (tr->from_float)
      tr->from_float(row.data(), p.w.data() + r * p.w_stride, n);
    else  // codes of a row-scaled type (FP8): the kernels see the codes, the driver applies the scale
      quant::quantize_row_scaled(type, row.data(), n, p.w.data() + r * p.w_stride);
    tr->to_float(p.w.data() + r * p.w_stride, p.w_f32.data() + r * n, n);
  }
  for (int64_t c = 0; c < n_cols; ++c) {
    const float scale = std::exp2(static_cast<float>(static_cast<int>(uni(rng) * 6.0f) - 3));
    for (int64_t j = 0; j < n; ++j) p.x[c * n + j] = normal(rng) * scale;
    if (c % 4 == 3 && n >= 32) std::fill(p.x.begin() + c * n, p.x.begin() + c * n + 32, 0.0f);  // a zero block
  }
  return p;
}

std::vector<float> reference(const Problem& p) {
  const quant::TypeTraits* tr = quant::traits(p.type);
  std::vector<float> y(p.n_rows * p.n_cols);
  for (int64_t c = 0; c < p.n_cols; ++c)
    for (int64_t r = 0; r < p.n_rows; ++r)
      y[c * p.n_rows + r] = tr->vec_dot(p.w.data() + r * p.w_stride, p.x.data() + c * p.n, p.n);
  return y;
}

double budget(const Problem& p, GgmlType act_type, int64_t r, int64_t c) {
  const float* w = p.w_f32.data() + r * p.n;
  const float* x = p.x.data() + c * p.n;
  const int64_t wblock = quant::traits(p.type)->block_elems;
  const int64_t xblock = act_type == GgmlType::Q8_K ? 256 : 32;
  // A_j / 2: the largest |w| of the weight block holding j.
  std::vector<double> wmax(p.n);
  for (int64_t b0 = 0; b0 < p.n; b0 += wblock) {
    double m = 0.0;
    for (int64_t i = b0; i < std::min(p.n, b0 + wblock); ++i) m = std::max(m, std::fabs(double(w[i])));
    for (int64_t i = b0; i < std::min(p.n, b0 + wblock); ++i) wmax[i] = m;
  }
  double act = 0.0, mins = 0.0, mag = 0.0;
  for (int64_t b0 = 0; b0 < p.n; b0 += xblock) {
    const int64_t b1 = std::min(p.n, b0 + xblock);
    double amax = 0.0, sum_abs = 0.0, block_wmax = 0.0;
    for (int64_t j = b0; j < b1; ++j) {
      amax = std::max(amax, std::fabs(double(x[j])));
      sum_abs += std::fabs(double(x[j]));
      block_wmax = std::max(block_wmax, std::fabs(double(w[j])));
    }
    for (int64_t j = b0; j < b1; ++j) {
      double e = 0.0;
      switch (act_type) {
        case GgmlType::Q8_0:
        case GgmlType::Q8_1: e = 0.57 * amax / 127.0; break;
        case GgmlType::Q8_K: e = 0.51 * amax / 127.0; break;
        case GgmlType::BF16: e = std::ldexp(std::fabs(double(x[j])), -8); break;
        default: break;
      }
      act += std::fabs(double(w[j])) * e;
      mag += 2.0 * wmax[j] * (std::fabs(double(x[j])) + e);
    }
    // |m| <= largest |w| of the block (q = 0 decodes to m).
    if (act_type == GgmlType::Q8_1) mins += block_wmax * std::ldexp(sum_abs + 32.0 * amax / 127.0, -10);
  }
  return act + mins + double(p.n + 256) * std::ldexp(mag, -24);
}

std::vector<double> budgets(const Problem& p, GgmlType act_type) {
  std::vector<double> b(p.n_rows * p.n_cols);
  for (int64_t c = 0; c < p.n_cols; ++c)
    for (int64_t r = 0; r < p.n_rows; ++r) b[c * p.n_rows + r] = budget(p, act_type, r, c);
  return b;
}

std::vector<uint8_t> quantize_activations(const MatmulKernels& k, const Problem& p, size_t x_stride) {
  std::vector<uint8_t> xq(x_stride * p.n_cols, 0x5A);
  for (int64_t c = 0; c < p.n_cols; ++c) k.quantize_act(p.x.data() + c * p.n, xq.data() + c * x_stride, p.n);
  return xq;
}

bool adds_integer_instructions_only(CpuLevel level) {
  return level == CpuLevel::NeonDot || level == CpuLevel::NeonI8mm;
}

std::vector<CpuLevel> available_levels() {
  std::vector<CpuLevel> levels;
  for (CpuLevel l : all_cpu_levels())
    if (cpu_supports(l)) levels.push_back(l);
  return levels;
}

}  // namespace tern::kernels::testing
