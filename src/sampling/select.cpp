#include "sampling/select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

namespace tern::detail {

namespace {

using Candidate = SampleCandidate;

// Below this size a range is simply sorted: partitioning no longer pays.
constexpr size_t kSortBelow = 32;

// Top-p bucketing: tokens are binned by distance from the max in
// log-probability, 1/8 nat per bucket, 64 nats in all (the last bucket holds
// the rest, whose mass is below e^-64 per token). Sets smaller than
// kBucketFrom go straight to the exact select.
constexpr size_t kBucketsPerNat = 8;
constexpr size_t kBuckets = 64 * kBucketsPerNat;
constexpr size_t kBucketFrom = 2048;

// Index of the median of c[a], c[b], c[d] under better().
size_t median_of_three(std::span<const Candidate> c, size_t a, size_t b, size_t d) {
  if (better(c[b], c[a])) std::swap(a, b);  // now c[a] is better than c[b]
  if (better(c[d], c[b])) {
    return better(c[d], c[a]) ? a : d;
  }
  return b;
}

// Lomuto partition of [lo, hi) around its median-of-three; returns the
// pivot's final index p: [lo, p) is better than the pivot, (p, hi) worse.
// Branch-free: every element is swapped and `store` advances by the compare
// result, because on real logits the compare is a coin flip the branch
// predictor loses.
size_t partition(std::span<Candidate> c, size_t lo, size_t hi) {
  const size_t last = hi - 1;
  std::swap(c[median_of_three(c, lo, lo + (hi - lo) / 2, last)], c[last]);
  const Candidate pivot = c[last];
  size_t store = lo;
  // Invariant: [lo, store) better than the pivot, [store, i) not.
  for (size_t i = lo; i < last; ++i) {
    const Candidate x = c[i];
    const bool is_better = better(x, pivot);
    c[i] = c[store];
    c[store] = x;
    store += is_better ? 1 : 0;
  }
  std::swap(c[store], c[last]);
  return store;
}

// Partitions allowed before falling back to sorting what is left; keeps the
// worst case at O(n log n) if the pivots keep landing near an end.
size_t partition_budget(size_t n) { return 2 * static_cast<size_t>(std::bit_width(n)) + 8; }

void sort_range(std::span<Candidate> c, size_t lo, size_t hi) {
  std::sort(c.begin() + static_cast<std::ptrdiff_t>(lo), c.begin() + static_cast<std::ptrdiff_t>(hi), better);
}

}  // namespace

void select_top_k_sorted(std::span<const float> logits, size_t k, std::vector<Candidate>& out) {
  out.clear();
  if (k == 0) return;
  const size_t n = logits.size();
  size_t i = 0;
  for (; i < n && out.size() < k; ++i) {
    const float l = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    out.push_back({static_cast<TokenId>(i), l, 0.0f});
    std::push_heap(out.begin(), out.end(), better);  // front: the worst kept
  }
  // Ids only grow from here, so a later token beats the worst kept one only
  // with a strictly larger logit; `!(l > floor)` also rejects NaN.
  float floor = out.front().logit;
  for (; i < n; ++i) {
    const float l = logits[i];
    if (!(l > floor)) continue;
    std::pop_heap(out.begin(), out.end(), better);
    out.back() = {static_cast<TokenId>(i), l, 0.0f};
    std::push_heap(out.begin(), out.end(), better);
    floor = out.front().logit;
  }
  // The heap's layout is library-specific; the sorted order is not.
  std::sort_heap(out.begin(), out.end(), better);
}

void select_top_k(std::span<Candidate> c, size_t k) {
  if (k == 0 || k >= c.size()) return;
  size_t lo = 0;
  size_t hi = c.size();
  size_t budget = partition_budget(c.size());
  // Invariant: [0, lo) are among the k best, [hi, n) are not, and lo <= k <= hi.
  while (hi - lo > kSortBelow && budget-- > 0) {
    const size_t p = partition(c, lo, hi);
    if (p == k || p + 1 == k) return;
    if (p > k) {
      hi = p;
    } else {
      lo = p + 1;
    }
  }
  sort_range(c, lo, hi);
}

size_t select_top_p_exact(std::span<Candidate> c, double target_mass) {
  size_t lo = 0;
  size_t hi = c.size();
  double mass_before = 0.0;  // total weight of [0, lo), all of it in the nucleus
  size_t budget = partition_budget(c.size());
  // Invariant: [0, lo) are the lo best and their mass is short of the target;
  // the nucleus ends inside [lo, hi) or, if hi == n, possibly not at all.
  while (hi - lo > kSortBelow && budget-- > 0) {
    const size_t p = partition(c, lo, hi);
    double mass_left = 0.0;
    for (size_t i = lo; i < p; ++i) mass_left += c[i].weight;
    if (mass_before + mass_left >= target_mass) {
      hi = p;
      continue;
    }
    mass_before += mass_left + c[p].weight;
    if (mass_before >= target_mass) return p + 1;
    lo = p + 1;
  }
  sort_range(c, lo, hi);
  double cum = mass_before;
  for (size_t i = lo; i < hi; ++i) {
    cum += c[i].weight;
    if (cum >= target_mass) return i + 1;
  }
  // Only reachable through rounding (summation order differs between the
  // checks above): keep everything the search had not excluded.
  return hi;
}

size_t select_top_p(std::span<Candidate> c, double target_mass, float max_logit, float temperature) {
  if (c.size() < kBucketFrom) return select_top_p_exact(c, target_mass);
  // The bucket is a monotone function of the logit (IEEE rounding is
  // monotone), so buckets [0, b] hold a best-first prefix of the candidates.
  const float scale = static_cast<float>(kBucketsPerNat) / temperature;
  auto bucket_of = [&](float logit) {
    const float d = (max_logit - logit) * scale;  // >= 0; +inf for masked tokens
    return d < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(d) : kBuckets - 1;
  };
  // Four interleaved histograms: neighbouring tokens often share a bucket,
  // and one histogram would make each add wait for the previous store.
  double bucket_mass[4][kBuckets] = {};
  for (size_t i = 0; i < c.size(); ++i) bucket_mass[i % 4][bucket_of(c[i].logit)] += c[i].weight;
  size_t last_bucket = kBuckets - 1;
  double cum = 0.0;
  for (size_t b = 0; b < kBuckets; ++b) {
    cum += (bucket_mass[0][b] + bucket_mass[1][b]) + (bucket_mass[2][b] + bucket_mass[3][b]);
    if (cum >= target_mass) {
      last_bucket = b;
      break;
    }
  }
  // Those buckets hold the whole nucleus: move them to the front (branch-free,
  // as in partition()) and find the exact cut among them only.
  size_t n_front = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const Candidate x = c[i];
    const bool in_front = bucket_of(x.logit) <= last_bucket;
    c[i] = c[n_front];
    c[n_front] = x;
    n_front += in_front ? 1 : 0;
  }
  return select_top_p_exact(c.first(n_front), target_mass);
}

}  // namespace tern::detail
