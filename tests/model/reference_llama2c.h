// A plain double-precision llama2.c forward pass, written for the tests only
// and sharing no code with the engine: it reads the legacy checkpoint bytes
// itself and follows llama2.c's run.c math (RMSNorm eps 1e-5, adjacent-pair
// RoPE with theta 10000, GQA, SwiGLU, tied classifier).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tern::test {

class ReferenceLlama2c {
 public:
  bool load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 28) return false;
    int32_t h[7];
    std::memcpy(h, bytes.data(), 28);
    dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4], vocab = std::abs(h[5]), seq_len = h[6];
    const size_t n_floats = (bytes.size() - 28) / 4;
    std::vector<float> f(n_floats);
    std::memcpy(f.data(), bytes.data() + 28, n_floats * 4);
    w_.assign(f.begin(), f.end());
    head = dim / n_heads;
    kv_dim = head * n_kv_heads;
    size_t o = 0;
    auto take = [&](size_t n) { size_t at = o; o += n; return at; };
    emb_ = take(size_t(vocab) * dim);
    rms_att_ = take(size_t(n_layers) * dim);
    wq_ = take(size_t(n_layers) * dim * dim);
    wk_ = take(size_t(n_layers) * kv_dim * dim);
    wv_ = take(size_t(n_layers) * kv_dim * dim);
    wo_ = take(size_t(n_layers) * dim * dim);
    rms_ffn_ = take(size_t(n_layers) * dim);
    w1_ = take(size_t(n_layers) * hidden * dim);
    w2_ = take(size_t(n_layers) * dim * hidden);
    w3_ = take(size_t(n_layers) * hidden * dim);
    rms_final_ = take(dim);
    return o <= w_.size();
  }

  // Logits [vocab] after feeding every token of `tokens` (positions 0..n-1); returns one row per token.
  // block_cos (when given, [n_layers]): each layer adds, per token, cos(x entering it, x leaving it).
  std::vector<std::vector<double>> forward_all(const std::vector<int>& tokens, std::vector<double>* block_cos = nullptr) const {
    std::vector<std::vector<double>> kcache(n_layers), vcache(n_layers), out;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      std::vector<double> x(dim);
      for (int i = 0; i < dim; ++i) x[i] = w_[emb_ + size_t(tokens[pos]) * dim + i];
      for (int l = 0; l < n_layers; ++l) {
        const std::vector<double> x_in = x;
        auto xb = rmsnorm(x, rms_att_ + size_t(l) * dim);
        auto q = matvec(wq_ + size_t(l) * dim * dim, xb, dim, dim);
        auto k = matvec(wk_ + size_t(l) * kv_dim * dim, xb, kv_dim, dim);
        auto v = matvec(wv_ + size_t(l) * kv_dim * dim, xb, kv_dim, dim);
        for (int i = 0; i < dim; i += 2) {
          const double freq = 1.0 / std::pow(10000.0, double(i % head) / head);
          const double a = pos * freq, c = std::cos(a), s = std::sin(a);
          auto rot = [&](std::vector<double>& t) {
            const double t0 = t[i], t1 = t[i + 1];
            t[i] = t0 * c - t1 * s;
            t[i + 1] = t0 * s + t1 * c;
          };
          rot(q);
          if (i < kv_dim) rot(k);
        }
        kcache[l].insert(kcache[l].end(), k.begin(), k.end());
        vcache[l].insert(vcache[l].end(), v.begin(), v.end());
        std::vector<double> att_out(dim, 0.0);
        for (int h = 0; h < n_heads; ++h) {
          const int kvh = h / (n_heads / n_kv_heads);
          std::vector<double> sc(pos + 1);
          double mx = -1e300;
          for (size_t t = 0; t <= pos; ++t) {
            double d = 0;
            for (int i = 0; i < head; ++i) d += q[h * head + i] * kcache[l][t * kv_dim + kvh * head + i];
            sc[t] = d / std::sqrt(double(head));
            mx = std::max(mx, sc[t]);
          }
          double sum = 0;
          for (auto& e : sc) sum += (e = std::exp(e - mx));
          for (size_t t = 0; t <= pos; ++t)
            for (int i = 0; i < head; ++i) att_out[h * head + i] += sc[t] / sum * vcache[l][t * kv_dim + kvh * head + i];
        }
        auto o = matvec(wo_ + size_t(l) * dim * dim, att_out, dim, dim);
        for (int i = 0; i < dim; ++i) x[i] += o[i];
        xb = rmsnorm(x, rms_ffn_ + size_t(l) * dim);
        auto g = matvec(w1_ + size_t(l) * hidden * dim, xb, hidden, dim);
        auto u = matvec(w3_ + size_t(l) * hidden * dim, xb, hidden, dim);
        for (int i = 0; i < hidden; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        auto d = matvec(w2_ + size_t(l) * dim * hidden, g, dim, hidden);
        for (int i = 0; i < dim; ++i) x[i] += d[i];
        if (block_cos) {
          double ab = 0, aa = 0, bb = 0;
          for (int i = 0; i < dim; ++i) ab += x_in[i] * x[i], aa += x_in[i] * x_in[i], bb += x[i] * x[i];
          (*block_cos)[size_t(l)] += ab / std::sqrt(aa * bb);
        }
      }
      auto xf = rmsnorm(x, rms_final_);
      out.push_back(matvec(emb_, xf, vocab, dim));
    }
    return out;
  }

  int dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0, seq_len = 0, head = 0, kv_dim = 0;

 private:
  std::vector<double> rmsnorm(const std::vector<double>& x, size_t wofs) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double s = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w_[wofs + i];
    return y;
  }
  std::vector<double> matvec(size_t wofs, const std::vector<double>& x, int rows, int cols) const {
    std::vector<double> y(rows);
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (int c = 0; c < cols; ++c) acc += w_[wofs + size_t(r) * cols + c] * x[c];
      y[r] = acc;
    }
    return y;
  }
  std::vector<double> w_;
  size_t emb_ = 0, rms_att_ = 0, wq_ = 0, wk_ = 0, wv_ = 0, wo_ = 0, rms_ffn_ = 0, w1_ = 0, w2_ = 0, w3_ = 0, rms_final_ = 0;
};

}  // namespace tern::test
