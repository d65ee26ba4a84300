#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/assert.h"

namespace tern {

namespace {

using Candidate = detail::SampleCandidate;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Top-k up to this size uses the bounded heap (one read pass, sorted
// output); larger k copies the row and quickselects (linear in n_vocab).
constexpr size_t kHeapTopKMax = 256;

inline float sanitize(float x) { return std::isnan(x) ? -kInf : x; }

// Ties go to the lowest id because only a strictly larger logit replaces the best.
TokenId argmax(std::span<const float> logits) {
  TokenId best_id = 0;
  float best = -kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best) {
      best = logits[i];
      best_id = static_cast<TokenId>(i);
    }
  }
  return best_id;
}

// log-softmax at temperature 1 over a whole row, with the edge cases a
// masked or overflowing model output produces.
struct LogNormalizer {
  float max = -kInf;
  double log_sum = 0.0;  // log sum_i exp(l_i - max)
  int n_inf = 0;         // how many logits are +inf (when max is +inf)

  explicit LogNormalizer(std::span<const float> logits) {
    for (float l : logits) {
      if (l > max) max = l;
    }
    if (max == kInf) {
      for (float l : logits) n_inf += (l == kInf);
      return;
    }
    if (max == -kInf) return;
    // float exp, double accumulation: the sum of 256k terms is what loses
    // precision, not the individual exponentials.
    double sum = 0.0;
    for (float l : logits) {
      if (!std::isnan(l)) sum += std::exp(l - max);
    }
    log_sum = std::log(sum);
  }

  float log_prob(float logit) const {
    logit = sanitize(logit);
    if (max == -kInf) return -kInf;  // every token masked: no distribution to speak of
    if (max == kInf) return logit == kInf ? -static_cast<float>(std::log(n_inf)) : -kInf;
    return static_cast<float>(static_cast<double>(logit) - max - log_sum);
  }
};

}  // namespace

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : params_(params),
      n_vocab_(n_vocab),
      seed_(params.seed),
      penalties_on_(params.penalty_last_n != 0 &&
                    (params.repetition_penalty != 1.0f || params.frequency_penalty != 0.0f ||
                     params.presence_penalty != 0.0f)) {
  TERN_ASSERT(n_vocab > 0);
  TERN_ASSERT_MSG(params.validate().is_ok(), "SamplingParams must be validated before use");
  if (seed_ == SamplingParams::kRandomSeed) {
    std::random_device device;
    seed_ = (static_cast<uint64_t>(device()) << 32) | device();
  }
  rng_.seed(seed_);
  const bool heap_top_k = params_.top_k > 0 && params_.top_k < n_vocab_ &&
                          static_cast<size_t>(params_.top_k) <= kHeapTopKMax;
  // Reserved once so that sample() never allocates.
  candidates_.reserve(heap_top_k ? static_cast<size_t>(params_.top_k) : static_cast<size_t>(n_vocab_));
}

void Sampler::accept(TokenId id) {
  TERN_ASSERT(id >= 0 && id < n_vocab_);
  if (!penalties_on_) return;
  if (params_.penalty_last_n > 0) {
    const size_t window = static_cast<size_t>(params_.penalty_last_n);
    if (window_.size() < window) {
      window_.push_back(id);
    } else {
      counts_.decrement(window_[window_head_]);
      window_[window_head_] = id;
      window_head_ = (window_head_ + 1) % window;
    }
  }
  counts_.increment(id);
}

void Sampler::apply_penalties(std::span<float> logits) const {
  if (!penalties_on_) return;
  const float rp = params_.repetition_penalty;
  const float fp = params_.frequency_penalty;
  const float pp = params_.presence_penalty;
  counts_.for_each([&](TokenId id, int32_t count) {
    float& l = logits[static_cast<size_t>(id)];
    // Dividing a negative logit would raise it; CTRL multiplies instead so the
    // penalty always makes a seen token less likely.
    if (rp != 1.0f) l = l > 0.0f ? l / rp : l * rp;
    l -= static_cast<float>(count) * fp;
    l -= pp;  // count > 0 for every token in the map
  });
}

bool Sampler::collect_candidates(std::span<const float> logits, Mass& mass) {
  const size_t n = logits.size();
  const size_t k = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : n;
  const float temperature = params_.temperature;
  // min-p keeps p >= min_p * p_max; with weights relative to the max token
  // (whose weight is exp(0) = 1 exactly) that is weight >= min_p.
  const float min_weight = params_.min_p;

  if (k >= n) {
    // No top-k: one pass for the max, one that weighs every token and keeps
    // only min-p survivors, so the common case never copies the whole row.
    float max_logit = -kInf;
    for (float l : logits) max_logit = l > max_logit ? l : max_logit;  // skips NaN
    if (!std::isfinite(max_logit)) return false;
    candidates_.clear();
    mass = {};
    for (size_t i = 0; i < n; ++i) {
      const float l = sanitize(logits[i]);
      const float w = std::exp((l - max_logit) / temperature);
      mass.total += w;
      if (w >= min_weight && w > 0.0f) {
        candidates_.push_back({static_cast<TokenId>(i), l, w});
        mass.kept += w;
      }
    }
    mass.max_logit = max_logit;
    candidates_sorted_ = false;
    return true;
  }

  if (k <= kHeapTopKMax) {
    detail::select_top_k_sorted(logits, k, candidates_);
    candidates_sorted_ = true;
  } else {
    // Large k: a heap would pay log k on many inserts; quickselect is linear.
    candidates_.resize(n);
    for (size_t i = 0; i < n; ++i) candidates_[i] = {static_cast<TokenId>(i), sanitize(logits[i]), 0.0f};
    detail::select_top_k(candidates_, k);
    candidates_.resize(k);
    candidates_sorted_ = false;
  }
  float max_logit = -kInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  if (!std::isfinite(max_logit)) return false;
  mass = {};
  size_t n_kept = 0;
  for (Candidate& c : candidates_) {
    c.weight = std::exp((c.logit - max_logit) / temperature);
    mass.total += c.weight;
    if (c.weight >= min_weight && c.weight > 0.0f) {
      candidates_[n_kept++] = c;  // order-preserving compaction
      mass.kept += c.weight;
    }
  }
  candidates_.resize(n_kept);
  mass.max_logit = max_logit;
  return true;
}

