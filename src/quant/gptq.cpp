#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/fp16.h"
#include "quant/k_blocks.h"
#include "quant/k_grid.h"
#include "quant/obs_loop.h"
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

constexpr int kRefineSweeps = 3;

// GPTQ is one greedy pass; what it leaves is refined on the same objective,
// the layer's output error on the calibration inputs f = (w - ŵ) H (w - ŵ)ᵀ,
// keeping Hr = H (w - ŵ) up to date so each trial costs O(1) and each change O(n):
//  - index moves: each element tries the grid's neighbours of its index and
//    takes one that lowers f (Δf = -2 δ Hr_j + δ² H_jj for a level change δ);
//  - block parameters: with the indices fixed, f is a quadratic in a block's
//    scale (and offset): one Newton step, rounded to fp16, kept if f falls.
// Every change lowers f, so the result is never worse than GPTQ's own.
class Refiner {
 public:
  Refiner(const BlockCodec& c, std::span<const double> h, int64_t n)
      : c_(c), h_(h), n_(n), r_(static_cast<size_t>(n)), hr_(static_cast<size_t>(n)) {}

  void run(const float* w, BlockFit* fits, uint8_t* q) {
    const int64_t be = c_.block_elems;
    for (int64_t j = 0; j < n_; ++j) r_[j] = static_cast<double>(w[j]) - level(c_, fits[j / be], q[j]);
    for (int64_t k = 0; k < n_; ++k) {
      double s = 0.0;
      for (int64_t j = 0; j < n_; ++j) s += h_[k * n_ + j] * r_[j];
      hr_[k] = s;
    }
    for (int sweep = 0; sweep < kRefineSweeps; ++sweep) {
      for (int64_t j = 0; j < n_; ++j) move_index(j, fits[j / be], q[j]);
      for (int64_t b0 = 0; b0 < n_; b0 += be) refit_block(b0, fits[b0 / be], q + b0);
    }
  }

 private:
  // ŵ_j changes by delta: r_j falls by it and Hr by delta times H's column j.
  void apply(int64_t j, double delta) {
    r_[j] -= delta;
    const double* hj = &h_[j * n_];  // H is symmetric: row j is column j
    for (int64_t k = 0; k < n_; ++k) hr_[k] -= delta * hj[k];
  }

  void move_index(int64_t j, const BlockFit& f, uint8_t& qj) {
    const double hjj = h_[j * n_ + j];
    if (!(hjj > 0)) return;
    const double now = level(c_, f, qj);
    double best = 0.0;
    int best_q = qj;
    for (int step : {-1, 1}) {
      const int cand = qj + step;
      if (cand < 0 || cand >= static_cast<int>(c_.grid.size())) continue;
      const double delta = level(c_, f, cand) - now;
      const double change = -2.0 * delta * hr_[j] + delta * delta * hjj;
      if (change < best) {
        best = change;
        best_q = cand;
      }
    }
    if (best_q == qj) return;
    apply(j, level(c_, f, best_q) - now);
    qj = static_cast<uint8_t>(best_q);
  }

  void refit_block(int64_t b0, BlockFit& f, const uint8_t* q) {
    const int64_t be = c_.block_elems;
    // Gradient terms vᵀ H r and curvature vᵀ H v for v = g (scale) and v = 1 (offset) over the block.
    double gg = 0, ge = 0, ee = 0, bg = 0, bm = 0;
    for (int64_t i = 0; i < be; ++i) {
      const double gi = c_.grid[q[i]];
      bg += gi * hr_[b0 + i];
      bm += hr_[b0 + i];
      for (int64_t j = 0; j < be; ++j) {
        const double hij = h_[(b0 + i) * n_ + b0 + j];
        gg += gi * hij * c_.grid[q[j]];
        ge += gi * hij;
        ee += hij;
      }
    }
    double dd = 0, dm = 0;
    if (!c_.affine) {
      if (!(gg > 0)) return;
      dd = static_cast<double>(stored_scale(c_, static_cast<float>(f.d + bg / gg))) - f.d;
    } else {
      const double det = gg * ee - ge * ge;
      if (!(det > 1e-12 * gg * ee)) return;
      dd = static_cast<double>(fp16_round(static_cast<float>(f.d + (bg * ee - bm * ge) / det))) - f.d;
      dm = static_cast<double>(fp16_round(static_cast<float>(f.m + (bm * gg - bg * ge) / det))) - f.m;
    }
    const double change = -2 * (dd * bg + dm * bm) + dd * dd * gg + 2 * dd * dm * ge + dm * dm * ee;
    if (!(change < 0)) return;
    f.d = static_cast<float>(f.d + dd);
    f.m = static_cast<float>(f.m + dm);
    for (int64_t j = 0; j < be; ++j) apply(b0 + j, dd * c_.grid[q[j]] + dm);
  }

