// loadgen/arrivals.h — when each request of a run is sent.
//
// Contract: arrival_offsets() returns n send times in seconds from the start of
// the run, non-decreasing, starting with the first gap (not at 0) so that a
// rate of R gives about R requests per second from the first one on.
// - rate = infinity (or <= 0 is refused by the CLI): all offsets are 0, every
//   request is sent at once (a concurrency cap then paces them).
// - burstiness B = 1: Poisson arrivals (exponential gaps, mean 1/rate).
// - burstiness B != 1: gamma gaps with shape B and scale 1/(rate*B): the mean
//   stays 1/rate and the coefficient of variation is 1/sqrt(B) (B < 1 burstier,
//   B > 1 more regular).
// The same seed gives the same offsets (std::mt19937_64 with libstdc++'s
// gamma sampler).
// Threading: pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::loadgen {

struct ArrivalConfig {
  double rate_per_s = 0;  // requests per second; infinity = all at once
  double burstiness = 1.0;
  uint64_t seed = 0;
};

std::vector<double> arrival_offsets(size_t n, const ArrivalConfig& cfg);

}  // namespace tern::loadgen
