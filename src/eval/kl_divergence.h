// eval/kl_divergence.h — how far a model's next-token distributions are from
// a base model's on the same text: KL(base || model) per scored token, top-1
// agreement and the perplexity ratio, aggregated to mean / median / p99 (the
// figures llama.cpp's perplexity tool prints with --kl-divergence).
//
// Log-softmax is computed in double after subtracting the row maximum, so
// logits of any magnitude give finite results, and adding a constant to a
// row changes nothing. Per-token KL is clamped at 0 from below (rounding in
// the saved base log-probs can make an identical model read -1e-9).
//
// Threading: pure functions; a KlAccumulator belongs to one thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"

namespace tern::eval {

// out[v] = logits[v] - log(sum_w exp(logits[w])). out.size() == logits.size().
void log_softmax(std::span<const float> logits, std::span<double> out);

// Index of the largest value (the first on ties).
int32_t argmax(std::span<const float> values);

// KL(P || Q) = sum_v P(v) (log P(v) - log Q(v)) in nats, from log-probabilities.
double kl_divergence(std::span<const double> log_p, std::span<const double> log_q);

// Linear interpolation between order statistics (numpy's default):
// q in [0, 1]; `sorted` ascending and non-empty.
double percentile(std::span<const double> sorted, double q);

struct KlSummary {
  int64_t n_tokens = 0;
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;
  double kl_mean_stderr = 0;    // standard error of kl_mean
  double top1_agreement = 0;    // fraction of tokens whose argmax equals the base's
  double nll_mean_model = 0;    // mean negative log-likelihood of the text under the model (nats)
  double nll_mean_base = 0;     // the same under the base, as recorded with its logits
  double ppl_model = 0, ppl_base = 0;
  double ppl_ratio = 0;         // ppl_model / ppl_base
};

class KlAccumulator {
 public:
  // One scored token: the base's log-probs ([n_vocab]) and argmax, the
  // model's raw logits ([n_vocab]) and the token that actually followed.
  void add(std::span<const double> base_log_probs, int32_t base_top1, std::span<const float> model_logits,
           TokenId target);
  // base_nll_mean: the base's exact mean NLL (from the logits file header).
  KlSummary summary(double base_nll_mean) const;
  int64_t n_tokens() const { return static_cast<int64_t>(kl_.size()); }

 private:
  std::vector<double> kl_;       // [n_tokens] per-token KL
  std::vector<double> model_lp_; // scratch [n_vocab]
  int64_t n_top1_same_ = 0;
  double nll_model_sum_ = 0;
};

}  // namespace tern::eval
