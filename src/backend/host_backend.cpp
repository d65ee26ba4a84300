#include "backend/host_backend.h"

#include <cstring>

#include "core/assert.h"
#include "core/kv_format.h"

namespace tern::backend {

float* HostBackend::scratch(Slot slot, int64_t n) {
  std::vector<float>& b = scratch_[static_cast<size_t>(slot)];
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return b.data();
}

void HostBackend::trim() {
  constexpr size_t kKeepBytes = size_t{32} << 20;
  size_t bytes = 0;
  for (const auto& b : scratch_) bytes += b.capacity() * sizeof(float);
  if (bytes > kKeepBytes)
    for (auto& b : scratch_) std::vector<float>().swap(b);
}

void HostBackend::to_host(const float* src, float* dst, int64_t n) {
  if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void HostBackend::embed(const kernels::WeightView& table, std::span<const TokenId> tokens, float* x) {
  const int64_t n = table.n_cols;
  for (size_t t = 0; t < tokens.size(); ++t) {
    table.traits->to_float(table.row(tokens[t]), x + t * n, n);
    if (table.row_scale)
      for (int64_t i = 0; i < n; ++i) x[t * n + i] *= table.row_scale[tokens[t]];
  }
}

void HostBackend::store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                           const float* v) {
  const int n = pool.n_kv_head * pool.head_dim;
  for (size_t t = 0; t < slots.size(); ++t)
    for (int kv = 0; kv < 2; ++kv)
      kv_encode_row(pool.type, (kv == 0 ? k : v) + t * n, pool.n_kv_head, pool.head_dim,
                    pool.slot_row(slots[t], layer, kv));
}

void HostBackend::copy_kv(const KvPoolView& pool, std::span<const int64_t> src, std::span<const int64_t> dst) {
  TERN_ASSERT(src.size() == dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == dst[i]) continue;
    for (int layer = 0; layer < pool.n_layer; ++layer)
      for (int kv = 0; kv < 2; ++kv)
        std::memcpy(pool.slot_row(dst[i], layer, kv), pool.slot_row(src[i], layer, kv), pool.row_bytes);
  }
}

void HostBackend::gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out + static_cast<int64_t>(i) * n, x + rows[i] * n, static_cast<size_t>(n) * sizeof(float));
}

// One f32 multiply per element: exact the same on every backend.
void HostBackend::scale(float* x, int64_t n_rows, int64_t n, float s) {
  for (int64_t i = 0; i < n_rows * n; ++i) x[i] *= s;
}

void HostBackend::mul(float* x, const float* w, int64_t n_rows, int64_t n) {
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t j = 0; j < n; ++j) x[t * n + j] *= w[j];
}

// One compare and one multiply per element (vectorised by the compiler):
// exact, so every backend agrees.
void HostBackend::relu_sqr(float* x, int64_t n_rows, int64_t n) {
  for (int64_t i = 0; i < n_rows * n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    x[i] = r * r;
  }
}

void HostBackend::zero(float* x, int64_t n_rows, int64_t n) {
  std::memset(x, 0, static_cast<size_t>(n_rows * n) * sizeof(float));
}

kernels::SsmConvArgs ssm_conv_args(const kernels::SsmDims& dims, const SsmRun& r, const float* x, int64_t x_stride,
                                   const float* w, const float* bias, float* out) {
  kernels::SsmConvArgs a;
  a.dims = dims;
  a.n_tokens = r.n_tokens;
  a.conv_state = r.conv_state;
  a.x = x + r.first_token * x_stride;
  a.x_stride = x_stride;
  a.w = w;
  a.bias = bias;
  a.out = out + r.first_token * dims.d_inner;
  a.snaps = r.snaps.data();
  a.n_snaps = static_cast<int>(r.snaps.size());
  return a;
}

kernels::SsmScanArgs ssm_scan_args(const kernels::SsmDims& dims, const SsmRun& r, const SsmScanInput& in, float* y) {
  const int64_t t0 = r.first_token, d_inner = dims.d_inner;
  kernels::SsmScanArgs a;
  a.dims = dims;
  a.n_tokens = r.n_tokens;
  a.state = r.ssm_state;
  a.x_stride = in.x_stride > 0 ? in.x_stride : d_inner;
  a.dt_stride = in.dt_stride > 0 ? in.dt_stride : d_inner;
  a.x = in.x + t0 * a.x_stride;
  a.dt = in.dt + t0 * a.dt_stride;
  a.a = in.a;
  a.b = in.b + t0 * in.bc_stride;
  a.c = in.c + t0 * in.bc_stride;
  a.bc_stride = in.bc_stride;
  a.d = in.d;
  a.z = in.z + t0 * in.z_stride;
  a.z_stride = in.z_stride;
  a.head_dim = in.head_dim;
  a.n_group = in.n_group;
  a.dt_bias = in.dt_bias;
  a.y = y + t0 * d_inner;
  a.snaps = r.snaps.data();
  a.n_snaps = static_cast<int>(r.snaps.size());
  return a;
}

void HostBackend::ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x,
                           int64_t x_stride, const float* w, const float* bias, float* out) {
  for (const SsmRun& r : runs) kernels::ssm_kernels().conv(ssm_conv_args(dims, r, x, x_stride, w, bias, out), 0, dims.d_inner);
}

void HostBackend::ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                           float* y) {
  for (const SsmRun& r : runs) kernels::ssm_kernels().scan(ssm_scan_args(dims, r, in, y), 0, dims.d_inner);
}

}  // namespace tern::backend
