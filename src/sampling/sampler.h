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

  // Speculative verification of proposed tokens against this row, for
  // proposers that choose deterministically (prompt lookup, a greedy draft):
  // q is a point mass, so the exact rejection rule of Leviathan et al. —
  // accept x with probability min(1, p(x)/q(x)) = p(x), else draw from the
  // normalised residual max(0, p - q), i.e. p without x — is the same law as
  // drawing t from p (the whole chain applied, as sample() does) and
  // accepting iff t == x. That is what it does, with sample()'s one uniform
  // from the request's generator: the token that comes out is exactly the
  // one the non-speculative run samples at this position, and a seeded
  // request gives the same text with or without speculation. Greedy:
  // accepted iff x is the argmax, which replaces it otherwise.
  // logits are scratch as for sample().
  struct Verdict {
    bool accepted = false;
    TokenId token = 0;  // the proposed token, or its replacement
  };
  Verdict verify(std::span<float> logits, TokenId proposed);

  // Several candidates for one position (a token tree's children, distinct):
  // the same draw, accepted when it is among them (SpecInfer's multi-candidate
  // verification for point-mass proposals: candidate i is taken with
  // probability p(x_i), the rest of the mass goes to the replacement).
  // accepted: the index taken, or -1.
  struct TreeVerdict {
    int accepted = -1;
    TokenId token = 0;  // candidates[accepted], or the replacement
  };
  TreeVerdict verify_any(std::span<float> logits, std::span<const TokenId> candidates);

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
