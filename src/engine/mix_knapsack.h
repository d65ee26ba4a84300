// engine/mix_knapsack.h — the choice behind `tern quantize --auto`: one type
// per tensor, least total cost (measured KL increase) within a byte budget.
//
// A multiple-choice knapsack solved exactly by dynamic programming over the
// budget cut into kKnapsackSteps units. Each option's bytes are rounded *up*
// to whole units, so a choice that fits in units always fits in bytes; the
// price is that up to one unit per tensor of the budget may go unused (with
// 65,536 units and a few hundred tensors, well under 1% of it). Costs add up:
// the model behind `--auto` assumes each tensor's KL increase is independent
// of the others' (it prints how far the mix's measured KL is from the sum).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace tern {

inline constexpr int64_t kKnapsackSteps = 65536;

struct MixOption {
  uint64_t bytes = 0;
  double cost = 0.0;
};

// One tensor's options (at least one).
using MixItem = std::vector<MixOption>;

struct MixChoice {
  std::vector<int> pick;  // [items] the index of the chosen option
  uint64_t bytes = 0;     // sum of the chosen options' bytes (<= budget)
  double cost = 0.0;      // sum of their costs
};

// The least-cost pick with total bytes <= budget_bytes. InvalidArgument when
// an item has no option, or even the smallest options exceed the budget (the
// message gives the least number of bytes that fits). Deterministic: among
// equal costs the smaller option index wins.
Result<MixChoice> choose_mix(const std::vector<MixItem>& items, uint64_t budget_bytes,
                             int64_t steps = kKnapsackSteps);

}  // namespace tern
