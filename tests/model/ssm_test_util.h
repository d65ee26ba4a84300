// tests/model/ssm_test_util.h — what the Mamba, Mamba-2 and Nemotron-H model
// tests share: scratch model files, prompts, the error measure, a GGUF file's
// tensors decoded to double with the few operations their references need,
// and the Mamba-2 mixer in double.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "one_by_one.h"
#include "quant/quant.h"
#include "scratch_model.h"
#include "tokenizer/tokenizer.h"

namespace tern::test {

inline std::string ssm_vocab_path() {
  return std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf";
}

inline std::vector<TokenId> ssm_prompt(size_t n) {
  std::vector<TokenId> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<TokenId>(1 + (i * 7919 + 13) % 31000));
  return t;
}

// The largest |a - b| over every row, relative to the largest |b|.
inline double rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<double>>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t r = 0; r < b.size(); ++r)
    for (size_t i = 0; i < b[r].size(); ++i) {
      diff = std::max(diff, std::abs(a[r][i] - b[r][i]));
      scale = std::max(scale, std::abs(b[r][i]));
    }
  return diff / scale;
}

// A GGUF file's tensors in double, each decoded once.
class DecodedGguf {
 public:
  explicit DecodedGguf(const std::string& path) : f_(std::move(gguf::GgufFile::open(path)).value()) {}

  const gguf::GgufFile& file() const { return f_; }
  int key(const std::string& name) const { return static_cast<int>(*f_.get_u64(name)); }

  const std::vector<double>& tensor(const std::string& name) {
    auto it = decoded_.find(name);
    if (it != decoded_.end()) return it->second;
    std::vector<double>& out = decoded_[name];
    const gguf::TensorInfo* t = f_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return out;
    const quant::TypeTraits* tr = quant::traits(t->type);
    std::vector<float> v(t->n_elements);
    tr->to_float(t->data, v.data(), static_cast<int64_t>(t->n_elements));
    out.assign(v.begin(), v.end());
    return out;
  }

  // The sizes a Mamba file's <arch>.* keys give (n_group: Mamba-2 only).
  struct Sizes {
    int n_embd = 0, n_layer = 0, d_conv = 0, d_inner = 0, d_state = 0, dt_rank = 0, n_group = 0;
    double eps = 1e-5;
  };
  Sizes sizes(const std::string& arch) const {
    Sizes z;
    z.n_embd = key(arch + ".embedding_length");
    z.n_layer = key(arch + ".block_count");
    z.d_conv = key(arch + ".ssm.conv_kernel");
    z.d_inner = key(arch + ".ssm.inner_size");
    z.d_state = key(arch + ".ssm.state_size");
    z.dt_rank = key(arch + ".ssm.time_step_rank");
    if (f_.find(arch + ".ssm.group_count")) z.n_group = key(arch + ".ssm.group_count");
    z.eps = *f_.get_f64_or(arch + ".attention.layer_norm_rms_epsilon", 1e-5);
    return z;
  }

  // One token through a causal depthwise convolution of n_ch channels: silu
  // of (bias +) the taps ([n_ch][dc]) over the kept inputs ([dc - 1][n_ch],
  // oldest first) and `in`; then `in` joins the kept inputs.
  static std::vector<double> conv_step(std::vector<double>& keep, const std::vector<double>& taps,
                                       const std::vector<double>* bias, const double* in, size_t n_ch, size_t dc) {
    std::vector<double> u(n_ch);
    for (size_t c = 0; c < n_ch; ++c) {
      double acc = bias ? (*bias)[c] : 0.0;
      for (size_t k = 0; k + 1 < dc; ++k) acc += taps[c * dc + k] * keep[k * n_ch + c];
      acc += taps[c * dc + dc - 1] * in[c];
      u[c] = silu(acc);
      for (size_t k = 0; k + 2 < dc; ++k) keep[k * n_ch + c] = keep[(k + 1) * n_ch + c];
      if (dc >= 2) keep[(dc - 2) * n_ch + c] = in[c];
    }
    return u;
  }

