#include "spec/step_cost.h"

#include <algorithm>
#include <bit>

namespace tern {
namespace {

constexpr double kEma = 0.1;         // weight of a new step
constexpr double kPriorSlope = 0.08;  // of a one-token step per extra token, where nothing is known

}  // namespace

void StepCost::observe(int64_t n_tokens, double seconds) {
  if (n_tokens <= 0 || !(seconds > 0)) return;
  const int b = std::min(kBuckets - 1, static_cast<int>(std::bit_width(static_cast<uint64_t>(n_tokens))) - 1);
  Bucket& k = buckets_[static_cast<size_t>(b)];
  // The first few steps of a bucket are averaged plainly, then an EMA follows drift.
  const double w = k.count < 10 ? 1.0 / static_cast<double>(k.count + 1) : kEma;
  k.n += w * (static_cast<double>(n_tokens) - k.n);
  k.t += w * (seconds - k.t);
  ++k.count;
}

double StepCost::seconds(double n) const {
  // The buckets seen, as points (n, t) in order of n.
  std::array<const Bucket*, kBuckets> seen{};
  int m = 0;
  for (const Bucket& b : buckets_)
    if (b.count > 0) seen[static_cast<size_t>(m++)] = &b;
  if (m == 0) return -1.0;
  if (m == 1) {  // one size seen: the prior rule around it
    const Bucket& b = *seen[0];
    const double t = b.t * (1.0 + kPriorSlope * std::max(1.0, b.n / 4.0) * (n - b.n) / std::max(1.0, b.n));
    return std::max(t, 0.25 * b.t);
  }
  // Piecewise linear through the points, the end segments extended (a
  // speculating engine rarely runs a step of its base size: that cost comes
  // from the slope next to it), never decreasing, never below a quarter of
  // the smallest step seen.
  int i = 0;
  while (i + 2 < m && seen[static_cast<size_t>(i + 1)]->n <= n) ++i;
  const Bucket &a = *seen[static_cast<size_t>(i)], &b = *seen[static_cast<size_t>(i + 1)];
  const double slope = std::max(0.0, (b.t - a.t) / std::max(1e-9, b.n - a.n));
  return std::max(a.t + slope * (n - a.n), 0.25 * seen[0]->t);
}

double StepCost::ratio(double n_base, double n_extra) const {
  const double t0 = seconds(n_base);
  if (t0 <= 0) return 1.0 + kPriorSlope * std::max(1.0, n_base / 4.0) * n_extra / std::max(1.0, n_base);
  return std::max(1.0, seconds(n_base + n_extra) / t0);
}

}  // namespace tern
