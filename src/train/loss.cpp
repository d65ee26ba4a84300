// Training losses on logits rows: cross-entropy against next tokens, and the
// temperature-scaled KL divergence of distillation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "train/ops.h"

namespace tern::train {
namespace {

// p = softmax(z / tau) of one row, in double; returns log Σ exp(z / tau).
template <typename F>
double softmax_row(const F* z, int64_t V, double tau, std::vector<double>& p) {
  p.resize(static_cast<size_t>(V));
  double m = -INFINITY;
  for (int64_t i = 0; i < V; ++i) m = std::max(m, static_cast<double>(z[i]) / tau);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += (p[static_cast<size_t>(i)] = std::exp(static_cast<double>(z[i]) / tau - m));
  for (double& e : p) e /= sum;
  return m + std::log(sum);
}

}  // namespace

template <typename F>
double cross_entropy(const F* logits, const int32_t* targets, int64_t T, int64_t V, F* dlogits) {
  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t) n += targets[t] >= 0 ? 1 : 0;
  if (n == 0) return 0.0;
  std::vector<double> p;
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (targets[t] < 0) continue;
    const F* z = logits + t * V;
    const double lse = softmax_row(z, V, 1.0, p);
    loss += lse - static_cast<double>(z[targets[t]]);
    if (!dlogits) continue;
    F* d = dlogits + t * V;
    for (int64_t i = 0; i < V; ++i)
      d[i] += static_cast<F>((p[static_cast<size_t>(i)] - (i == targets[t] ? 1.0 : 0.0)) / static_cast<double>(n));
  }
  return loss / static_cast<double>(n);
}

// KL(p_t ‖ p_s) = Σ p_t (log p_t − log p_s); with log p_s = z_s / τ − lse_s,
// d/dz_s = (p_s − p_t) / τ, times the τ² factor and 1/T of the mean.
template <typename F>
double kl_distill(const F* student, const F* teacher, int64_t T, int64_t V, F temperature, F* dstudent) {
  if (T == 0) return 0.0;
  const double tau = temperature;
  std::vector<double> ps, pt;
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    const double ls = softmax_row(student + t * V, V, tau, ps);
    const double lt = softmax_row(teacher + t * V, V, tau, pt);
    double kl = 0;
    for (int64_t i = 0; i < V; ++i) {
      const double q = pt[static_cast<size_t>(i)];
      if (q > 0)
        kl += q * ((static_cast<double>(teacher[t * V + i]) / tau - lt) - (static_cast<double>(student[t * V + i]) / tau - ls));
    }
    loss += tau * tau * kl;
    if (!dstudent) continue;
    for (int64_t i = 0; i < V; ++i)
      dstudent[t * V + i] += static_cast<F>(tau * (ps[static_cast<size_t>(i)] - pt[static_cast<size_t>(i)]) / static_cast<double>(T));
  }
  return loss / static_cast<double>(T);
}

template double cross_entropy<float>(const float*, const int32_t*, int64_t, int64_t, float*);
template double cross_entropy<double>(const double*, const int32_t*, int64_t, int64_t, double*);
template double kl_distill<float>(const float*, const float*, int64_t, int64_t, float, float*);
template double kl_distill<double>(const double*, const double*, int64_t, int64_t, double, double*);

}  // namespace tern::train
