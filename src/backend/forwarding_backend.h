// backend/forwarding_backend.h — a backend that hands every call to another
// one. Decorators derive from it and override only the ops they watch or
// change: calibration records matmul inputs (engine/calibrate.cpp), the
// tests' faulty backend breaks one op on purpose.
#pragma once

#include <memory>
#include <utility>

#include "backend/backend.h"

namespace tern::backend {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {}

  BackendKind kind() const override { return inner_->kind(); }
  int n_threads() const override { return inner_->n_threads(); }
  void prepare_matrix(kernels::WeightView& w) override { inner_->prepare_matrix(w); }
  const float* upload(std::span<const float> v) override { return inner_->upload(v); }
  uint64_t prepared_bytes() const override { return inner_->prepared_bytes(); }
  std::vector<std::span<const uint8_t>> packed_sources() const override { return inner_->packed_sources(); }
  std::vector<std::span<const uint8_t>> packed_buffers() const override { return inner_->packed_buffers(); }
  float* scratch(Slot slot, int64_t n) override { return inner_->scratch(slot, n); }
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
  }
  void matmul_group(std::span<const MatmulJob> jobs, const float* x, int64_t n_rows) override {
    inner_->matmul_group(jobs, x, n_rows);
  }
  void matmul_experts(std::span<const ExpertJob> jobs) override { inner_->matmul_experts(jobs); }
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override { inner_->add_bias(x, bias, n_rows, n); }
  void add(float* x, const float* y, int64_t n_rows, int64_t n) override { inner_->add(x, y, n_rows, n); }
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    inner_->rope(x, n_rows, n_heads, head_dim, positions, p);
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override { inner_->swiglu(gate, up, n_rows, n); }
  void geglu(float* gate, const float* up, int64_t n_rows, int64_t n) override { inner_->geglu(gate, up, n_rows, n); }
  void softcap(float* x, int64_t n_rows, int64_t n, float cap) override { inner_->softcap(x, n_rows, n, cap); }
  void scale(float* x, int64_t n_rows, int64_t n, float s) override { inner_->scale(x, n_rows, n, s); }
  void store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                const float* v) override {
    inner_->store_kv(pool, layer, slots, k, v);
  }
  void copy_kv(const KvPoolView& pool, std::span<const int64_t> src, std::span<const int64_t> dst) override {
    inner_->copy_kv(pool, src, dst);
  }
  void attention(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q, float* out) override {
    inner_->attention(shape, in, q, out);
  }
  void gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) override {
    inner_->gather_rows(x, rows, out, n);
  }
  void scatter_add(const float* y, std::span<const int32_t> rows, std::span<const float> weights, float* out,
                   int64_t n) override {
    inner_->scatter_add(y, rows, weights, out, n);
  }
  void zero(float* x, int64_t n_rows, int64_t n) override { inner_->zero(x, n_rows, n); }
  void mul(float* x, const float* w, int64_t n_rows, int64_t n) override { inner_->mul(x, w, n_rows, n); }
  void relu_sqr(float* x, int64_t n_rows, int64_t n) override { inner_->relu_sqr(x, n_rows, n); }
  void ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x, int64_t x_stride,
                const float* w, const float* bias, float* out) override {
    inner_->ssm_conv(dims, runs, x, x_stride, w, bias, out);
  }
  void ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                float* y) override {
    inner_->ssm_scan(dims, runs, in, y);
  }

 protected:
  Backend& inner() const { return *inner_; }

 private:
  std::shared_ptr<Backend> inner_;
};

}  // namespace tern::backend
