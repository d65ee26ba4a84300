#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tern::train {

void adamw_step(const AdamWConfig& c, std::span<float> param, std::span<const float> grad, std::span<float> m,
                std::span<float> v, int64_t t, double lr, bool decay) {
  const double b1t = 1.0 - std::pow(c.beta1, static_cast<double>(t));
  const double b2t = 1.0 - std::pow(c.beta2, static_cast<double>(t));
  for (size_t i = 0; i < param.size(); ++i) {
    double p = param[i];
    if (decay) p -= lr * c.weight_decay * p;
    const double g = grad[i];
    const double mi = c.beta1 * m[i] + (1.0 - c.beta1) * g;
    const double vi = c.beta2 * v[i] + (1.0 - c.beta2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    p -= lr * (mi / b1t) / (std::sqrt(vi / b2t) + c.eps);
    param[i] = static_cast<float>(p);
  }
}

double clip_grad_norm(std::span<const std::span<float>> grads, double max_norm) {
  double ss = 0;
  for (const std::span<float>& g : grads)
    for (float x : g) ss += static_cast<double>(x) * x;
  const double norm = std::sqrt(ss);
  if (max_norm > 0 && norm > max_norm) {
    const float s = static_cast<float>(max_norm / norm);
    for (const std::span<float>& g : grads)
      for (float& x : g) x *= s;
  }
  return norm;
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr_max * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace tern::train
