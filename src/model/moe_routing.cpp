#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"

namespace tern {

void route_experts(std::span<const float> logits, int64_t n_tokens, int n_expert, int k, bool norm_weights,
                   ExpertRoutes& out) {
  TERN_ASSERT(n_expert > 0 && k >= 1 && k <= n_expert);
  TERN_ASSERT(logits.size() == static_cast<size_t>(n_tokens) * static_cast<size_t>(n_expert));
  const size_t ne = static_cast<size_t>(n_expert), nk = static_cast<size_t>(k);
  // Per token: its k experts and weights, then a counting sort by expert.
  std::vector<int32_t> chosen(static_cast<size_t>(n_tokens) * nk);
  std::vector<float> chosen_w(chosen.size());
  std::vector<float> probs(ne);
  std::vector<int32_t> order(ne);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* x = logits.data() + static_cast<size_t>(t) * ne;
    const float mx = *std::max_element(x, x + ne);
    float sum = 0.0f;
    for (size_t e = 0; e < ne; ++e) sum += (probs[e] = std::exp(x[e] - mx));
    // A non-finite logit (a broken file) must not reach the sort as NaN: its comparisons would be no order at all.
    for (size_t e = 0; e < ne; ++e) probs[e] = probs[e] / sum >= 0.0f ? probs[e] / sum : 0.0f;
    for (size_t e = 0; e < ne; ++e) order[e] = static_cast<int32_t>(e);
    // The k largest, ties to the lower index (a total order: the choice never
    // depends on the sort's algorithm).
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nk), order.end(),
                      [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
    float wsum = 0.0f;
    for (size_t j = 0; j < nk; ++j) wsum += probs[static_cast<size_t>(order[j])];
    const float div = norm_weights ? std::max(wsum, 6.103515625e-5f) : 1.0f;
    for (size_t j = 0; j < nk; ++j) {
      chosen[static_cast<size_t>(t) * nk + j] = order[j];
      chosen_w[static_cast<size_t>(t) * nk + j] = probs[static_cast<size_t>(order[j])] / div;
    }
  }
  out.n_expert = n_expert;
  out.begin.assign(ne + 1, 0);
  for (int32_t e : chosen) ++out.begin[static_cast<size_t>(e) + 1];
  for (size_t e = 0; e < ne; ++e) out.begin[e + 1] += out.begin[e];
  out.rows.resize(chosen.size());
  out.weights.resize(chosen.size());
  std::vector<int32_t> next(out.begin.begin(), out.begin.end() - 1);
  for (size_t i = 0; i < chosen.size(); ++i) {  // token order within each expert
    const size_t at = static_cast<size_t>(next[static_cast<size_t>(chosen[i])]++);
    out.rows[at] = static_cast<int32_t>(i / nk);
    out.weights[at] = chosen_w[i];
  }
}

}  // namespace tern
