#include "reference_gguf.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "quant/quant.h"

namespace tern::test {
namespace {

using Vec = std::vector<double>;

// Decodes tensor `name` of exactly n elements; empty when absent (or wrong).
bool read_tensor(const gguf::GgufFile& f, const std::string& name, uint64_t n, bool required, Vec& out,
                 std::string* why) {
  out.clear();
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) {
    if (required) *why = "reference: tensor " + name + " is missing";
    return !required;
  }
  const quant::TypeTraits* tr = quant::traits(t->type);
  if (!tr || t->n_elements != n) {
    *why = "reference: tensor " + name + " has an unexpected type or size";
    return false;
  }
  std::vector<float> tmp(n);
  tr->to_float(t->data, tmp.data(), static_cast<int64_t>(n));
  out.assign(tmp.begin(), tmp.end());
  return true;
}

// y[r] = sum_c w[r][c] x[c] (+ b[r]); w: [rows][cols]
Vec matvec(const Vec& w, const Vec& x, int rows, const Vec& b = {}) {
  const size_t cols = x.size();
  Vec y(rows);
  for (int r = 0; r < rows; ++r) {
    double acc = b.empty() ? 0.0 : b[r];
    for (size_t c = 0; c < cols; ++c) acc += w[r * cols + c] * x[c];
    y[r] = acc;
  }
  return y;
}

// Rows [begin, begin + n) of a row-major matrix with rows of `cols`.
Vec rows_of(const Vec& m, uint64_t cols, uint64_t begin, uint64_t n) {
  return Vec(m.begin() + static_cast<std::ptrdiff_t>(begin * cols), m.begin() + static_cast<std::ptrdiff_t>((begin + n) * cols));
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0.0;
  for (double e : x) ss += e * e;
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

// Each head_dim-long head of x RMS-normed with the same weight w ([head_dim]).
void head_norms(Vec& x, const Vec& w, int hd, double eps) {
  for (size_t h = 0; h * hd < x.size(); ++h) {
    const Vec head(x.begin() + h * hd, x.begin() + (h + 1) * hd);
    const Vec y = rmsnorm(head, w, eps);
    std::copy(y.begin(), y.end(), x.begin() + h * hd);
  }
}

// GELU, tanh form (the textbook formula: it shares nothing with the kernels' e^x form).
double gelu_tanh(double g) {
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
}

}  // namespace

bool ReferenceGguf::load(const gguf::GgufFile& f, std::string* why) {
  std::string scratch;
  if (!why) why = &scratch;
  auto arch = f.get_string("general.architecture");
  if (!arch) return *why = arch.status().message(), false;
  const std::string p = *arch + ".";
  RefConfig c;
  auto get_int = [&](const std::string& key, int fallback) {
    auto v = f.get_u64(p + key);
    return v ? static_cast<int>(*v) : fallback;
  };
  // A key that is a scalar gives it; an array gives one value per entry.
  auto get_ints = [&](const std::string& key, std::vector<int>& out) {
    out.clear();
    const gguf::Value* v = f.find(p + key);
    if (!v || !v->as_array()) return;
    for (const gguf::Value& e : v->as_array()->items) out.push_back(static_cast<int>(e.as_i64().value_or(-1)));
  };
  auto get_real = [&](const std::string& key, double fallback) {
    auto v = f.get_f64(p + key);
    return v ? *v : fallback;
  };
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) return *why = "reference: no token_embd.weight", false;
  c.n_embd = get_int("embedding_length", 0);
  c.n_vocab = static_cast<int>(embd->dims[1]);
  c.n_layer = get_int("block_count", 0);
  c.n_ff = get_int("feed_forward_length", 0);
  c.n_head = get_int("attention.head_count", 0);
  c.n_head_kv = get_int("attention.head_count_kv", c.n_head);
  get_ints("attention.head_count_kv", c.layer_n_head_kv);
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_ff <= 0 || c.n_head <= 0 || c.n_head_kv <= 0)
    return *why = "reference: missing or zero size keys", false;
  c.head_dim = get_int("attention.key_length", c.n_embd / c.n_head);
  c.n_rot = get_int("rope.dimension_count", c.head_dim);
  c.rms_eps = get_real("attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_base = get_real("rope.freq_base", 10000.0);
  const bool gemma = *arch == "gemma2" || *arch == "gemma3";
  c.neox = *arch == "qwen2" || *arch == "qwen3" || *arch == "phi3" || *arch == "qwen2moe" || *arch == "qwen3moe" || gemma;
  c.n_expert = get_int("expert_count", 0);
  if (c.n_expert > 0) {
    const bool qwen_moe = *arch == "qwen2moe" || *arch == "qwen3moe";
    c.n_expert_used = get_int("expert_used_count", 0);
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) return *why = "reference: bad expert_used_count", false;
    c.n_ff_exp = qwen_moe ? get_int("expert_feed_forward_length", c.n_ff / c.n_expert_used) : c.n_ff;
    c.n_ff_shexp = *arch == "qwen2moe" ? get_int("expert_shared_feed_forward_length", c.n_ff) : 0;
    c.moe_norm_weights = *arch != "qwen2moe";
  }
  if (auto s = f.get_string(p + "rope.scaling.type")) c.scaling = *s;
  c.scaling_factor = get_real("rope.scaling.factor", 1.0);
  c.n_ctx_train = get_int("context_length", 0);
  c.yarn_orig_ctx = get_int("rope.scaling.original_context_length", c.n_ctx_train);
  c.yarn_attn_factor = get_real("rope.scaling.attn_factor", 1.0);
  c.sliding_window = get_int("attention.sliding_window", 0);
  get_ints("attention.sliding_window", c.layer_window);
  if (gemma) {
    const bool g2 = *arch == "gemma2";
    c.embd_scale = std::sqrt(double(c.n_embd));
    c.gelu = c.post_norms = true;  // q/k norms: applied where the file has them (gemma3)
    const int window = get_int("attention.sliding_window", g2 ? 4096 : 0);
    const int period = get_int("attention.sliding_window_pattern", g2 ? 2 : 6);
    c.layer_window.assign(c.n_layer, 0);
    c.layer_local.assign(c.n_layer, false);
    for (int il = 0; il < c.n_layer; ++il)
      if (window > 0 && (period == 0 || il % period < period - 1)) c.layer_local[il] = true, c.layer_window[il] = window;
    c.rope_base_local = get_real("rope.freq_base_swa", g2 ? c.rope_base : 10000.0);
    c.local_rope_scaled = g2;
    c.attn_softcap = g2 ? get_real("attn_logit_softcapping", 50.0) : 0.0;
    c.final_softcap = get_real("final_logit_softcapping", g2 ? 30.0 : 0.0);
    const bool is_27b = c.n_layer == (g2 ? 46 : 62);
    c.attn_scale = 1.0 / std::sqrt(double(is_27b ? c.n_embd / c.n_head : c.head_dim));
  }
  for (const auto* per_layer : {&c.layer_n_head_kv, &c.layer_window})
    if (!per_layer->empty() && per_layer->size() != size_t(c.n_layer))
      return *why = "reference: a per-layer array's length is not block_count", false;
  const uint64_t E = c.n_embd, F = c.n_ff, V = c.n_vocab;
  const uint64_t Q = uint64_t(c.n_head) * c.head_dim;
  if (!read_tensor(f, "rope_freqs.weight", c.n_rot / 2, false, c.rope_freqs, why) ||
      !read_tensor(f, "rope_factors_long.weight", c.n_rot / 2, false, c.rope_long, why) ||
      !read_tensor(f, "rope_factors_short.weight", c.n_rot / 2, false, c.rope_short, why))
    return false;
  config = c;

  if (!read_tensor(f, "token_embd.weight", V * E, true, embd_, why)) return false;
  if (!read_tensor(f, "output_norm.weight", E, true, out_norm_, why)) return false;
  if (!read_tensor(f, "output.weight", V * E, false, out_, why)) return false;
  if (out_.empty()) out_ = embd_;
  layers_.assign(c.n_layer, {});
  for (int il = 0; il < c.n_layer; ++il) {
    Layer& l = layers_[il];
    const std::string b = "blk." + std::to_string(il) + ".";
    const uint64_t K = uint64_t(c.n_head_kv_of(il)) * c.head_dim;
    if (c.n_head_kv_of(il) <= 0) return *why = "reference: zero kv heads", false;
    // Fused Q/K/V and gate/up (phi3): split here by rows, as the formulas above say.
    const bool fused_qkv = f.find_tensor(b + "attn_qkv.weight") != nullptr;
    const bool fused_gate_up = c.n_expert == 0 && f.find_tensor(b + "ffn_gate.weight") == nullptr;
    Vec qkv;
    if (fused_qkv && !read_tensor(f, b + "attn_qkv.weight", (Q + 2 * K) * E, true, qkv, why)) return false;
    if (!read_tensor(f, b + "attn_norm.weight", E, true, l.attn_norm, why) ||
        !read_tensor(f, b + "attn_q.weight", Q * E, !fused_qkv, l.wq, why) ||
        !read_tensor(f, b + "attn_k.weight", K * E, !fused_qkv, l.wk, why) ||
        !read_tensor(f, b + "attn_v.weight", K * E, !fused_qkv, l.wv, why) ||
        !read_tensor(f, b + "attn_q.bias", Q, false, l.bq, why) ||
        !read_tensor(f, b + "attn_k.bias", K, false, l.bk, why) ||
        !read_tensor(f, b + "attn_v.bias", K, false, l.bv, why) ||
        !read_tensor(f, b + "attn_q_norm.weight", c.head_dim, false, l.q_norm, why) ||
        !read_tensor(f, b + "attn_k_norm.weight", c.head_dim, false, l.k_norm, why) ||
        !read_tensor(f, b + "attn_output.weight", E * Q, true, l.wo, why) ||
        !read_tensor(f, b + "ffn_norm.weight", E, true, l.ffn_norm, why) ||
        !read_tensor(f, b + "ffn_gate.weight", F * E, !fused_gate_up && !c.n_expert, l.w_gate, why) ||
        !read_tensor(f, b + "ffn_up.weight", (fused_gate_up ? 2 : 1) * F * E, !c.n_expert, l.w_up, why) ||
        !read_tensor(f, b + "ffn_down.weight", E * F, !c.n_expert, l.w_down, why))
      return false;
    if (c.n_expert > 0) {
      const uint64_t X = c.n_expert, FX = c.n_ff_exp, FS = c.n_ff_shexp;
      if (!read_tensor(f, b + "ffn_gate_inp.weight", X * E, true, l.router, why) ||
          !read_tensor(f, b + "ffn_gate_exps.weight", X * FX * E, true, l.gate_exps, why) ||
          !read_tensor(f, b + "ffn_up_exps.weight", X * FX * E, true, l.up_exps, why) ||
          !read_tensor(f, b + "ffn_down_exps.weight", X * E * FX, true, l.down_exps, why) ||
          !read_tensor(f, b + "ffn_gate_inp_shexp.weight", E, false, l.gate_inp_shexp, why) ||
          !read_tensor(f, b + "ffn_gate_shexp.weight", FS * E, false, l.gate_shexp, why) ||
          !read_tensor(f, b + "ffn_up_shexp.weight", FS * E, false, l.up_shexp, why) ||
          !read_tensor(f, b + "ffn_down_shexp.weight", E * FS, false, l.down_shexp, why))
        return false;
    }
    if (fused_qkv) {
      l.wq = rows_of(qkv, E, 0, Q);
      l.wk = rows_of(qkv, E, Q, K);
      l.wv = rows_of(qkv, E, Q + K, K);
    }
    if (fused_gate_up) {
      l.w_gate = rows_of(l.w_up, E, 0, F);
      l.w_up = rows_of(l.w_up, E, F, F);
    }
    if (gemma && (!read_tensor(f, b + "post_attention_norm.weight", E, true, l.post_attn_norm, why) ||
                  !read_tensor(f, b + "post_ffw_norm.weight", E, true, l.post_ffw_norm, why)))
      return false;
  }
  return true;
}