  // The logits of the residual stream x: output_norm, then the output matrix.
  std::vector<double> head_logits(const std::vector<double>& x, double eps) {
    const std::vector<double> xf = rms_norm(x, tensor("output_norm.weight").data(), eps);
    const std::vector<double>& head = tensor("output.weight");
    return matvec(head, xf, head.size() / x.size());
  }

  static double silu(double v) { return v / (1.0 + std::exp(-v)); }
  // x / rms(x) * w over x's values (w: x.size() of them from w_at).
  static std::vector<double> rms_norm(const std::vector<double>& x, const double* w, double eps) {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  // m: [n_out][x.size()] row-major, as GGUF stores [n_in, n_out].
  static std::vector<double> matvec(const std::vector<double>& m, const std::vector<double>& x, size_t n_out) {
    std::vector<double> y(n_out, 0.0);
    for (size_t r = 0; r < n_out; ++r)
      for (size_t i = 0; i < x.size(); ++i) y[r] += m[r * x.size() + i] * x[i];
    return y;
  }

 private:
  gguf::GgufFile f_;
  std::map<std::string, std::vector<double>> decoded_;
};

// Copies the GGUF at `path` to `out` with metadata key `key` set to `value`
// (added when absent), every tensor as it is.
inline Status rewrite_key(const std::string& path, const std::string& out, const std::string& key, gguf::Value value) {
  auto f = gguf::GgufFile::open(path);
  if (!f) return f.status();
  gguf::GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  w.set(key, std::move(value));
  for (const gguf::TensorInfo& t : f->tensors())
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.dims.begin(), t.dims.begin() + t.n_dims),
                                      {t.data, t.n_bytes}));
  return w.write(out);
}

// Two prompts a (30 tokens) and b (17) fed together in chunks (7 + 6, 1 + 1,
// 22 + 10 tokens per pass) through `runner` (two sequences) must give, row
// for row, the logits one-token-at-a-time decode gives each alone.
inline void expect_chunked_pairs_match_decode(const Model& model, BatchRunner& runner) {
  const std::vector<TokenId> a = ssm_prompt(30);
  std::vector<TokenId> b = ssm_prompt(17);
  std::reverse(b.begin(), b.end());
  const auto alone_a = logits_one_by_one(model, a);
  const auto alone_b = logits_one_by_one(model, b);
  int32_t pa = 0, pb = 0;
  for (const auto& [na, nb] : {std::pair{7, 6}, std::pair{1, 1}, std::pair{22, 10}}) {
    Batch batch;
    for (int i = 0; i < na; ++i, ++pa) batch.add(a[static_cast<size_t>(pa)], pa, SeqId(0), true);
    for (int i = 0; i < nb; ++i, ++pb) batch.add(b[static_cast<size_t>(pb)], pb, SeqId(1), true);
    std::vector<float> logits;
    ASSERT_TRUE(runner.forward(batch, logits).is_ok());
    const size_t n_vocab = logits.size() / static_cast<size_t>(na + nb);
    auto row = [&](int i) {
      return std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                                logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
    };
    for (int i = 0; i < na; ++i) EXPECT_EQ(row(i), alone_a[static_cast<size_t>(pa - na + i)]) << "a " << pa - na + i;
    for (int i = 0; i < nb; ++i) EXPECT_EQ(row(na + i), alone_b[static_cast<size_t>(pb - nb + i)]) << "b " << pb - nb + i;
  }
}

// Which terms of Mamba-2's mixer the reference computes (test_mamba2.cpp).
struct Mamba2Terms {
  bool conv_bias = true;
  bool d_skip = true;
  bool dt_bias = true;
  bool gate = true;
  bool norm = true;
  bool groups = true;  // off: every head reads group 0's B and C
};

