#include "engine/step_cost.h"

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
  const Bucket* lo = nullptr;  // the nearest bucket seen at or below n, and above it
  const Bucket* hi = nullptr;
  const Bucket* first = nullptr;
  const Bucket* last = nullptr;
  for (const Bucket& b : buckets_) {
    if (b.count == 0) continue;
    if (!first) first = &b;
    last = &b;
    if (b.n <= n) lo = &b;
    else if (!hi) hi = &b;
  }
  if (!first) return -1.0;
  if (!lo) return first->t;  // below everything seen: flat
  if (!hi)  // above everything seen: the prior rule from the largest step seen
    return last->t * (1.0 + kPriorSlope * std::max(1.0, last->n / 4.0) * (n - last->n) / std::max(1.0, last->n));
  const double f = (n - lo->n) / std::max(1e-9, hi->n - lo->n);
  return std::max(lo->t, lo->t + f * (hi->t - lo->t));  // never cheaper for more tokens
}

double StepCost::ratio(double n_base, double n_extra) const {
  const double t0 = seconds(n_base);
  if (t0 <= 0) return 1.0 + kPriorSlope * std::max(1.0, n_base / 4.0) * n_extra / std::max(1.0, n_base);
  return std::max(1.0, seconds(n_base + n_extra) / t0);
}

}  // namespace tern
