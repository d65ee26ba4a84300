#include "loadgen/arrivals.h"

#include <cmath>
#include <random>

namespace tern::loadgen {

std::vector<double> arrival_offsets(size_t n, const ArrivalConfig& cfg) {
  std::vector<double> out(n, 0.0);
  if (!std::isfinite(cfg.rate_per_s) || cfg.rate_per_s <= 0) return out;
  const double shape = cfg.burstiness > 0 ? cfg.burstiness : 1.0;
  std::mt19937_64 rng(cfg.seed);
  std::gamma_distribution<double> gap(shape, 1.0 / (cfg.rate_per_s * shape));
  double t = 0;
  for (size_t i = 0; i < n; ++i) {
    t += gap(rng);
    out[i] = t;
  }
  return out;
}

}  // namespace tern::loadgen
