#include "engine/mix_knapsack.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/assert.h"

namespace tern {

Result<MixChoice> choose_mix(const std::vector<MixItem>& items, uint64_t budget_bytes, int64_t steps) {
  uint64_t least = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty())
      return error(ErrorKind::InvalidArgument, "auto mix: tensor " + std::to_string(i) + " has no candidate type");
    uint64_t m = UINT64_MAX;
    for (const auto& o : items[i]) m = std::min(m, o.bytes);
    least += m;
  }
  if (least > budget_bytes)
    return error(ErrorKind::InvalidArgument, "auto mix: the budget of " + std::to_string(budget_bytes) +
                                                 " bytes is below the smallest mix of the candidate types (" +
                                                 std::to_string(least) + " bytes)");
  if (steps < 1) steps = 1;
  // unit * steps >= budget, so every option's size in units is at most its share of `steps`.
  const uint64_t unit = std::max<uint64_t>(1, (budget_bytes + static_cast<uint64_t>(steps) - 1) / steps);
  const int64_t cap = static_cast<int64_t>(budget_bytes / unit);
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // best[c]: least cost of the items so far in at most c units.
  std::vector<double> best(cap + 1, 0.0), next(cap + 1);
  std::vector<std::vector<int16_t>> took(items.size(), std::vector<int16_t>(cap + 1, -1));
  for (size_t i = 0; i < items.size(); ++i) {
    std::fill(next.begin(), next.end(), kNone);
    for (size_t j = 0; j < items[i].size(); ++j) {
      const uint64_t u64 = (items[i][j].bytes + unit - 1) / unit;
      if (u64 > static_cast<uint64_t>(cap)) continue;
      const int64_t u = static_cast<int64_t>(u64);
      const double cost = items[i][j].cost;
      for (int64_t c = u; c <= cap; ++c) {
        const double v = best[c - u] + cost;
        if (v < next[c]) next[c] = v, took[i][c] = static_cast<int16_t>(j);
      }
    }
    best.swap(next);
  }
  // best is non-increasing in c (at most c units), so the whole budget is the optimum.
  if (!(best[cap] < kNone))
    return error(ErrorKind::InvalidArgument,
                 "auto mix: no mix fits in " + std::to_string(budget_bytes) +
                     " bytes once sizes are rounded to the solver's units; raise the target a little");
  MixChoice out;
  out.pick.assign(items.size(), 0);
  int64_t c = cap;
  for (size_t i = items.size(); i-- > 0;) {
    // The item's choice at capacity c; "at most c" means the option was taken at some c' <= c
    // recorded as the best for c, so walk with the recorded option.
    const int j = took[i][c];
    TERN_ASSERT(j >= 0);
    out.pick[i] = j;
    out.bytes += items[i][j].bytes;
    out.cost += items[i][j].cost;
    c -= static_cast<int64_t>((items[i][j].bytes + unit - 1) / unit);
  }
  return out;
}

}  // namespace tern
