#include "eval/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"

namespace tern::eval {

void log_softmax(std::span<const float> logits, std::span<double> out) {
  TERN_ASSERT(out.size() == logits.size() && !logits.empty());
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_z = max + std::log(sum);
  for (size_t v = 0; v < logits.size(); ++v) out[v] = static_cast<double>(logits[v]) - log_z;
}

int32_t argmax(std::span<const float> values) {
  TERN_ASSERT(!values.empty());
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

double kl_divergence(std::span<const double> log_p, std::span<const double> log_q) {
  TERN_ASSERT(log_p.size() == log_q.size());
  double kl = 0.0;
  for (size_t v = 0; v < log_p.size(); ++v) {
    const double p = std::exp(log_p[v]);
    if (p > 0.0) kl += p * (log_p[v] - log_q[v]);  // 0 * log 0 = 0, also where Q is 0
  }
  return kl;
}

double percentile(std::span<const double> sorted, double q) {
  TERN_ASSERT(!sorted.empty());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  const double frac = pos - static_cast<double>(i);
  return sorted[i] + frac * (sorted[i + 1] - sorted[i]);
}

void KlAccumulator::add(std::span<const double> base_log_probs, int32_t base_top1, std::span<const float> model_logits,
                        TokenId target) {
  TERN_ASSERT(base_log_probs.size() == model_logits.size());
  TERN_ASSERT(target >= 0 && static_cast<size_t>(target) < model_logits.size());
  model_lp_.resize(model_logits.size());
  log_softmax(model_logits, model_lp_);
  kl_.push_back(std::max(0.0, kl_divergence(base_log_probs, model_lp_)));
  if (argmax(model_logits) == base_top1) ++n_top1_same_;
  nll_model_sum_ -= model_lp_[target];
}

KlSummary KlAccumulator::summary(double base_nll_mean) const {
  KlSummary s;
  s.n_tokens = n_tokens();
  s.nll_mean_base = base_nll_mean;
  s.ppl_base = std::exp(base_nll_mean);
  if (kl_.empty()) return s;
  const double n = static_cast<double>(kl_.size());
  double sum = 0.0, sum_sq = 0.0;
  for (double k : kl_) sum += k, sum_sq += k * k;
  s.kl_mean = sum / n;
  if (kl_.size() > 1) s.kl_mean_stderr = std::sqrt(std::max(0.0, (sum_sq / n - s.kl_mean * s.kl_mean) / (n - 1)));
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  s.kl_median = percentile(sorted, 0.5);
  s.kl_p99 = percentile(sorted, 0.99);
  s.kl_max = sorted.back();
  s.top1_agreement = static_cast<double>(n_top1_same_) / n;
  s.nll_mean_model = nll_model_sum_ / n;
  s.ppl_model = std::exp(s.nll_mean_model);
  s.ppl_ratio = s.ppl_model / s.ppl_base;
  return s;
}

}  // namespace tern::eval