size_t Sampler::top_p_cut(double target_mass, float max_logit) {
  if (!candidates_sorted_) {
    return detail::select_top_p(candidates_, target_mass, max_logit, params_.temperature);
  }
  double cum = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cum += candidates_[i].weight;
    if (cum >= target_mass) return i + 1;
  }
  return candidates_.size();  // rounding kept the mass just short: keep everything
}

double Sampler::next_uniform() {
  // The top 53 bits as a double in [0, 1): exact, and identical everywhere,
  // unlike std::uniform_real_distribution whose algorithm is unspecified.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

TokenId Sampler::draw(double u, double kept_mass) const {
  const double r = u * kept_mass;
  double cum = 0.0;
  for (const Candidate& c : candidates_) {
    cum += c.weight;
    if (cum > r) return c.id;
  }
  // r can round up to the total; fall back to the last token that has mass.
  for (auto it = candidates_.rbegin(); it != candidates_.rend(); ++it) {
    if (it->weight > 0.0f) return it->id;
  }
  return candidates_.front().id;
}

// top-k, temperature, softmax numerators and min-p. min-p runs before top-p
// although the chain lists it after: both keep a best-first prefix and top-p
// measures mass against the full total, so the kept set is the same either
// way, and filtering first leaves less to select from.
bool Sampler::filtered_candidates(std::span<float> logits, double& kept_mass) {
  Mass mass;
  if (!collect_candidates(logits, mass)) return false;  // all masked, or +inf logits
  if (params_.top_p < 1.0f) {
    const double target_mass = static_cast<double>(params_.top_p) * mass.total;
    // If min-p already cut deeper than top-p would, there is nothing to find.
    if (mass.kept >= target_mass) {
      candidates_.resize(top_p_cut(target_mass, mass.max_logit));
      mass.kept = 0.0;
      for (const Candidate& c : candidates_) mass.kept += c.weight;
    }
  }
  kept_mass = mass.kept;
  return true;
}

TokenId Sampler::sample(std::span<float> logits) {
  TERN_ASSERT(logits.size() == static_cast<size_t>(n_vocab_));
  apply_penalties(logits);
  if (params_.temperature <= 0.0f) return argmax(logits);
  const double u = next_uniform();  // drawn first: one RNG output per call, always
  double kept = 0.0;
  if (!filtered_candidates(logits, kept)) return argmax(logits);  // no softmax exists
  return draw(u, kept);
}

Sampler::Verdict Sampler::verify(std::span<float> logits, TokenId proposed) {
  const TokenId one[] = {proposed};
  const TreeVerdict v = verify_any(logits, one);
  return {v.accepted == 0, v.token};
}

Sampler::TreeVerdict Sampler::verify_any(std::span<float> logits, std::span<const TokenId> candidates) {
  TERN_ASSERT(!candidates.empty());
  // For proposals that are point masses, accepting x with probability
  // min(1, p(x)/q(x)) = p(x) and otherwise drawing from the residual p
  // without x is the same law as drawing t from p and accepting iff t == x:
  // so draw exactly as sample() does (one uniform from the request's own
  // generator), and the token is the non-speculative run's.
  const TokenId t = sample(logits);
  const auto it = std::find(candidates.begin(), candidates.end(), t);
  return {it == candidates.end() ? -1 : static_cast<int>(it - candidates.begin()), t};
}

float Sampler::log_softmax_at(std::span<const float> logits, TokenId id) {
  TERN_ASSERT(id >= 0 && static_cast<size_t>(id) < logits.size());
  return LogNormalizer(logits).log_prob(logits[static_cast<size_t>(id)]);
}

std::vector<std::pair<TokenId, float>> Sampler::top_logprobs(std::span<const float> logits, int n) {
  std::vector<std::pair<TokenId, float>> out;
  if (n <= 0 || logits.empty()) return out;
  std::vector<Candidate> best;
  detail::select_top_k_sorted(logits, std::min(static_cast<size_t>(n), logits.size()), best);
  const LogNormalizer norm(logits);
  out.reserve(best.size());
  for (const Candidate& c : best) out.emplace_back(c.id, norm.log_prob(c.logit));
  return out;
}

}  // namespace tern
