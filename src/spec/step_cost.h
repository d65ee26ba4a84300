// spec/step_cost.h — what a forward pass costs against the tokens in it,
// learned from the engine's own steps, for speculative decoding's choice of
// how many tokens to propose (engine/speculator.h); a draft model times its
// own passes with one too.
//
// A CPU (or a GPU at small batch) step is flat while reading the weights
// dominates and grows with the tokens once arithmetic does; where the bend
// sits depends on the machine, the weight type and the threads, so it is
// measured rather than assumed: each step's time goes into an EMA of its
// power-of-two bucket of token counts (with the bucket's mean count), and
// t(n) is piecewise linear through the buckets seen, its end segments
// extended (a speculating engine seldom runs a step of its base size, so
// that cost comes from the slope beside it). With one size seen, the prior
// rule applies around it: 0.08 of a step per extra token and sequence (the
// old fixed constant), optimistic enough that larger steps get tried.
#pragma once

#include <array>
#include <cstdint>

namespace tern {

class StepCost {
 public:
  // A pass of n_tokens took `seconds`.
  void observe(int64_t n_tokens, double seconds);
  // Estimated seconds for n tokens; < 0 when nothing was observed.
  double seconds(double n_tokens) const;
  // t(n_extra + n_base) / t(n_base): the relative cost of a step carrying
  // n_extra more tokens than one of n_base (> 0); prior slope when unknown.
  double ratio(double n_base, double n_extra) const;

 private:
  struct Bucket {
    double n = 0, t = 0;  // EMAs of tokens and seconds
    int64_t count = 0;
  };
  static constexpr int kBuckets = 16;  // 1, 2-3, 4-7, ... up to 32k tokens
  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace tern
