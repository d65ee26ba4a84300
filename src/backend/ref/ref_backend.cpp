#include "backend/ref/ref_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "backend/attention_blocks.h"
#include "backend/host_backend.h"
#include "kernels/ref/ssm_reference.h"

namespace tern::backend {
namespace {

struct RopeAngle {
  double theta;   // rotation angle
  double mscale;  // magnitude both rotated values are scaled by (YaRN's attention factor)
};

// Angle of rotation pair `pair` at `pos`, as llama.cpp defines it:
//   extrapolated  theta_e = pos * base^(-2 pair / n_rot) / freq_factors[pair]
//                 (the factor 1 when there are none)
//   interpolated  theta_i = freq_scale * theta_e              (linear scaling)
// YaRN blends the two per pair: a pair that turns more than beta_fast times
// over the original context keeps theta_e, one that turns fewer than
// beta_slow times takes theta_i, with a linear ramp between the pair indices
//   d(turns) = n_rot * ln(orig_ctx / (2 pi turns)) / (2 ln base)
// (floor for beta_fast, ceil for beta_slow), and scales magnitudes by
// attn_factor * (1 + 0.1 ln(1 / freq_scale)).
RopeAngle rope_angle(const kernels::RopeParams& p, int pair, int32_t pos) {
  const double base = p.freq_base;
  const double factor = p.freq_factors ? p.freq_factors[pair] : 1.0;
  const double theta_e = pos * std::pow(base, -2.0 * pair / p.n_rot) / factor;
  const double theta_i = p.freq_scale * theta_e;
  if (p.yarn_orig_ctx <= 0 || p.yarn_ext_factor == 0.0f) return {theta_i, p.yarn_attn_factor};
  const auto pair_turning = [&](double turns) {
    return p.n_rot * std::log(p.yarn_orig_ctx / (2.0 * std::numbers::pi * turns)) / (2.0 * std::log(base));
  };
  const double lo = std::max(0.0, std::floor(pair_turning(p.yarn_beta_fast)));
  const double hi = std::min(p.n_rot - 1.0, std::ceil(pair_turning(p.yarn_beta_slow)));
  const double keep_extrap = (1.0 - std::clamp((pair - lo) / std::max(0.001, hi - lo), 0.0, 1.0)) * p.yarn_ext_factor;
  return {theta_i + (theta_e - theta_i) * keep_extrap,
          p.yarn_attn_factor * (1.0 + 0.1 * std::log(1.0 / p.freq_scale))};
}

class RefBackend final : public HostBackend {
 public:
  BackendKind kind() const override { return BackendKind::Ref; }
  int n_threads() const override { return 1; }

  void prepare_matrix(kernels::WeightView&) override {}
  const float* upload(std::span<const float> v) override { return v.data(); }
  uint64_t prepared_bytes() const override { return 0; }

  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    for (int64_t t = 0; t < n_rows; ++t) {
      const float* xr = x + t * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
      for (int64_t i = 0; i < n; ++i) y[t * n + i] = static_cast<float>(xr[i] * scale * weight[i]);
    }
  }
  void matmul(const kernels::WeightView& w, const float* x, float* y, int64_t n_rows) override {
    // Each weight row dequantized with its type's own reference decoder.
    row_.resize(static_cast<size_t>(w.n_cols));
    for (int64_t r = 0; r < w.n_rows; ++r) {
      w.traits->to_float(w.row(r), row_.data(), w.n_cols);
      if (w.row_scale)
        for (float& v : row_) v *= w.row_scale[r];
      for (int64_t t = 0; t < n_rows; ++t) {
        const float* xr = x + t * w.n_cols;
        double acc = 0;
        for (int64_t i = 0; i < w.n_cols; ++i) acc += static_cast<double>(row_[i]) * xr[i];
        y[t * w.n_rows + r] = static_cast<float>(acc);
      }
    }
  }
  void matmul_group(std::span<const MatmulJob> jobs, const float* x, int64_t n_rows) override {
    for (const MatmulJob& j : jobs) matmul(*j.w, x, j.y, n_rows);
  }
  void matmul_experts(std::span<const ExpertJob> jobs) override {
    for (const ExpertJob& j : jobs) matmul(*j.w, j.x, j.y, j.n_rows);
  }
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override {
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t i = 0; i < n; ++i) x[t * n + i] += bias[i];
  }
  void add(float* x, const float* y, int64_t n_rows, int64_t n) override {
    for (int64_t i = 0; i < n_rows * n; ++i) x[i] += y[i];
  }
  // Its own double-precision angles rather than kernels::rope, so that the
  // CPU backend's f32 rotation is checked against something it does not share.
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    const int64_t n = static_cast<int64_t>(n_heads) * head_dim;
    const int half = p.n_rot / 2;
    for (int64_t t = 0; t < n_rows; ++t) {
      for (int pair = 0; pair < half; ++pair) {
        const RopeAngle a = rope_angle(p, pair, positions[t]);
        // Normal rotates neighbours (2i, 2i+1); NeoX pairs the two halves (i, i + n_rot/2).
        const int i0 = p.layout == kernels::RopeLayout::NeoX ? pair : 2 * pair;
        const int i1 = p.layout == kernels::RopeLayout::NeoX ? pair + half : 2 * pair + 1;
        for (int h = 0; h < n_heads; ++h) {
          float* head = x + t * n + static_cast<int64_t>(h) * head_dim;
          const double u = head[i0], w = head[i1];
          head[i0] = static_cast<float>(a.mscale * (u * std::cos(a.theta) - w * std::sin(a.theta)));
          head[i1] = static_cast<float>(a.mscale * (u * std::sin(a.theta) + w * std::cos(a.theta)));
        }
      }
    }
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    kernels::swiglu_reference(gate, up, n_rows * n);
  }
  void geglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    kernels::geglu_reference(gate, up, n_rows * n);
  }
  void ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x, int64_t x_stride,
                const float* w, const float* bias, float* out) override {
    for (const SsmRun& r : runs) kernels::ssm_conv_reference(ssm_conv_args(dims, r, x, x_stride, w, bias, out));
  }
  void ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                float* y) override {
    for (const SsmRun& r : runs) kernels::ssm_scan_reference(ssm_scan_args(dims, r, in, y));
  }
  void softcap(float* x, int64_t n_rows, int64_t n, float cap) override {
    kernels::softcap_reference(x, n_rows * n, cap);
  }
  // The product and sum in double, rounded once.
  void scatter_add(const float* y, std::span<const int32_t> rows, std::span<const float> weights, float* out,
                   int64_t n) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      float* o = out + static_cast<int64_t>(rows[i]) * n;
      const float* yr = y + static_cast<int64_t>(i) * n;
      for (int64_t j = 0; j < n; ++j)
        o[j] = static_cast<float>(static_cast<double>(o[j]) + static_cast<double>(weights[i]) * yr[j]);
    }
  }
  void attention(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q, float* out) override {
    build_attention_blocks(shape, in, q, out, blocks_);
    kernels::attention_reference(shape, blocks_);
    add_attention_mass(shape, in, blocks_);
  }

 private:
  std::vector<float> row_;
  std::vector<kernels::QueryBlock> blocks_;
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace tern::backend
