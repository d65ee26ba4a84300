#include "kernels/ref/ssm_reference.h"

#include <cmath>
#include <vector>

namespace tern::kernels {

void ssm_conv_reference(const SsmConvArgs& a) {
  const int d_inner = a.dims.d_inner, n_keep = a.dims.d_conv - 1;
  const int64_t n = a.n_tokens;
  // The kept inputs followed by the run's, as one time line.
  std::vector<float> line(static_cast<size_t>((n_keep + n) * d_inner));
  for (int64_t i = 0; i < n_keep + n; ++i)
    for (int c = 0; c < d_inner; ++c)
      line[static_cast<size_t>(i * d_inner + c)] =
          i < n_keep ? a.conv_state[i * d_inner + c] : a.x[(i - n_keep) * a.x_stride + c];
  for (int64_t t = 0; t < n; ++t)
    for (int c = 0; c < d_inner; ++c) {
      double acc = a.bias[c];
      for (int k = 0; k <= n_keep; ++k)
        acc += static_cast<double>(a.w[k * d_inner + c]) * line[static_cast<size_t>((t + k) * d_inner + c)];
      a.out[t * d_inner + c] = static_cast<float>(acc / (1.0 + std::exp(-acc)));
    }
  for (int k = 0; k < a.n_snaps; ++k)
    for (int i = 0; i < n_keep; ++i)
      for (int c = 0; c < d_inner; ++c)
        a.snaps[k].conv[i * d_inner + c] = line[static_cast<size_t>((a.snaps[k].after + i) * d_inner + c)];
  for (int i = 0; i < n_keep; ++i)
    for (int c = 0; c < d_inner; ++c)
      a.conv_state[i * d_inner + c] = line[static_cast<size_t>((n + i) * d_inner + c)];
}

void ssm_scan_reference(const SsmScanArgs& a) {
  const int d_inner = a.dims.d_inner, d_state = a.dims.d_state;
  const bool m2 = a.head_dim > 0;  // Mamba-2: dt, A, D per head; B, C per group
  const int heads_per_group = m2 ? d_inner / a.head_dim / a.n_group : 1;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int ch = 0; ch < d_inner; ++ch) {
      const int head = m2 ? ch / a.head_dim : ch;
      const int64_t bc = t * a.bc_stride + (m2 ? static_cast<int64_t>(head / heads_per_group) * d_state : 0);
      const double raw = static_cast<double>(a.dt[t * a.dt_stride + head]) + (m2 ? a.dt_bias[head] : 0.0);
      const double dt = raw <= 20.0 ? std::log1p(std::exp(raw)) : raw;
      const double xv = a.x[t * a.x_stride + ch];
      double y = 0.0;
      for (int s = 0; s < d_state; ++s) {
        // Mamba-2 keeps a channel's states side by side (kernels/ssm.h).
        float& h = m2 ? a.state[static_cast<int64_t>(ch) * d_state + s] : a.state[static_cast<int64_t>(s) * d_inner + ch];
        const double an = m2 ? a.a[head] : a.a[static_cast<int64_t>(s) * d_inner + ch];
        const double hn = h * std::exp(dt * an) + static_cast<double>(a.b[bc + s]) * dt * xv;
        h = static_cast<float>(hn);
        y += hn * a.c[bc + s];
      }
      y += static_cast<double>(a.d[head]) * xv;
      const double z = a.z[t * a.z_stride + ch];
      a.y[t * d_inner + ch] = static_cast<float>(y * (z / (1.0 + std::exp(-z))));
    }
    for (int k = 0; k < a.n_snaps; ++k)
      if (a.snaps[k].after == t + 1)
        for (int64_t i = 0; i < int64_t{d_state} * d_inner; ++i) a.snaps[k].ssm[i] = a.state[i];
  }
}

}  // namespace tern::kernels
