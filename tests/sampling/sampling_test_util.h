// Helpers shared by the sampling tests: parameter presets and reference math.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace tern::sampling_test {

// Temperature 1, every filter and penalty off: draws follow the plain softmax.
inline SamplingParams plain_params(uint64_t seed = 42) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

inline SamplingParams greedy_params() {
  SamplingParams p = plain_params();
  p.temperature = 0.0f;
  return p;
}

// Softmax in double of logits / temperature.
inline std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = -INFINITY;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((logits[i] - max) / temperature);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

// logits[i] = log(probs[i]): a row whose softmax is exactly `probs` (up to rounding).
inline std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return l;
}

inline std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);  // test data only: platform drift is fine
  std::vector<float> l(n);
  for (float& x : l) x = dist(rng);
  return l;
}

// n draws; `logits` is copied for each since sample() uses it as scratch.
inline std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int n_draws) {
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> scratch;
  for (int i = 0; i < n_draws; ++i) {
    scratch = logits;
    ++counts[static_cast<size_t>(s.sample(scratch))];
  }
  return counts;
}

}  // namespace tern::sampling_test