const std::vector<double>* ReferenceGguf::rope_factors() const {
  const RefConfig& c = config;
  if (!c.rope_freqs.empty()) return &c.rope_freqs;
  if (c.rope_long.empty()) return nullptr;
  const int n_ctx = c.n_ctx > 0 ? c.n_ctx : c.n_ctx_train;
  return n_ctx > c.yarn_orig_ctx ? &c.rope_long : &c.rope_short;
}

// Frequencies follow llama.cpp: theta_extrap = pos * base^(-2 pair / n_rot).
// Linear scaling divides every angle by the factor. YaRN (Peng et al. 2023,
// as llama.cpp's ggml_rope_yarn_corr_dims / rope_yarn): the pair index at
// which a dimension turns `beta` times over the original context is
//   d(beta) = n_rot * ln(orig_ctx / (2 pi beta)) / (2 ln base);
// pairs below floor(d(beta_fast)) keep the extrapolated angle, pairs above
// ceil(d(beta_slow)) take the interpolated one (angle / factor), with a linear
// ramp between; both q and k rotations are scaled by 1 + 0.1 ln(factor).
// Frequency divisors (rope_factors()) divide the extrapolated angle first,
// as ggml_rope_ext's freq_factors; the attention factor scales every rotation.
void ReferenceGguf::rope_angle(int pair, int pos, double& theta, double& mscale) const {
  rope_angle_of(config.rope_base, config.scaling_factor, config.scaling, pair, pos, theta, mscale);
}

