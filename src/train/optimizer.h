// train/optimizer.h — AdamW with decoupled weight decay, global gradient-norm
// clipping, and the warm-up + cosine learning-rate schedule (docs/train.md).
#pragma once

#include <cstdint>
#include <span>

namespace tern::train {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// One AdamW step (Loshchilov & Hutter) over a parameter tensor with its
// gradient and moment buffers, at step t (from 1) with rate lr:
//   p -= lr·wd·p (when decay; norms and biases are not decayed)
//   m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²
//   p -= lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + eps)
void adamw_step(const AdamWConfig& c, std::span<float> param, std::span<const float> grad, std::span<float> m,
                std::span<float> v, int64_t t, double lr, bool decay);

// Scales the gradients so their joint L2 norm is at most max_norm (no-op
// when it already is, or when max_norm <= 0); returns the norm before.
double clip_grad_norm(std::span<const std::span<float>> grads, double max_norm);

// Linear warm-up to lr_max over `warmup` steps, then a cosine from lr_max
// down to lr_min at step `total`, lr_min after it. Steps count from 0.
struct LrSchedule {
  double lr_max = 3e-4;
  double lr_min = 3e-5;
  int64_t warmup = 0;
  int64_t total = 1;
  double at(int64_t step) const;
};

}  // namespace tern::train
