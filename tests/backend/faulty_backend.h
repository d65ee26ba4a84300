// A test-only backend: the reference backend with one op deliberately wrong,
// to show that the backend comparisons catch a wrong op (a comparison that
// passes whatever the backend does proves nothing). It wraps rather than
// derives because the reference backend's class is private to its file; every
// call goes to the wrapped backend unchanged except the faulty one.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"

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

class FaultyBackend final : public backend::Backend {
 public:
  FaultyBackend(std::unique_ptr<backend::Backend> inner, Fault fault) : inner_(std::move(inner)), fault_(fault) {}

  backend::BackendKind kind() const override { return inner_->kind(); }
  int n_threads() const override { return inner_->n_threads(); }
  void prepare_matrix(kernels::WeightView& w) override { inner_->prepare_matrix(w); }
  const float* upload(std::span<const float> v) override { return inner_->upload(v); }
  uint64_t prepared_bytes() const override { return inner_->prepared_bytes(); }
  float* scratch(backend::Slot slot, int64_t n) override { return inner_->scratch(slot, n); }
  void trim() override { inner_->trim(); }
  void to_host(const float* src, float* dst, int64_t n) override { inner_->to_host(src, dst, n); }
  void embed(const kernels::WeightView& table, std::span<const TokenId> tokens, float* x) override {
    inner_->embed(table, tokens, x);
  }
  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    inner_->rms_norm(x, weight, y, n_rows, n, eps);
  }
  void matmul(const kernels::WeightView& w, const float* x, float* y, int64_t n_rows) override {
    inner_->matmul(w, x, y, n_rows);
    if (fault_ == Fault::MatmulDropsRow)
      for (int64_t t = 0; t < n_rows; ++t) y[(t + 1) * w.n_rows - 1] = 0.0f;
  }
  void matmul_group(std::span<const backend::MatmulJob> jobs, const float* x, int64_t n_rows) override {
    for (const backend::MatmulJob& j : jobs) matmul(*j.w, x, j.y, n_rows);
  }
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override {
    if (fault_ != Fault::NoBias) inner_->add_bias(x, bias, n_rows, n);
  }
  void add(float* x, const float* y, int64_t n_rows, int64_t n) override { inner_->add(x, y, n_rows, n); }
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    kernels::RopeParams q = p;
    if (fault_ == Fault::RopeNormalPairs) q.layout = kernels::RopeLayout::Normal;
    if (fault_ == Fault::RopeFullRotary) q.n_rot = head_dim;
    inner_->rope(x, n_rows, n_heads, head_dim, positions, q);
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    if (fault_ != Fault::SiluOnly) return inner_->swiglu(gate, up, n_rows, n);
    std::vector<float> ones(static_cast<size_t>(n_rows * n), 1.0f);
    inner_->swiglu(gate, ones.data(), n_rows, n);
  }
  void geglu(float* gate, const float* up, int64_t n_rows, int64_t n) override { inner_->geglu(gate, up, n_rows, n); }
  void softcap(float* x, int64_t n_rows, int64_t n, float cap) override { inner_->softcap(x, n_rows, n, cap); }
  void scale(float* x, int64_t n_rows, int64_t n, float s) override { inner_->scale(x, n_rows, n, s); }
  void store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                const float* v) override {
    inner_->store_kv(pool, layer, slots, k, v);
  }
  void attention(const kernels::AttentionShape& shape, const backend::AttentionInput& in, const float* q,
                 float* out) override {
    kernels::AttentionShape s = shape;
    if (fault_ == Fault::NoWindow) s.sliding_window = 0;
    inner_->attention(s, in, q, out);
  }
  void gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) override {
    inner_->gather_rows(x, rows, out, n);
  }
  void scatter_add(const float* y, std::span<const int32_t> rows, std::span<const float> weights, float* out,
                   int64_t n) override {
    inner_->scatter_add(y, rows, weights, out, n);
  }
  void zero(float* x, int64_t n_rows, int64_t n) override { inner_->zero(x, n_rows, n); }
  void matmul_experts(std::span<const backend::ExpertJob> jobs) override { inner_->matmul_experts(jobs); }

 private:
  std::unique_ptr<backend::Backend> inner_;
  Fault fault_;
};

}  // namespace tern::test
