#include "backend/ref/ref_backend.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/attention_blocks.h"
#include "backend/host_backend.h"

namespace tern::backend {
namespace {

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
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override {
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t i = 0; i < n; ++i) x[t * n + i] += bias[i];
  }
  void add(float* x, const float* y, int64_t n_rows, int64_t n) override {
    for (int64_t i = 0; i < n_rows * n; ++i) x[i] += y[i];
  }
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    const int64_t n = static_cast<int64_t>(n_heads) * head_dim;
    for (int64_t t = 0; t < n_rows; ++t) kernels::rope(x + t * n, n_heads, head_dim, positions[t], p);
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    kernels::swiglu_reference(gate, up, n_rows * n);
  }
  void attention(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q, float* out) override {
    build_attention_blocks(shape, in, q, out, blocks_);
    kernels::attention_reference(shape, blocks_);
  }

 private:
  std::vector<float> row_;
  std::vector<kernels::QueryBlock> blocks_;
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace tern::backend