void ReferenceGguf::rope_angle_of(double base, double factor, const std::string& scaling, int pair, int pos,
                                  double& theta, double& mscale) const {
  const RefConfig& c = config;
  const std::vector<double>* factors = rope_factors();
  const double extrap = pos * std::pow(base, -2.0 * pair / c.n_rot) / (factors ? (*factors)[pair] : 1.0);
  theta = extrap;
  mscale = c.yarn_attn_factor;
  if (scaling == "linear") {
    theta = extrap / factor;
  } else if (scaling == "yarn") {
    const double interp = extrap / factor;
    auto corr = [&](double beta) {
      return c.n_rot * std::log(c.yarn_orig_ctx / (2.0 * std::numbers::pi * beta)) / (2.0 * std::log(base));
    };
    const double low = std::max(0.0, std::floor(corr(c.yarn_beta_fast)));
    const double high = std::min(c.n_rot - 1.0, std::ceil(corr(c.yarn_beta_slow)));
    const double ramp = 1.0 - std::clamp((pair - low) / std::max(0.001, high - low), 0.0, 1.0);
    theta = interp * (1.0 - ramp) + extrap * ramp;
    mscale *= 1.0 + 0.1 * std::log(factor);
  }
}

// x: [n_heads][head_dim]; dims >= n_rot of each head pass through. Local
// (sliding-window) layers of Gemma rotate with their own base, and Gemma 3's
// without the global scaling (a factor of 1: yarn's ramp then collapses too).
void ReferenceGguf::rope(Vec& x, int n_heads, int pos, bool local) const {
  const RefConfig& c = config;
  const int hd = c.head_dim, half = c.n_rot / 2;
  const double base = local ? c.rope_base_local : c.rope_base;
  const bool scaled = !local || c.local_rope_scaled;
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < half; ++i) {
      double theta, mscale;
      rope_angle_of(base, scaled ? c.scaling_factor : 1.0, scaled ? c.scaling : "none", i, pos, theta, mscale);
      const int a = h * hd + (config.neox ? i : 2 * i);
      const int b = h * hd + (config.neox ? i + half : 2 * i + 1);
      const double x0 = x[a], x1 = x[b];
      x[a] = mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
      x[b] = mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
    }
}