// One layer's Mamba-2 state: the kept conv inputs and H[channel][state].
struct Mamba2State {
  explicit Mamba2State(const DecodedGguf::Sizes& z)
      : conv(static_cast<size_t>((z.d_conv - 1) * (z.d_inner + 2 * z.n_group * z.d_state)), 0.0),
        h(static_cast<size_t>(z.d_inner) * static_cast<size_t>(z.d_state), 0.0) {}
  std::vector<double> conv, h;
};

// Mamba-2's mixer of layer il on one token's normed input xn, in double, from
// the SSD paper's recurrent form (Dao & Gu 2024): [z, xBC, dt] = W_in xn;
// xBC = silu(conv(xBC) + bias); per head h of group g,
//   H_h = exp(dt_h A_h) H_h + dt_h x_h B_g^T,  y_h = H_h C_g + D_h x_h,
// y = groupnorm(y * silu(z)); returns W_out y.
inline std::vector<double> mamba2_step(DecodedGguf& g, const DecodedGguf::Sizes& z, int il, Mamba2State& st,
                                       const std::vector<double>& xn, const Mamba2Terms& terms) {
  auto w = [&](const char* name) -> const std::vector<double>& {
    return g.tensor("blk." + std::to_string(il) + "." + name);
  };
  const size_t di = static_cast<size_t>(z.d_inner), ds = static_cast<size_t>(z.d_state),
               dc = static_cast<size_t>(z.d_conv), nh = static_cast<size_t>(z.dt_rank),
               ng = static_cast<size_t>(z.n_group), hd = di / nh, nch = di + 2 * ng * ds;
  const std::vector<double> proj = DecodedGguf::matvec(w("ssm_in.weight"), xn, di + nch + nh);
  const double* zg = proj.data();
  const double* dt_raw = proj.data() + di + nch;
  // Causal depthwise convolution of x, B and C over (kept inputs, this input).
  const std::vector<double> u = DecodedGguf::conv_step(st.conv, w("ssm_conv1d.weight"),
                                                       terms.conv_bias ? &w("ssm_conv1d.bias") : nullptr,
                                                       proj.data() + di, nch, dc);
  const std::vector<double>&dt_bias = w("ssm_dt.bias"), &a = w("ssm_a"), &d = w("ssm_d");
  std::vector<double> y(di);
  for (size_t head = 0; head < nh; ++head) {
    const size_t gi = terms.groups ? head / (nh / ng) : 0;
    const double* bv = u.data() + di + gi * ds;
    const double* cv = u.data() + di + ng * ds + gi * ds;
    const double delta = std::log1p(std::exp(dt_raw[head] + (terms.dt_bias ? dt_bias[head] : 0.0)));
    const double decay = std::exp(delta * a[head]);
    for (size_t i = 0; i < hd; ++i) {
      const size_t c = head * hd + i;
      double acc = 0.0;
      for (size_t s = 0; s < ds; ++s) {
        double& hs = st.h[c * ds + s];
        hs = decay * hs + delta * u[c] * bv[s];
        acc += hs * cv[s];
      }
      if (terms.d_skip) acc += d[head] * u[c];
      y[c] = terms.gate ? acc * DecodedGguf::silu(zg[c]) : acc;
    }
  }
  if (terms.norm) {
    const std::vector<double>& nw = w("ssm_norm.weight");
    const size_t gs = di / ng;
    for (size_t gi = 0; gi < ng; ++gi) {
      const std::vector<double> part(y.begin() + static_cast<std::ptrdiff_t>(gi * gs),
                                     y.begin() + static_cast<std::ptrdiff_t>((gi + 1) * gs));
      const std::vector<double> normed = DecodedGguf::rms_norm(part, nw.data() + gi * gs, z.eps);
      std::copy(normed.begin(), normed.end(), y.begin() + static_cast<std::ptrdiff_t>(gi * gs));
    }
  }
  return DecodedGguf::matvec(w("ssm_out.weight"), y, static_cast<size_t>(z.n_embd));
}

}  // namespace tern::test
