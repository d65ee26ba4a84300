// backend/host_backend.h — what every backend computing in host memory does
// the same way: scratch buffers, copies out, embedding rows, KV stores and
// row gathers. The CPU and reference backends derive from it and differ only
// in their arithmetic.
#pragma once

#include <array>
#include <vector>

#include "backend/backend.h"

namespace tern::backend {

class HostBackend : public Backend {
 public:
  float* scratch(Slot slot, int64_t n) override;
  // Gives back scratch over 32 MiB in all (a long prompt's), so a server's
  // resident memory stays file + KV cache + a few MiB; re-growing costs ~1%
  // of such a pass in page faults.
  void trim() override;
  void to_host(const float* src, float* dst, int64_t n) override;
  void embed(const kernels::WeightView& table, std::span<const TokenId> tokens, float* x) override;
  void store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                const float* v) override;
  void copy_kv(const KvPoolView& pool, std::span<const int64_t> src, std::span<const int64_t> dst) override;
  void gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) override;
  void scale(float* x, int64_t n_rows, int64_t n, float s) override;
  void zero(float* x, int64_t n_rows, int64_t n) override;
  void mul(float* x, const float* w, int64_t n_rows, int64_t n) override;
  void relu_sqr(float* x, int64_t n_rows, int64_t n) override;
  // The best level's kernels (kernels/ssm.h), run by run on the calling thread.
  void ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x, int64_t x_stride,
                const float* w, const float* bias, float* out) override;
  void ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                float* y) override;

 private:
  std::array<std::vector<float>, static_cast<size_t>(Slot::Count)> scratch_;
};

// One run's kernel arguments, its rows of the pass's buffers.
kernels::SsmConvArgs ssm_conv_args(const kernels::SsmDims& dims, const SsmRun& r, const float* x, int64_t x_stride,
                                   const float* w, const float* bias, float* out);
kernels::SsmScanArgs ssm_scan_args(const kernels::SsmDims& dims, const SsmRun& r, const SsmScanInput& in, float* y);

}  // namespace tern::backend
