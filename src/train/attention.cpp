// Causal attention for training: forward saves each query row's
// log-sum-exp; backward recomputes the row's probabilities from it (flash
// attention's recomputation), so neither pass holds more than one row of
// scores per thread.
#include <cmath>
#include <vector>

#include "train/ops.h"

namespace tern::train {

template <typename F>
void attention_forward(const F* q, const F* k, const F* v, int64_t T, int64_t H, int64_t Hkv, int64_t D, F scale,
                       F* out, F* lse, ThreadPool& pool) {
  const int64_t group = H / Hkv;
  pool.parallel_for(static_cast<size_t>(T * H), [&](size_t b, size_t e, int) {
    std::vector<double> s(static_cast<size_t>(T));
    std::vector<double> acc(static_cast<size_t>(D));
    for (size_t job = b; job < e; ++job) {
      const int64_t t = static_cast<int64_t>(job) / H, h = static_cast<int64_t>(job) % H, kh = h / group;
      const F* qr = q + (t * H + h) * D;
      double m = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        const F* kr = k + (j * Hkv + kh) * D;
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += static_cast<double>(qr[i]) * kr[i];
        s[static_cast<size_t>(j)] = d * static_cast<double>(scale);
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= t; ++j) {
        const double p = std::exp(s[static_cast<size_t>(j)] - m);
        sum += p;
        const F* vr = v + (j * Hkv + kh) * D;
        for (int64_t i = 0; i < D; ++i) acc[static_cast<size_t>(i)] += p * vr[i];
      }
      F* o = out + (t * H + h) * D;
      for (int64_t i = 0; i < D; ++i) o[i] = static_cast<F>(acc[static_cast<size_t>(i)] / sum);
      lse[t * H + h] = static_cast<F>(m + std::log(sum));
    }
  });
}

// With p_j = exp(s_j − lse) and s_j = scale · q·k_j:
//   dv_j += p_j dout,  ds_j = p_j (dout·v_j − dout·out),  dq += scale Σ ds_j k_j,  dk_j += scale ds_j q.
// Each thread takes whole K/V heads (with their query heads), so it alone
// writes its dk and dv rows: no races, and sums in a fixed order.
template <typename F>
void attention_backward(const F* dout, const F* q, const F* k, const F* v, const F* out, const F* lse, int64_t T,
                        int64_t H, int64_t Hkv, int64_t D, F scale, F* dq, F* dk, F* dv, ThreadPool& pool) {
  const int64_t group = H / Hkv;
  pool.parallel_for(static_cast<size_t>(Hkv), [&](size_t b, size_t e, int) {
    std::vector<double> dqr(static_cast<size_t>(D));
    for (size_t kh_ = b; kh_ < e; ++kh_) {
      const int64_t kh = static_cast<int64_t>(kh_);
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const F* qr = q + (t * H + h) * D;
          const F* dor = dout + (t * H + h) * D;
          const F* orow = out + (t * H + h) * D;
          double di = 0;
          for (int64_t i = 0; i < D; ++i) di += static_cast<double>(dor[i]) * orow[i];
          const double l = lse[t * H + h];
          std::fill(dqr.begin(), dqr.end(), 0.0);
          for (int64_t j = 0; j <= t; ++j) {
            const F* kr = k + (j * Hkv + kh) * D;
            const F* vr = v + (j * Hkv + kh) * D;
            double sc = 0, dp = 0;
            for (int64_t i = 0; i < D; ++i) {
              sc += static_cast<double>(qr[i]) * kr[i];
              dp += static_cast<double>(dor[i]) * vr[i];
            }
            const double p = std::exp(sc * static_cast<double>(scale) - l);
            const double ds = p * (dp - di) * static_cast<double>(scale);
            F* dkr = dk + (j * Hkv + kh) * D;
            F* dvr = dv + (j * Hkv + kh) * D;
            for (int64_t i = 0; i < D; ++i) {
              dqr[static_cast<size_t>(i)] += ds * kr[i];
              dkr[i] += static_cast<F>(ds * qr[i]);
              dvr[i] += static_cast<F>(p * dor[i]);
            }
          }
          F* dqo = dq + (t * H + h) * D;
          for (int64_t i = 0; i < D; ++i) dqo[i] += static_cast<F>(dqr[static_cast<size_t>(i)]);
        }
    }
  });
}

template void attention_forward<float>(const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                       float, float*, float*, ThreadPool&);
template void attention_forward<double>(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                        int64_t, double, double*, double*, ThreadPool&);
template void attention_backward<float>(const float*, const float*, const float*, const float*, const float*,
                                        const float*, int64_t, int64_t, int64_t, int64_t, float, float*, float*, float*,
                                        ThreadPool&);
template void attention_backward<double>(const double*, const double*, const double*, const double*, const double*,
                                         const double*, int64_t, int64_t, int64_t, int64_t, double, double*, double*,
                                         double*, ThreadPool&);

}  // namespace tern::train
