#include "model/awq.h"

#include <algorithm>
#include <cmath>

#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;

constexpr int kAlphaSteps = 20;       // α = 0, 0.05, ..., 1
constexpr int64_t kSearchRows = 256;  // rows of each matrix the search reads

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

struct SearchMatrix {
  const quant::TypeTraits* from;  // stored type
  const quant::TypeTraits* to;    // type the scheme gives it
  std::vector<float> rows;        // [n_rows][n] sampled rows, f32
  int64_t n_rows = 0;
};

// sum over the sampled rows of e H eᵀ, e = w - dequant(quant(w ∘ s)) / s.
double group_error(const std::vector<SearchMatrix>& ms, const std::vector<float>& s, const std::vector<double>& h,
                   int64_t n, ThreadPool& pool) {
  double total = 0.0;
  for (const SearchMatrix& m : ms) {
    std::vector<double> per_row(static_cast<size_t>(m.n_rows));
    pool.parallel_for(static_cast<size_t>(m.n_rows), [&](size_t b, size_t end, int) {
      std::vector<float> scaled(static_cast<size_t>(n)), back(static_cast<size_t>(n));
      std::vector<uint8_t> enc(quant::row_bytes(*m.to, n));
      std::vector<double> e(static_cast<size_t>(n));
      for (size_t r = b; r < end; ++r) {
        const float* w = &m.rows[r * n];
        for (int64_t j = 0; j < n; ++j) scaled[j] = w[j] * s[j];
        m.to->from_float(scaled.data(), enc.data(), n);
        m.to->to_float(enc.data(), back.data(), n);
        for (int64_t j = 0; j < n; ++j) e[j] = static_cast<double>(w[j]) - static_cast<double>(back[j]) / s[j];
        double acc = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          if (e[i] == 0.0) continue;
          const double* hi = &h[i * n];
          double row = 0.0;
          for (int64_t j = 0; j < n; ++j) row += hi[j] * e[j];
          acc += e[i] * row;
        }
        per_row[r] = acc;
      }
    });
    for (double v : per_row) total += v;  // in row order: the same sum whatever the thread count
  }
  return total;
}

}  // namespace

std::vector<AwqGroup> awq_groups(const gguf::GgufFile& file) {
  std::vector<AwqGroup> out;
  auto find = [&](const std::string& name) { return file.find_tensor(name); };
  for (int il = 0;; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    if (!find(p + "attn_norm.weight") && !find(p + "ffn_norm.weight")) break;
    auto add = [&](const std::string& producer, std::vector<std::string> names) {
      std::vector<std::string> linears;
      for (const auto& nm : names)
        if (const gguf::TensorInfo* t = find(p + nm); t && t->n_dims == 2) linears.push_back(p + nm);
      if (!find(p + producer) || linears.empty()) return;
      out.push_back({p + producer, linears, static_cast<int64_t>(find(linears[0])->dims[0])});
    };
    add("attn_norm.weight", {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight"});
    const gguf::TensorInfo *v = find(p + "attn_v.weight"), *o = find(p + "attn_output.weight");
    if (v && o && !find(p + "attn_v.bias") && v->n_dims == 2 && o->n_dims == 2 && v->dims[1] == o->dims[0])
      add("attn_v.weight", {"attn_output.weight"});
    if (find(p + "ffn_gate_inp.weight")) continue;  // MoE: left unscaled
    add("ffn_norm.weight", {"ffn_gate.weight", "ffn_up.weight"});
    const gguf::TensorInfo *g = find(p + "ffn_gate.weight"), *u = find(p + "ffn_up.weight"), *d = find(p + "ffn_down.weight");
    if (g && u && d && u->n_dims == 2 && d->n_dims == 2 && u->dims[1] == d->dims[0]) add("ffn_up.weight", {"ffn_down.weight"});
  }
  return out;
}

void fold_group(const AwqGroup& g, std::span<const float> s, AwqResult& r) {
  auto times = [&](std::vector<float>& v) {
    if (v.empty()) v.assign(static_cast<size_t>(g.n), 1.0f);
    for (int64_t j = 0; j < g.n; ++j) v[j] *= s[j];
  };
  for (const std::string& name : g.linears) times(r.column_scale[name]);
  times(r.row_divisor[g.producer]);
}

Result<AwqResult> awq_search(const gguf::GgufFile& file, const QuantScheme& scheme, const AwqStatsFn& stats,
                             ThreadPool& pool) {
  auto info = quant_model_info(file);
  if (!info) return info.status();
  AwqResult result;
  for (const AwqGroup& g : awq_groups(file)) {
    auto st = stats(g.linears[0]);
    if (!st) return st.status();
    if (!*st || (*st)->count == 0) continue;  // calibration never ran this input
    const InputStats& s = **st;
    if (s.n_cols != g.n || s.h.size() != static_cast<size_t>(g.n * g.n))
      return error(ErrorKind::InvalidArgument, "awq: calibration statistics of '" + g.linears[0] +
                                                   "' do not fit the tensor (rows of " + std::to_string(g.n) + ")");
    std::vector<SearchMatrix> ms;
    for (const std::string& name : g.linears) {
      const gguf::TensorInfo* t = file.find_tensor(name);
      const TypeChoice choice = choose_tensor_type(scheme, *info, name, t->n_dims, t->dims[0], t->type);
      if (is_float(choice.type)) continue;  // rounding to a float type loses next to nothing: nothing to search for
      SearchMatrix m{quant::traits(t->type), quant::traits(choice.type), {}, 0};
      if (!m.from || !m.from->to_float || !m.to || !m.to->from_float || !m.to->to_float)
        return error(ErrorKind::Unsupported, "awq: cannot convert tensor '" + name + "'");
      const int64_t n_rows = static_cast<int64_t>(t->dims[1]);
      m.n_rows = std::min(n_rows, kSearchRows);
      m.rows.resize(static_cast<size_t>(m.n_rows * g.n));
      const size_t in_row = quant::row_bytes(*m.from, g.n);
      for (int64_t r = 0; r < m.n_rows; ++r)
        m.from->to_float(t->data + static_cast<size_t>(r * n_rows / m.n_rows) * in_row, &m.rows[r * g.n], g.n);
      ms.push_back(std::move(m));
    }
    if (ms.empty()) continue;
    std::vector<double> mean_abs(static_cast<size_t>(g.n));
    for (int64_t j = 0; j < g.n; ++j) mean_abs[j] = std::max(s.sum_abs[j] / static_cast<double>(s.count), 1e-8);
    double best_err = 0.0;
    int best = 0;
    std::vector<float> scale(static_cast<size_t>(g.n)), best_scale;
    for (int step = 0; step <= kAlphaSteps; ++step) {
      const double alpha = static_cast<double>(step) / kAlphaSteps;
      double lo = 1e300, hi = 0.0;
      for (int64_t j = 0; j < g.n; ++j) {
        const double v = std::pow(mean_abs[j], alpha);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const double norm = std::sqrt(lo * hi);
      for (int64_t j = 0; j < g.n; ++j) scale[j] = static_cast<float>(std::pow(mean_abs[j], alpha) / norm);
      const double err = group_error(ms, scale, s.h, g.n, pool);
      if (step == 0 || err < best_err) {
        best_err = err;
        best = step;
        best_scale = scale;
      }
    }
    result.alpha.emplace_back(g.linears[0], static_cast<float>(best) / kAlphaSteps);
    if (best == 0) continue;  // plain rounding was best: leave the group as it is
    fold_group(g, best_scale, result);
  }
  return result;
}

}  // namespace tern
