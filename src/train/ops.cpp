#include "train/ops.h"

#include <cmath>
#include <cstring>

namespace tern::train {

template <typename F>
void embedding_forward(const F* table, const int32_t* tokens, int64_t T, int64_t C, F* out) {
  for (int64_t t = 0; t < T; ++t) std::memcpy(out + t * C, table + int64_t{tokens[t]} * C, sizeof(F) * C);
}

template <typename F>
void embedding_backward(const F* dout, const int32_t* tokens, int64_t T, int64_t C, F* dtable) {
  for (int64_t t = 0; t < T; ++t) {
    F* row = dtable + int64_t{tokens[t]} * C;
    for (int64_t i = 0; i < C; ++i) row[i] += dout[t * C + i];
  }
}

template <typename F>
void rmsnorm_forward(const F* x, const F* w, int64_t T, int64_t C, F eps, F* out, F* rstd) {
  for (int64_t t = 0; t < T; ++t) {
    const F* xr = x + t * C;
    double ss = 0;
    for (int64_t i = 0; i < C; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const F r = static_cast<F>(1.0 / std::sqrt(ss / static_cast<double>(C) + static_cast<double>(eps)));
    rstd[t] = r;
    for (int64_t i = 0; i < C; ++i) out[t * C + i] = xr[i] * r * w[i];
  }
}

// y_i = x_i r w_i with r = (mean x² + eps)^(-1/2): dr/dx_j = -r³ x_j / C, so
// dx_j = r w_j dy_j - (r³ / C) x_j Σ_i dy_i w_i x_i.
template <typename F>
void rmsnorm_backward(const F* dout, const F* x, const F* w, const F* rstd, int64_t T, int64_t C, F* dx, F* dw) {
  for (int64_t t = 0; t < T; ++t) {
    const F* xr = x + t * C;
    const F* dy = dout + t * C;
    const F r = rstd[t];
    double dot = 0;
    for (int64_t i = 0; i < C; ++i) dot += static_cast<double>(dy[i]) * w[i] * xr[i];
    const F c = static_cast<F>(static_cast<double>(r) * r * r * dot / static_cast<double>(C));
    for (int64_t i = 0; i < C; ++i) {
      dx[t * C + i] += r * w[i] * dy[i] - c * xr[i];
      dw[i] += dy[i] * xr[i] * r;
    }
  }
}

template <typename F>
void linear_forward(const F* x, const F* W, int64_t T, int64_t K, int64_t N, F* out, ThreadPool& pool) {
  pool.parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t) {
      const F* xr = x + static_cast<int64_t>(t) * K;
      for (int64_t n = 0; n < N; ++n) {
        const F* wr = W + n * K;
        F acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += xr[k] * wr[k];
        out[static_cast<int64_t>(t) * N + n] = acc;
      }
    }
  });
}

template <typename F>
void linear_backward(const F* dout, const F* x, const F* W, int64_t T, int64_t K, int64_t N, F* dx, F* dW,
                     ThreadPool& pool) {
  // dx[t] += Σ_n dout[t][n] W[n]
  pool.parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t) {
      F* dxr = dx + static_cast<int64_t>(t) * K;
      for (int64_t n = 0; n < N; ++n) {
        const F g = dout[static_cast<int64_t>(t) * N + n];
        if (g == 0) continue;
        const F* wr = W + n * K;
        for (int64_t k = 0; k < K; ++k) dxr[k] += g * wr[k];
      }
    }
  });
  // dW[n] += Σ_t dout[t][n] x[t]
  pool.parallel_for(static_cast<size_t>(N), [&](size_t b, size_t e, int) {
    for (size_t n = b; n < e; ++n) {
      F* dwr = dW + static_cast<int64_t>(n) * K;
      for (int64_t t = 0; t < T; ++t) {
        const F g = dout[t * N + static_cast<int64_t>(n)];
        if (g == 0) continue;
        const F* xr = x + t * K;
        for (int64_t k = 0; k < K; ++k) dwr[k] += g * xr[k];
      }
    }
  });
}

template <typename F>
void swiglu_forward(const F* gate, const F* up, int64_t n, F* out) {
  for (int64_t i = 0; i < n; ++i) {
    const F s = F(1) / (F(1) + std::exp(-gate[i]));
    out[i] = gate[i] * s * up[i];
  }
}

// silu(g) = g σ(g); silu'(g) = σ(g) (1 + g (1 − σ(g))).
template <typename F>
void swiglu_backward(const F* dout, const F* gate, const F* up, int64_t n, F* dgate, F* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const F s = F(1) / (F(1) + std::exp(-gate[i]));
    const F silu = gate[i] * s;
    dgate[i] += dout[i] * up[i] * s * (F(1) + gate[i] * (F(1) - s));
    dup[i] += dout[i] * silu;
  }
}

namespace {

// Turns every pair of x [T][H][D] by sign · t · base^(-2i/D).
template <typename F>
void rotate(F* x, int64_t T, int64_t H, int64_t D, F base, bool neox, F sign) {
  const int64_t half = D / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double theta = static_cast<double>(t) * std::pow(static_cast<double>(base), -2.0 * i / static_cast<double>(D));
      const F c = static_cast<F>(std::cos(theta)), s = static_cast<F>(sign * std::sin(theta));
      for (int64_t h = 0; h < H; ++h) {
        F* head = x + (t * H + h) * D;
        F& a = head[neox ? i : 2 * i];
        F& b = head[neox ? i + half : 2 * i + 1];
        const F a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = a0 * s + b0 * c;
      }
    }
}

}  // namespace

template <typename F>
void rope_forward(F* x, int64_t T, int64_t H, int64_t D, F base, bool neox) {
  rotate(x, T, H, D, base, neox, F(1));
}
template <typename F>
void rope_backward(F* dx, int64_t T, int64_t H, int64_t D, F base, bool neox) {
  rotate(dx, T, H, D, base, neox, F(-1));
}

#define TERN_TRAIN_OPS(F)                                                                                         \
  template void embedding_forward<F>(const F*, const int32_t*, int64_t, int64_t, F*);                            \
  template void embedding_backward<F>(const F*, const int32_t*, int64_t, int64_t, F*);                           \
  template void rmsnorm_forward<F>(const F*, const F*, int64_t, int64_t, F, F*, F*);                              \
  template void rmsnorm_backward<F>(const F*, const F*, const F*, const F*, int64_t, int64_t, F*, F*);            \
  template void linear_forward<F>(const F*, const F*, int64_t, int64_t, int64_t, F*, ThreadPool&);                \
  template void linear_backward<F>(const F*, const F*, const F*, int64_t, int64_t, int64_t, F*, F*, ThreadPool&); \
  template void swiglu_forward<F>(const F*, const F*, int64_t, F*);                                               \
  template void swiglu_backward<F>(const F*, const F*, const F*, int64_t, F*, F*);                                \
  template void rope_forward<F>(F*, int64_t, int64_t, int64_t, F, bool);                                          \
  template void rope_backward<F>(F*, int64_t, int64_t, int64_t, F, bool);
TERN_TRAIN_OPS(float)
TERN_TRAIN_OPS(double)
#undef TERN_TRAIN_OPS

}  // namespace tern::train
