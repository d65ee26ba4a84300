// quant/obs_loop.h — the column loop GPTQ (quant/gptq.h) and SparseGPT
// (quant/prune.h) share: the Optimal Brain Surgeon update one column at a time.
//
// A linear layer's rows are changed column by column in input order (each
// column rounded, or pruned to zero); the change e_i = (w_i - ŵ_i) / U_ii is
// spread over the columns not yet visited, w_k -= e_i U_ik for k > i, where U
// is the upper Cholesky factor of H⁻¹ (gptq_inverse_factor). Rows are
// independent: they run in tiles over the pool, so the result does not depend
// on the number of threads. Internal to quant/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "quant/gptq.h"

namespace tern::quant {

// Rows (in order) per tile of the column loop: each row of U is read once per tile.
inline constexpr int64_t kObsTileRows = 16;

// What the loop's users need of H: the factor U and each column's importance (diag H) and deadness.
struct ObsSetup {
  std::vector<double> u;
  std::vector<float> importance;
  std::vector<bool> dead;
};

inline Result<ObsSetup> obs_setup(std::span<const double> h, int64_t n_cols, double damp) {
  auto u = gptq_inverse_factor(h, n_cols, damp);
  if (!u) return u.status();
  ObsSetup s{std::move(*u), std::vector<float>(static_cast<size_t>(n_cols)),
             std::vector<bool>(static_cast<size_t>(n_cols))};
  for (int64_t i = 0; i < n_cols; ++i) {
    s.importance[i] = static_cast<float>(h[i * n_cols + i]);
    s.dead[i] = h[i * n_cols + i] == 0.0;
  }
  return s;
}

// Per tile: rows r0 .. r0 + nr - 1 of w into `rows` (dead columns 0), then for
// each group of `group` columns (the last one shorter when group does not
// divide n_cols) fit(r0, r, g0, rows_r) once per row, and each column i
// replaced by round(r0, r, i, x) (the value chosen) with its change spread over
// the later columns; done(r0, nr) after the tile's last column. Tile is the
// per-thread state (constructed once per thread by make_tile).
template <class MakeTile>
void obs_column_loop(const ObsSetup& s, std::span<const float> w, int64_t n_rows, int64_t n_cols, int64_t group,
                     ThreadPool& pool, MakeTile make_tile) {
  const int64_t n_tiles = (n_rows + kObsTileRows - 1) / kObsTileRows;
  pool.parallel_for(static_cast<size_t>(n_tiles), [&](size_t tile_begin, size_t tile_end, int) {
    auto t = make_tile();
    std::vector<double> rows(static_cast<size_t>(kObsTileRows * n_cols));
    std::vector<double> err(static_cast<size_t>(kObsTileRows));
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = static_cast<int64_t>(tile) * kObsTileRows;
      const int64_t nr = std::min(kObsTileRows, n_rows - r0);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t k = 0; k < n_cols; ++k) rows[r * n_cols + k] = s.dead[k] ? 0.0 : w[(r0 + r) * n_cols + k];
      for (int64_t g0 = 0; g0 < n_cols; g0 += group) {
        for (int64_t r = 0; r < nr; ++r) t.fit(r0, r, g0, &rows[r * n_cols]);
        const int64_t g1 = std::min(n_cols, g0 + group);
        for (int64_t i = g0; i < g1; ++i) {
          const double* ui = &s.u[i * n_cols];
          for (int64_t r = 0; r < nr; ++r) {
            const double x = rows[r * n_cols + i];
            err[r] = (x - t.round(r0, r, i, x)) / ui[i];
          }
          for (int64_t r = 0; r < nr; ++r) {
            double* row = &rows[r * n_cols];
            const double e = err[r];
            for (int64_t k = i + 1; k < n_cols; ++k) row[k] -= e * ui[k];
          }
        }
      }
      t.done(r0, nr);
    }
  });
}

}  // namespace tern::quant
