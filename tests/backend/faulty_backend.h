// A test-only backend: the reference backend with one op deliberately wrong,
// to show that the backend comparisons catch a wrong op (a comparison that
// passes whatever the backend does proves nothing). It wraps rather than
// derives because the reference backend's class is private to its file; every
// call goes to the wrapped backend unchanged (backend/forwarding_backend.h)
// except the faulty one.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backend/forwarding_backend.h"

namespace tern::test {

enum class Fault {
  None,             // a faithful wrapper: the control
  RopeNormalPairs,  // always pairs (2i, 2i+1), ignoring NeoX
  RopeFullRotary,   // rotates every dim of a head, ignoring rope.dimension_count
  NoWindow,         // attention ignores the sliding window
  NoBias,           // add_bias does nothing
  SiluOnly,         // swiglu forgets to multiply by up
  MatmulDropsRow,   // the last output row of every matmul is left zero
};

class FaultyBackend final : public backend::ForwardingBackend {
 public:
  FaultyBackend(std::unique_ptr<backend::Backend> inner, Fault fault)
      : ForwardingBackend(std::move(inner)), fault_(fault) {}

  void matmul(const kernels::WeightView& w, const float* x, float* y, int64_t n_rows) override {
    inner().matmul(w, x, y, n_rows);
    if (fault_ == Fault::MatmulDropsRow)
      for (int64_t t = 0; t < n_rows; ++t) y[(t + 1) * w.n_rows - 1] = 0.0f;
  }
  void matmul_group(std::span<const backend::MatmulJob> jobs, const float* x, int64_t n_rows) override {
    for (const backend::MatmulJob& j : jobs) matmul(*j.w, x, j.y, n_rows);
  }
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override {
    if (fault_ != Fault::NoBias) inner().add_bias(x, bias, n_rows, n);
  }
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    kernels::RopeParams q = p;
    if (fault_ == Fault::RopeNormalPairs) q.layout = kernels::RopeLayout::Normal;
    if (fault_ == Fault::RopeFullRotary) q.n_rot = head_dim;
    inner().rope(x, n_rows, n_heads, head_dim, positions, q);
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    if (fault_ != Fault::SiluOnly) return inner().swiglu(gate, up, n_rows, n);
    std::vector<float> ones(static_cast<size_t>(n_rows * n), 1.0f);
    inner().swiglu(gate, ones.data(), n_rows, n);
  }
  void attention(const kernels::AttentionShape& shape, const backend::AttentionInput& in, const float* q,
                 float* out) override {
    kernels::AttentionShape s = shape;
    if (fault_ == Fault::NoWindow) s.sliding_window = 0;
    inner().attention(s, in, q, out);
  }

 private:
  Fault fault_;
};

}  // namespace tern::test
