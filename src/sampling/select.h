// sampling/select.h — choosing the best candidates without sorting them all.
//
// Contract: candidates are ordered by a strict total order, "better" = higher
// logit, then lower id (NaN logits must already be replaced by -inf). Being
// total, it defines one kept set for every top-k / top-p question, whatever
// algorithm answers it.
//
// These functions rearrange candidates in place with our own partitioning
// code, never std::nth_element, whose resulting order is implementation-
// defined: the sampler draws by scanning the kept prefix in array order, so
// the arrangement itself must be the same on every platform for a seed to
// reproduce the same tokens.
//
// Cost: expected O(n) for the quickselects (median-of-three pivots, falling
// back to a sort of the remaining range if partitions stay lopsided), O(n log k)
// worst case for the heap, which in practice rejects most tokens with one
// compare.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/ids.h"

namespace tern::detail {

// One token of the current step.
struct SampleCandidate {
  TokenId id;
  float logit;   // NaN replaced by -inf
  float weight;  // softmax numerator, filled by the sampler
};

inline bool better(const SampleCandidate& a, const SampleCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The k best tokens of `logits` (NaN read as -inf) into `out`, best first.
// `out` keeps its capacity across calls. For small k: a bounded heap.
void select_top_k_sorted(std::span<const float> logits, size_t k, std::vector<SampleCandidate>& out);

// Moves the k best candidates to [0, k), in no particular (but deterministic) order.
void select_top_k(std::span<SampleCandidate> c, size_t k);

// Moves the top-p nucleus to the front and returns its size: the fewest best
// candidates whose weights sum to at least target_mass. Returns c.size() if
// even all of them fall short (only through rounding, when the target is the
// total). Weights must be >= 0 and non-increasing in the logit.
size_t select_top_p_exact(std::span<SampleCandidate> c, double target_mass);

// The same nucleus, for large sets: first bins the candidates by
// (max_logit - logit) / temperature — two linear passes — so that only the
// few buckets that reach the target mass go through the exact select.
// max_logit is the largest (finite) logit in c, temperature > 0.
size_t select_top_p(std::span<SampleCandidate> c, double target_mass, float max_logit, float temperature);

}  // namespace tern::detail