// The MoE FFN of the header's formula for one token's normed input h.
Vec ReferenceGguf::moe(const Layer& l, const Vec& h) const {
  const RefConfig& c = config;
  const int E = c.n_embd, X = c.n_expert, F = c.n_ff_exp;
  auto swiglu_ffn = [&](const Vec& wg, const Vec& wu, const Vec& wd, int n_ff) {
    Vec g = matvec(wg, h, n_ff);
    const Vec u = matvec(wu, h, n_ff);
    for (int i = 0; i < n_ff; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(wd, g, E);
  };
  Vec p = matvec(l.router, h, X);
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& e : p) sum += (e = std::exp(e - mx));
  for (double& e : p) e /= sum;
  std::vector<int> order(X);
  for (int e = 0; e < X; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  const int k = std::min(c.n_expert_used, X);
  double wsum = 0.0;
  for (int j = 0; j < k; ++j) wsum += p[order[j]];
  Vec out(E, 0.0);
  for (int j = 0; j < k; ++j) {
    const int e = order[j];
    const double w = c.moe_norm_weights ? p[e] / wsum : p[e];
    const uint64_t slab = uint64_t(F) * E;  // one expert's gate/up (and down) matrix
    const Vec y = swiglu_ffn(rows_of(l.gate_exps, E, uint64_t(e) * F, F), rows_of(l.up_exps, E, uint64_t(e) * F, F),
                             Vec(l.down_exps.begin() + std::ptrdiff_t(e * slab), l.down_exps.begin() + std::ptrdiff_t((e + 1) * slab)), F);
    for (int i = 0; i < E; ++i) out[i] += w * y[i];
  }
  if (c.shared_expert && !l.gate_shexp.empty()) {
    double s = 1.0;
    if (c.shared_gate) {
      double d = 0.0;
      for (int i = 0; i < E; ++i) d += l.gate_inp_shexp[i] * h[i];
      s = 1.0 / (1.0 + std::exp(-d));
    }
    const Vec y = swiglu_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, c.n_ff_shexp);
    for (int i = 0; i < E; ++i) out[i] += s * y[i];
  }
  return out;
}

