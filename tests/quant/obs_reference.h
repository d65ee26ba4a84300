// tests/quant/obs_reference.h — what the GPTQ and SparseGPT tests share: a
// linear layer with calibration inputs whose channels are correlated and
// unevenly scaled, and the factor U of (H + damping)⁻¹ computed the plain way
// (Gauss-Jordan inverse, then Cholesky) as an independent reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "quant_test_data.h"

namespace tern::quant {

using Matrix = std::vector<std::vector<double>>;

struct Layer {
  int n_rows, n_cols, n_samples;
  std::vector<float> w;   // [n_rows][n_cols]
  std::vector<float> x;   // [n_samples][n_cols] calibration inputs
  std::vector<double> h;  // XᵀX
};

// Inputs with correlated channels and uneven scales (x = z·M, channel
// scales spread): where GPTQ's compensation has something to exploit.
inline Layer make_layer(int n_rows, int n_cols, int n_samples, uint64_t seed, int dead_col = -1) {
  Layer l{n_rows, n_cols, n_samples, {}, {}, {}};
  test::Lcg rng(seed);
  l.w.resize(static_cast<size_t>(n_rows) * n_cols);
  for (auto& v : l.w) v = 0.05f * rng.normal();
  std::vector<float> mix(static_cast<size_t>(n_cols) * n_cols), scale(n_cols);
  for (auto& v : mix) v = rng.normal() / std::sqrt(static_cast<float>(n_cols));
  for (int j = 0; j < n_cols; ++j) {
    mix[static_cast<size_t>(j) * n_cols + j] += 1.0f;
    scale[j] = std::exp(rng.normal());
  }
  std::vector<float> z(n_cols);
  l.x.resize(static_cast<size_t>(n_samples) * n_cols);
  for (int s = 0; s < n_samples; ++s) {
    for (auto& v : z) v = rng.normal();
    for (int j = 0; j < n_cols; ++j) {
      double acc = 0;
      for (int k = 0; k < n_cols; ++k) acc += z[k] * mix[static_cast<size_t>(k) * n_cols + j];
      l.x[static_cast<size_t>(s) * n_cols + j] = j == dead_col ? 0.0f : static_cast<float>(acc * scale[j]);
    }
  }
  l.h.assign(static_cast<size_t>(n_cols) * n_cols, 0.0);
  for (int s = 0; s < n_samples; ++s)
    for (int i = 0; i < n_cols; ++i)
      for (int j = 0; j < n_cols; ++j)
        l.h[static_cast<size_t>(i) * n_cols + j] +=
            static_cast<double>(l.x[static_cast<size_t>(s) * n_cols + i]) * l.x[static_cast<size_t>(s) * n_cols + j];
  return l;
}

inline Matrix inverse_gauss_jordan(Matrix a) {
  const size_t n = a.size();
  Matrix inv(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) inv[i][i] = 1.0;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    std::swap(a[p], a[c]);
    std::swap(inv[p], inv[c]);
    const double d = a[c][c];
    for (size_t k = 0; k < n; ++k) {
      a[c][k] /= d;
      inv[c][k] /= d;
    }
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c];
      for (size_t k = 0; k < n; ++k) {
        a[r][k] -= f * a[c][k];
        inv[r][k] -= f * inv[c][k];
      }
    }
  }
  return inv;
}

// Upper U with UᵀU = a, column by column (Cholesky-Crout on the transpose).
inline Matrix cholesky_upper(const Matrix& a) {
  const size_t n = a.size();
  Matrix u(n, std::vector<double>(n, 0.0));
  for (size_t j = 0; j < n; ++j) {
    double s = a[j][j];
    for (size_t k = 0; k < j; ++k) s -= u[k][j] * u[k][j];
    u[j][j] = std::sqrt(s);
    for (size_t i = j + 1; i < n; ++i) {
      double t = a[j][i];
      for (size_t k = 0; k < j; ++k) t -= u[k][j] * u[k][i];
      u[j][i] = t / u[j][j];
    }
  }
  return u;
}

inline Matrix reference_factor(const Layer& l, double damp) {
  const int n = l.n_cols;
  Matrix h(n, std::vector<double>(n));
  double mean = 0;
  for (int i = 0; i < n; ++i) mean += l.h[static_cast<size_t>(i) * n + i] / n;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) h[i][j] = l.h[static_cast<size_t>(i) * n + j];
  for (int i = 0; i < n; ++i) {
    if (h[i][i] == 0.0) h[i][i] = 1.0;
    h[i][i] += damp * mean;
  }
  return cholesky_upper(inverse_gauss_jordan(h));
}

}  // namespace tern::quant
