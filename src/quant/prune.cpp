#include "quant/prune.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "quant/gptq.h"
#include "quant/obs_loop.h"

namespace tern::quant {
namespace {

// Marks (1) the k smallest of score[0, n), ties to the lower index, others 0.
// `scratch` holds n values. Scores are finite (callers check their inputs).
template <class T>
void mark_smallest(const T* score, int64_t n, int64_t k, uint8_t* pruned, std::vector<T>& scratch) {
  if (k <= 0 || k >= n) {
    std::fill(pruned, pruned + n, static_cast<uint8_t>(k > 0 ? 1 : 0));
    return;
  }
  scratch.assign(score, score + n);
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end());
  const T t = scratch[static_cast<size_t>(k - 1)];  // the k-th smallest
  int64_t below = 0;
  for (int64_t j = 0; j < n; ++j) below += score[j] < t ? 1 : 0;
  int64_t ties = k - below;  // how many equal to t are pruned, lowest index first
  for (int64_t j = 0; j < n; ++j) {
    const bool take = score[j] < t || (score[j] == t && ties > 0);
    if (score[j] == t && take) --ties;
    pruned[j] = take ? 1 : 0;
  }
}

// Weights zeroed in row columns [0, c) under sparsity s: the running target
// whose differences give each block's count (they sum to the row's).
int64_t target(double s, int64_t c) { return std::llround(s * static_cast<double>(c)); }

// Per row: score every weight, then zero the smallest per row or per group of m.
Status prune_rows(const PruneOptions& o, std::span<float> w, int64_t n_rows, int64_t n_cols,
                  const std::vector<double>& col_norm, ThreadPool& pool) {
  pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t begin, size_t end, int) {
    std::vector<double> score(static_cast<size_t>(n_cols)), scratch;
    std::vector<uint8_t> pruned(static_cast<size_t>(n_cols));
    for (size_t r = begin; r < end; ++r) {
      float* row = w.data() + r * static_cast<size_t>(n_cols);
      for (int64_t j = 0; j < n_cols; ++j)
        score[j] = std::fabs(static_cast<double>(row[j])) * (col_norm.empty() ? 1.0 : col_norm[j]);
      if (o.pattern.active()) {
        for (int64_t g = 0; g < n_cols; g += o.pattern.m)
          mark_smallest(&score[g], o.pattern.m, o.pattern.m - o.pattern.n, &pruned[g], scratch);
      } else {
        mark_smallest(score.data(), n_cols, target(o.sparsity, n_cols), pruned.data(), scratch);
      }
      for (int64_t j = 0; j < n_cols; ++j)
        if (pruned[j]) row[j] = 0.0f;
    }
  });
  return Status::ok();
}

// Unstructured magnitude: one threshold for the whole matrix.
void prune_magnitude_matrix(double sparsity, std::span<float> w) {
  const int64_t n = static_cast<int64_t>(w.size());
  std::vector<float> score(w.size()), scratch;
  for (size_t i = 0; i < w.size(); ++i) score[i] = std::fabs(w[i]);
  std::vector<uint8_t> pruned(w.size());
  mark_smallest(score.data(), n, target(sparsity, n), pruned.data(), scratch);
  for (size_t i = 0; i < w.size(); ++i)
    if (pruned[i]) w[i] = 0.0f;
}

Status prune_sparsegpt(const PruneOptions& o, std::span<float> w, int64_t n_rows, int64_t n_cols,
                       std::span<const double> h, ThreadPool& pool) {
  auto s = obs_setup(h, n_cols, o.damp);
  if (!s) return s.status().with_context("sparsegpt");
  const int64_t group = o.pattern.active() ? o.pattern.m : std::max<int64_t>(1, o.block_cols);
  struct Tile {
    const PruneOptions& o;
    const ObsSetup& s;
    float* out;
    int64_t n_cols, group;
    std::vector<uint8_t> pruned;  // [kObsTileRows][n_cols]
    std::vector<double> score, scratch;
    void fit(int64_t, int64_t r, int64_t g0, const double* row) {
      const int64_t g1 = std::min(n_cols, g0 + group);
      for (int64_t j = g0; j < g1; ++j) {
        const double u = s.u[j * n_cols + j];
        score[j - g0] = row[j] * row[j] / (u * u);
      }
      const int64_t k = o.pattern.active() ? o.pattern.m - o.pattern.n : target(o.sparsity, g1) - target(o.sparsity, g0);
      mark_smallest(score.data(), g1 - g0, k, &pruned[r * n_cols + g0], scratch);
    }
    double round(int64_t r0, int64_t r, int64_t i, double x) {
      const double v = pruned[r * n_cols + i] ? 0.0 : x;
      out[(r0 + r) * n_cols + i] = static_cast<float>(v);
      return v;
    }
    void done(int64_t, int64_t) {}
  };
  // Each tile reads its rows of w before it writes them, and tiles are disjoint: in place is safe.
  obs_column_loop(*s, w, n_rows, n_cols, group, pool, [&] {
    return Tile{o, *s, w.data(), n_cols, group, std::vector<uint8_t>(static_cast<size_t>(kObsTileRows * n_cols)),
                std::vector<double>(static_cast<size_t>(group)), {}};
  });
  return Status::ok();
}

}  // namespace