  const BlockCodec& c_;
  std::span<const double> h_;
  int64_t n_;
  std::vector<double> r_, hr_;
};

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
  auto s = obs_setup(h, n_cols, o.damp);
  if (!s) return s.status();
  const size_t row_bytes = quant::row_bytes(*traits(c.type), n_cols);
  const int64_t be = c.block_elems, n_blocks = n_cols / be;
  // Per thread: the tile's block fits and indices, refined and stored when the tile is done.
  struct Tile {
    const BlockCodec& c;
    const ObsSetup& s;
    std::span<const float> w;
    const GptqOptions& o;
    uint8_t* out;
    size_t row_bytes;
    int64_t n_cols, be, n_blocks;
    std::vector<BlockFit> fits;
    std::vector<uint8_t> q;
    std::vector<float> block, original;
    Refiner refiner;
    void fit(int64_t, int64_t r, int64_t b0, const double* row) {
      for (int64_t j = 0; j < be; ++j) block[j] = static_cast<float>(row[b0 + j]);
      fits[r * n_blocks + b0 / be] = fit_block(c, block.data(), s.importance.data() + b0);
    }
    double round(int64_t, int64_t r, int64_t i, double x) {
      const BlockFit& f = fits[r * n_blocks + i / be];
      const int qi = nearest_index(c, f, static_cast<float>(x));
      q[r * n_cols + i] = static_cast<uint8_t>(qi);
      return level(c, f, qi);
    }
    void done(int64_t r0, int64_t nr) {
      for (int64_t r = 0; r < nr; ++r) {
        for (int64_t k = 0; k < n_cols; ++k) original[k] = s.dead[k] ? 0.0f : w[(r0 + r) * n_cols + k];
        if (o.refine) refiner.run(original.data(), &fits[r * n_blocks], &q[r * n_cols]);
        for (int64_t b = 0; b < n_blocks; ++b)
          store_block(c, fits[r * n_blocks + b], &q[r * n_cols + b * be],
                      out + (r0 + r) * row_bytes + b * traits(c.type)->block_bytes);
      }
    }
  };
  obs_column_loop(*s, w, n_rows, n_cols, be, pool, [&] {
    return Tile{c, *s, w, o, out, row_bytes, n_cols, be, n_blocks,
                std::vector<BlockFit>(static_cast<size_t>(kObsTileRows * n_blocks)),
                std::vector<uint8_t>(static_cast<size_t>(kObsTileRows * n_cols)),
                std::vector<float>(static_cast<size_t>(be)), std::vector<float>(static_cast<size_t>(n_cols)),
                Refiner(c, h, n_cols)};
  });
  return Status::ok();
}

Status gptq_encode_k(gguf::GgmlType type, std::span<const float> w, int64_t n_rows, int64_t n_cols,
                     std::span<const double> h, const GptqOptions& o, uint8_t* out, ThreadPool& pool) {
  if (!k_grid_supported(type)) return error(ErrorKind::InvalidArgument, "gptq: no K-quant grid for this type");
  if (n_rows < 0 || n_cols <= 0 || n_cols % kQK_K != 0 || static_cast<int64_t>(w.size()) != n_rows * n_cols)
    return error(ErrorKind::InvalidArgument, "gptq: W is not [n_rows][n_cols] with whole super-blocks of 256");
  auto s = obs_setup(h, n_cols, o.damp);
  if (!s) return s.status();
  const size_t row_bytes = quant::row_bytes(*traits(type), n_cols), block_bytes = traits(type)->block_bytes;
  // Per thread: each row's grid of the current super-block; quants go straight into the output block.
  struct Tile {
    gguf::GgmlType type;
    const ObsSetup& s;
    uint8_t* out;
    size_t row_bytes, block_bytes;
    std::vector<KGrid> grids;
    std::vector<float> block;
    uint8_t* block_of(int64_t row, int64_t i) const { return out + row * row_bytes + i / kQK_K * block_bytes; }
    void fit(int64_t r0, int64_t r, int64_t b0, const double* row) {
      for (int j = 0; j < kQK_K; ++j) block[j] = static_cast<float>(row[b0 + j]);
      grids[r] = k_grid_fit(type, block.data(), s.importance.data() + b0, block_of(r0 + r, b0));
    }
    double round(int64_t r0, int64_t r, int64_t i, double x) {
      const int e = static_cast<int>(i % kQK_K), q = grids[r].nearest(e, static_cast<float>(x));
      k_grid_set(type, block_of(r0 + r, i), e, q);
      return grids[r].level(e, q);
    }
    void done(int64_t, int64_t) {}
  };
  obs_column_loop(*s, w, n_rows, n_cols, kQK_K, pool, [&] {
    return Tile{type, *s, out, row_bytes, block_bytes, std::vector<KGrid>(static_cast<size_t>(kObsTileRows)),
                std::vector<float>(kQK_K)};
  });
  return Status::ok();
}

}  // namespace tern::quant