std::vector<std::vector<double>> ReferenceGguf::forward_all(const std::vector<int>& tokens) const {
  const RefConfig& c = config;
  const int E = c.n_embd, hd = c.head_dim, Q = c.n_head * hd;
  std::vector<Vec> kcache(c.n_layer), vcache(c.n_layer);  // [layer][pos * K + kvh * hd + i]
  std::vector<Vec> logits;
  for (int pos = 0; pos < static_cast<int>(tokens.size()); ++pos) {
    Vec x(embd_.begin() + size_t(tokens[pos]) * E, embd_.begin() + size_t(tokens[pos] + 1) * E);
    for (double& e : x) e *= c.embd_scale;
    for (int il = 0; il < c.n_layer; ++il) {
      const Layer& l = layers_[il];
      const int K = c.n_head_kv_of(il) * hd, group = c.n_head / c.n_head_kv_of(il), window = c.window_of(il);
      Vec h = rmsnorm(x, l.attn_norm, c.rms_eps);
      Vec q = matvec(l.wq, h, Q, l.bq), k = matvec(l.wk, h, K, l.bk), v = matvec(l.wv, h, K, l.bv);
      if (c.qk_norm && !l.q_norm.empty()) head_norms(q, l.q_norm, hd, c.rms_eps);
      if (c.qk_norm && !l.k_norm.empty()) head_norms(k, l.k_norm, hd, c.rms_eps);
      const bool local = !c.layer_local.empty() && c.layer_local[il];
      rope(q, c.n_head, pos, local);
      rope(k, c.n_head_kv_of(il), pos, local);
      kcache[il].insert(kcache[il].end(), k.begin(), k.end());
      vcache[il].insert(vcache[il].end(), v.begin(), v.end());
      const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
      Vec att(Q, 0.0);
      for (int hq = 0; hq < c.n_head; ++hq) {
        const int kvh = hq / group;
        Vec w(pos - first + 1);
        for (int t = first; t <= pos; ++t) {
          double d = 0.0;
          for (int i = 0; i < hd; ++i) d += q[hq * hd + i] * kcache[il][size_t(t) * K + kvh * hd + i];
          const double score = d * (c.attn_scale > 0.0 ? c.attn_scale : 1.0 / std::sqrt(double(hd)));
          w[t - first] = c.attn_softcap > 0.0 ? c.attn_softcap * std::tanh(score / c.attn_softcap) : score;
        }
        const double mx = *std::max_element(w.begin(), w.end());
        double sum = 0.0;
        for (double& e : w) sum += (e = std::exp(e - mx));
        for (int t = first; t <= pos; ++t)
          for (int i = 0; i < hd; ++i) att[hq * hd + i] += w[t - first] / sum * vcache[il][size_t(t) * K + kvh * hd + i];
      }
      Vec o = matvec(l.wo, att, E);
      if (c.post_norms) o = rmsnorm(o, l.post_attn_norm, c.rms_eps);
      for (int i = 0; i < E; ++i) x[i] += o[i];
      h = rmsnorm(x, l.ffn_norm, c.rms_eps);
      if (c.n_expert > 0) {
        const Vec d = moe(l, h);
        for (int i = 0; i < E; ++i) x[i] += d[i];
        continue;
      }
      Vec g = matvec(l.w_gate, h, c.n_ff);
      const Vec u = matvec(l.w_up, h, c.n_ff);
      for (int i = 0; i < c.n_ff; ++i) g[i] = (c.gelu ? gelu_tanh(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      Vec d = matvec(l.w_down, g, E);
      if (c.post_norms) d = rmsnorm(d, l.post_ffw_norm, c.rms_eps);
      for (int i = 0; i < E; ++i) x[i] += d[i];
    }
    logits.push_back(matvec(out_, rmsnorm(x, out_norm_, c.rms_eps), c.n_vocab));
    if (c.final_softcap > 0.0)
      for (double& e : logits.back()) e = c.final_softcap * std::tanh(e / c.final_softcap);
  }
  return logits;
}

}  // namespace tern::test
