#include "model/smoothquant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/quant.h"

namespace tern {
namespace {

constexpr int kAlphaSteps = 20;  // α = 0, 0.05, ..., 1

struct Weights {
  std::vector<float> w;  // [n_rows][n]
  int64_t n_rows = 0;
};

// Expected squared output error of the group with scales s (see the header).
double expected_error(const std::vector<Weights>& ms, const std::vector<double>& s, const std::vector<double>& m2,
                      const std::vector<double>& xmax, int64_t n, ThreadPool& pool) {
  double x_step = 0.0, m2_over_s2 = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    x_step = std::max(x_step, xmax[j] / s[j] / 127.0);
    m2_over_s2 += m2[j] / (s[j] * s[j]);
  }
  double total = 0.0;
  for (const Weights& m : ms) {
    std::vector<double> per_row(static_cast<size_t>(m.n_rows));
    pool.parallel_for(static_cast<size_t>(m.n_rows), [&](size_t b, size_t e, int) {
      for (size_t r = b; r < e; ++r) {
        const float* w = &m.w[r * n];
        double wmax = 0.0, w2s2 = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const double v = std::fabs(w[j]) * s[j];
          wmax = std::max(wmax, v);
          w2s2 += v * v;
        }
        const double w_step = wmax / 127.0;
        per_row[r] = (w_step * w_step * m2_over_s2 + x_step * x_step * w2s2) / 12.0;
      }
    });
    for (double v : per_row) total += v;  // in order: the same sum for any thread count
  }
  return total;
}

}  // namespace

Result<AwqResult> smoothquant_search(const gguf::GgufFile& file, const AwqStatsFn& stats, std::optional<float> alpha,
                                     ThreadPool& pool) {
  if (alpha && !(*alpha >= 0.0f && *alpha <= 1.0f))
    return error(ErrorKind::InvalidArgument, "smoothquant: alpha must be in [0, 1]");
  AwqResult result;
  for (const AwqGroup& g : awq_groups(file)) {
    auto st = stats(g.linears[0]);
    if (!st) return st.status();
    if (!*st || (*st)->count == 0) continue;  // calibration never ran this input
    const InputStats& x = **st;
    if (x.n_cols != g.n)
      return error(ErrorKind::InvalidArgument, "smoothquant: calibration statistics of '" + g.linears[0] +
                                                   "' do not fit the tensor (rows of " + std::to_string(g.n) + ")");
    std::vector<Weights> ms;
    std::vector<double> wmax(static_cast<size_t>(g.n), 0.0);
    for (const std::string& name : g.linears) {
      const gguf::TensorInfo* t = file.find_tensor(name);
      const quant::TypeTraits* from = quant::traits(t->type);
      if (!from || !from->to_float || quant::has_row_scale(t->type))
        return error(ErrorKind::Unsupported, "smoothquant: cannot decode tensor '" + name + "' (" +
                                                 std::string(gguf::type_name(t->type)) + ")");
      Weights m;
      m.n_rows = static_cast<int64_t>(t->dims[1]);
      m.w.resize(static_cast<size_t>(m.n_rows * g.n));
      const size_t in_row = quant::row_bytes(*from, g.n);
      for (int64_t r = 0; r < m.n_rows; ++r) {
        from->to_float(t->data + static_cast<size_t>(r) * in_row, &m.w[r * g.n], g.n);
        for (int64_t j = 0; j < g.n; ++j) wmax[j] = std::max(wmax[j], static_cast<double>(std::fabs(m.w[r * g.n + j])));
      }
      ms.push_back(std::move(m));
    }
    std::vector<double> m2(static_cast<size_t>(g.n)), xmax(static_cast<size_t>(g.n));
    for (int64_t j = 0; j < g.n; ++j) {
      m2[j] = x.sum_x2[j] / static_cast<double>(x.count);
      xmax[j] = x.max_abs[j];
    }
    auto scales = [&](double a) {
      std::vector<double> s(static_cast<size_t>(g.n), 1.0);
      for (int64_t j = 0; j < g.n; ++j)
        if (xmax[j] > 0.0 && wmax[j] > 0.0) s[j] = std::clamp(std::pow(xmax[j], a) / std::pow(wmax[j], 1.0 - a), 1e-5, 1e5);
      return s;
    };
    double best_alpha = alpha ? *alpha : 0.0;
    if (!alpha) {
      double best_err = 0.0;
      for (int step = 0; step <= kAlphaSteps; ++step) {
        const double a = static_cast<double>(step) / kAlphaSteps;
        // α = 0 here means "no smoothing" (s = 1), the plain W8A8 baseline.
        const std::vector<double> s = step == 0 ? std::vector<double>(static_cast<size_t>(g.n), 1.0) : scales(a);
        const double err = expected_error(ms, s, m2, xmax, g.n, pool);
        if (step == 0 || err < best_err) {
          best_err = err;
          best_alpha = a;
        }
      }
    }
    result.alpha.emplace_back(g.linears[0], static_cast<float>(best_alpha));
    if (best_alpha == 0.0) continue;  // unsmoothed
    const std::vector<double> s = scales(best_alpha);
    fold_group(g, std::vector<float>(s.begin(), s.end()), result);
  }
  return result;
}

}  // namespace tern
