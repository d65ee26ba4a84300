#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "quant/quant.h"

namespace tern::quant {
namespace {

// In-place lower Cholesky factor of the symmetric positive definite a
// ([n][n], lower triangle read and written, upper left as is); false when
// a pivot is not positive.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double* ai = &a[i * n];
    for (int64_t j = 0; j <= i; ++j) {
      const double* aj = &a[j * n];
      double s = ai[j];
      for (int64_t k = 0; k < j; ++k) s -= ai[k] * aj[k];
      if (j == i) {
        if (!(s > 0.0)) return false;
        ai[i] = std::sqrt(s);
      } else {
        ai[j] = s / aj[j];
      }
    }
  }
  return true;
}

// Rows (in order) per tile of the column loop: each row of U is read once per tile.
constexpr int64_t kTileRows = 16;

}  // namespace

Result<std::vector<double>> gptq_inverse_factor(std::span<const double> h, int64_t n, double damp) {
  if (n <= 0 || static_cast<int64_t>(h.size()) != n * n)
    return error(ErrorKind::InvalidArgument, "gptq: H must be [n_cols][n_cols]");
  double mean_diag = 0.0;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[i * n + i];
  mean_diag /= static_cast<double>(n);
  if (!(mean_diag > 0.0)) mean_diag = 1.0;  // no calibration signal at all: plain rounding order

  std::vector<double> a(static_cast<size_t>(n * n));
  bool factored = false;
  for (int attempt = 0; attempt < 3 && !factored; ++attempt, damp *= 10.0) {
    std::copy(h.begin(), h.end(), a.begin());
    for (int64_t i = 0; i < n; ++i) {
      double& d = a[i * n + i];
      if (d == 0.0) d = 1.0;  // a dead channel: its weights are zeroed, so any positive value does
      d += damp * mean_diag;
    }
    factored = cholesky_lower(a, n);
  }
  if (!factored) return error(ErrorKind::InvalidArgument, "gptq: H is not positive definite even with damping");

  // t = L⁻ᵀ (upper), built one column of L⁻¹ at a time by forward substitution.
  std::vector<double> t(static_cast<size_t>(n * n), 0.0), col(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    col[j] = 1.0 / a[j * n + j];
    for (int64_t i = j + 1; i < n; ++i) {
      const double* li = &a[i * n];
      double s = 0.0;
      for (int64_t k = j; k < i; ++k) s -= li[k] * col[k];
      col[i] = s / li[i];
    }
    for (int64_t i = j; i < n; ++i) t[j * n + i] = col[i];
  }
  // H⁻¹ = L⁻ᵀ L⁻¹: entry (i, j) = sum over k >= max(i, j) of t[i][k] t[j][k] (lower half into a).
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int64_t k = i; k < n; ++k) s += t[i * n + k] * t[j * n + k];
      a[i * n + j] = s;
    }
  if (!cholesky_lower(a, n)) return error(ErrorKind::InvalidArgument, "gptq: H⁻¹ lost positive definiteness (ill-conditioned H)");
  // U = (the lower factor of H⁻¹)ᵀ, stored densely with zeros below the diagonal.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) t[i * n + k] = k >= i ? a[k * n + i] : 0.0;
  return t;
}

Status gptq_encode(const BlockCodec& c, std::span<const float> w, int64_t n_rows, int64_t n_cols,
                   std::span<const double> h, const GptqOptions& o, uint8_t* out, ThreadPool& pool) {
  if (n_rows < 0 || n_cols <= 0 || n_cols % c.block_elems != 0 || static_cast<int64_t>(w.size()) != n_rows * n_cols)
    return error(ErrorKind::InvalidArgument, "gptq: W is not [n_rows][n_cols] with whole blocks");
  auto u = gptq_inverse_factor(h, n_cols, o.damp);
  if (!u) return u.status();
  std::vector<float> importance(static_cast<size_t>(n_cols));
  std::vector<bool> dead(static_cast<size_t>(n_cols));
  for (int64_t i = 0; i < n_cols; ++i) {
    importance[i] = static_cast<float>(h[i * n_cols + i]);
    dead[i] = h[i * n_cols + i] == 0.0;
  }
  const size_t row_bytes = quant::row_bytes(*traits(c.type), n_cols);
  const int64_t be = c.block_elems;
  const int64_t n_tiles = (n_rows + kTileRows - 1) / kTileRows;

  pool.parallel_for(static_cast<size_t>(n_tiles), [&](size_t tile_begin, size_t tile_end, int) {
    std::vector<double> rows(static_cast<size_t>(kTileRows * n_cols));
    std::vector<BlockFit> fits(static_cast<size_t>(kTileRows));
    std::vector<uint8_t> q(static_cast<size_t>(kTileRows * be));
    std::vector<float> block(static_cast<size_t>(be));
    std::vector<double> err(static_cast<size_t>(kTileRows));
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = static_cast<int64_t>(tile) * kTileRows;
      const int64_t nr = std::min(kTileRows, n_rows - r0);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t k = 0; k < n_cols; ++k) rows[r * n_cols + k] = dead[k] ? 0.0 : w[(r0 + r) * n_cols + k];
      for (int64_t b0 = 0; b0 < n_cols; b0 += be) {
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t j = 0; j < be; ++j) block[j] = static_cast<float>(rows[r * n_cols + b0 + j]);
          fits[r] = fit_block(c, block.data(), importance.data() + b0);
        }
        for (int64_t i = b0; i < b0 + be; ++i) {
          const double* ui = &(*u)[i * n_cols];
          for (int64_t r = 0; r < nr; ++r) {
            double* row = &rows[r * n_cols];
            const int qi = nearest_index(c, fits[r], static_cast<float>(row[i]));
            q[r * be + (i - b0)] = static_cast<uint8_t>(qi);
            err[r] = (row[i] - level(c, fits[r], qi)) / ui[i];
          }
          for (int64_t r = 0; r < nr; ++r) {
            double* row = &rows[r * n_cols];
            const double e = err[r];
            for (int64_t k = i + 1; k < n_cols; ++k) row[k] -= e * ui[k];
          }
        }
        for (int64_t r = 0; r < nr; ++r)
          store_block(c, fits[r], &q[r * be], out + (r0 + r) * row_bytes + (b0 / be) * traits(c.type)->block_bytes);
      }
    }
  });
  return Status::ok();
}

}  // namespace tern::quant
