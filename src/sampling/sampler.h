// sampling/sampler.h — turns one row of logits into the next token.
//
// Contract: a Sampler holds the per-sequence state of sampling — the seeded
// RNG and the window of recent tokens the penalties look at — and applies one
// fixed chain, in the order vLLM uses (llama.cpp's default chain differs by
// applying temperature last):
//
//   penalties -> (argmax if temperature <= 0) -> top-k -> temperature
//             -> softmax -> top-p -> min-p -> draw
//
// Every filter keeps at least the most likely token, so a draw always exists.
// Ties are broken towards the lower token id everywhere (greedy, top-k and
// top-p edges), which makes each kept set independent of the algorithm.
//
// NaN logits are treated as -inf (a masked token). Without a finite maximum
// no softmax exists and sample() falls back to argmax: the lowest-id +inf
// token, or token 0 when everything is masked.
//
// Determinism: for a seed other than kRandomSeed, the same params, the same
// accepted tokens and the same logits give the same tokens on every platform
// whose expf agrees (the RNG is std::mt19937_64, whose output the standard
// fixes; the uniform variate is built from its raw bits; the selection code
// that orders candidates is our own, see select.h). Each non-greedy sample()
// consumes exactly one RNG output, so streams stay aligned whatever the
// filters keep.
//
// Cost: O(n_vocab) per sample() with no allocation after construction.
// Memory: 12 bytes per token of scratch when top-k is off or above 256
// (3 MB at a 256k vocabulary), else 12 bytes per top-k slot; the penalty
// state is O(window), never O(n_vocab).
//
// Threading: a Sampler is not thread-safe; use one per sequence. The static
// log-probability helpers are pure functions.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "tern/request.h"
#include "sampling/select.h"
#include "sampling/token_counts.h"

namespace tern {

// SamplingParams: tern/request.h (public API).


class Sampler {
 public:
  // params must pass validate() (asserted); n_vocab > 0.
  Sampler(const SamplingParams& params, int n_vocab);

  // logits: [n_vocab] raw model output for the next token. Used as scratch:
  // the penalties are applied in place, so compute log-probabilities first.
  TokenId sample(std::span<float> logits);

  // Speculative verification of one proposed token against this row (the
  // whole chain applied, as sample() would), for a proposer that chose it
  // deterministically (prompt lookup, a greedy draft):
  //  - greedy: accepted iff it is the argmax; otherwise the argmax replaces it;
  //  - sampled: accepted with probability p(x) (min(1, p/q) with q(x) = 1);
  //    otherwise the replacement is drawn from p with x removed, renormalised
  //    (the residual max(0, p - q)), so the token that comes out is
  //    distributed exactly as sample() would draw it (Leviathan et al.).
  // Consumes one or two uniform draws; logits are scratch as for sample().
  struct Verdict {
    bool accepted = false;
    TokenId token = 0;  // the proposed token, or its replacement
  };
  Verdict verify(std::span<float> logits, TokenId proposed);

  // Records a token of the sequence for the penalties (pass prompt tokens too
  // if the penalties should see them). 0 <= id < n_vocab.
  void accept(TokenId id);

  // Natural-log probability of `id` under the full softmax of `logits` at
  // temperature 1, before any penalty or filter — the OpenAI `logprobs` value.
  static float log_softmax_at(std::span<const float> logits, TokenId id);

  // The n most likely (id, logprob) pairs of that same softmax, highest first
  // (ties: lower id first). n is clamped to [0, logits.size()].
  static std::vector<std::pair<TokenId, float>> top_logprobs(std::span<const float> logits, int n);

  const SamplingParams& params() const { return params_; }
  // The seed in use: params.seed, or the one drawn for kRandomSeed (log it to
  // reproduce a run).
  uint64_t seed() const { return seed_; }

 private:
  using Candidate = detail::SampleCandidate;

  void apply_penalties(std::span<float> logits) const;
  struct Mass {
    double total = 0.0;  // softmax denominator over the top-k set (relative to the max)
    double kept = 0.0;   // the part of it held by candidates_
    float max_logit = 0.0f;
  };
  // Fills candidates_ with the top-k (or all) tokens that pass min-p, with
  // their weights exp((logit - max) / temperature). False if the max logit
  // is not finite (no softmax exists).
  bool collect_candidates(std::span<const float> logits, Mass& mass);
  // Moves the top-p nucleus to the front of candidates_; returns its size.
  size_t top_p_cut(double target_mass, float max_logit);
  TokenId draw(double u, double kept_mass) const;
  // candidates_ after the whole chain (top-k, temperature, min-p, top-p); false: no softmax exists.
  bool filtered_candidates(std::span<float> logits, double& kept_mass);
  double next_uniform();  // [0, 1), 53 random bits

  SamplingParams params_;
  int n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  bool penalties_on_;

  // Penalty window: the last penalty_last_n accepted tokens as a ring
  // (grown on demand up to the window, unused when the window is the whole
  // history), and their counts.
  std::vector<TokenId> window_;  // [min(n_accepted, penalty_last_n)]
  size_t window_head_ = 0;       // oldest entry once the ring is full
  TokenCounts counts_;

  // Scratch reused across calls: [k] with a small top-k, else [n_vocab].
  // Its order is deterministic (see select.h) because draw() scans it.
  std::vector<Candidate> candidates_;
  bool candidates_sorted_ = false;  // best first, by detail::better
};

}  // namespace tern
