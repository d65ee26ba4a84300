// tests/model/ssm_test_util.h — what the Mamba and Mamba-2 model tests share:
// scratch model files, prompts, the error measure, and a GGUF file's tensors
// decoded to double with the few operations their references need.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
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

}  // namespace tern::test