const char* prune_method_name(PruneMethod m) {
  switch (m) {
    case PruneMethod::Magnitude: return "magnitude";
    case PruneMethod::Wanda: return "wanda";
    case PruneMethod::SparseGpt: return "sparsegpt";
  }
  return "?";
}

Result<PruneMethod> parse_prune_method(std::string_view name) {
  for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Wanda, PruneMethod::SparseGpt})
    if (name == prune_method_name(m)) return m;
  return error(ErrorKind::InvalidArgument,
               "unknown pruning method '" + std::string(name) + "' (magnitude, wanda, sparsegpt)");
}

Result<NmPattern> parse_nm_pattern(std::string_view text) {
  const size_t colon = text.find(':');
  NmPattern p;
  auto bad = [&] {
    return error(ErrorKind::InvalidArgument, "pattern '" + std::string(text) +
                                                 "' is not N:M with 1 <= N < M <= 32 (at most N nonzero weights "
                                                 "in every M; e.g. 2:4)");
  };
  if (colon == std::string_view::npos) return bad();
  const char* a = text.data();
  const char* mid = a + colon;
  const char* end = a + text.size();
  auto r1 = std::from_chars(a, mid, p.n);
  auto r2 = std::from_chars(mid + 1, end, p.m);
  if (r1.ec != std::errc() || r1.ptr != mid || r2.ec != std::errc() || r2.ptr != end) return bad();
  if (!(p.n >= 1 && p.n < p.m && p.m <= 32)) return bad();
  return p;
}

Status check_prune_options(const PruneOptions& o, int64_t n_cols) {
  if (!(o.sparsity >= 0.0 && o.sparsity < 1.0))
    return error(ErrorKind::InvalidArgument, "pruning sparsity must be in [0, 1)");
  if (o.pattern.active()) {
    if (!(o.pattern.n >= 1 && o.pattern.n < o.pattern.m))
      return error(ErrorKind::InvalidArgument, "pattern " + o.pattern.text() + " needs 1 <= N < M");
    if (std::fabs(o.sparsity - o.pattern.sparsity()) > 1e-9)
      return error(ErrorKind::InvalidArgument, "pattern " + o.pattern.text() + " prunes " +
                                                   std::to_string(o.pattern.sparsity()) + " of the weights, not " +
                                                   std::to_string(o.sparsity));
    if (n_cols % o.pattern.m != 0)
      return error(ErrorKind::InvalidArgument, "rows of " + std::to_string(n_cols) +
                                                   " weights do not divide into groups of " +
                                                   std::to_string(o.pattern.m) + " for pattern " + o.pattern.text());
  }
  if (!(o.damp > 0.0)) return error(ErrorKind::InvalidArgument, "sparsegpt damping must be positive");
  return Status::ok();
}

Status prune_matrix(const PruneOptions& o, std::span<float> w, int64_t n_rows, int64_t n_cols,
                    std::span<const double> col_sq, std::span<const double> h, ThreadPool& pool) {
  if (n_rows < 0 || n_cols <= 0 || static_cast<int64_t>(w.size()) != n_rows * n_cols)
    return error(ErrorKind::InvalidArgument, "prune: W is not [n_rows][n_cols]");
  TERN_RETURN_IF_ERROR(check_prune_options(o, n_cols));
  for (float v : w)
    if (!std::isfinite(v)) return error(ErrorKind::InvalidArgument, "prune: the matrix holds a weight that is not finite");
  switch (o.method) {
    case PruneMethod::Magnitude:
      if (!o.pattern.active()) {
        prune_magnitude_matrix(o.sparsity, w);
        return Status::ok();
      }
      return prune_rows(o, w, n_rows, n_cols, {}, pool);
    case PruneMethod::Wanda: {
      if (static_cast<int64_t>(col_sq.size()) != n_cols)
        return error(ErrorKind::InvalidArgument, "wanda: needs the sum of x² of each of the " +
                                                     std::to_string(n_cols) + " input columns");
      std::vector<double> norm(static_cast<size_t>(n_cols));
      for (int64_t j = 0; j < n_cols; ++j) {
        if (!(col_sq[j] >= 0.0 && std::isfinite(col_sq[j])))
          return error(ErrorKind::InvalidArgument, "wanda: an input column's sum of x² is negative or not finite");
        norm[j] = std::sqrt(col_sq[j]);
      }
      return prune_rows(o, w, n_rows, n_cols, norm, pool);
    }
    case PruneMethod::SparseGpt:
      if (static_cast<int64_t>(h.size()) != n_cols * n_cols)
        return error(ErrorKind::InvalidArgument, "sparsegpt: needs H, [n_cols][n_cols] sums of x xᵀ");
      for (double v : h)
        if (!std::isfinite(v)) return error(ErrorKind::InvalidArgument, "sparsegpt: H holds a value that is not finite");
      return prune_sparsegpt(o, w, n_rows, n_cols, h, pool);
  }
  return error(ErrorKind::InvalidArgument, "prune: unknown method");
}

}  // namespace tern::quant
