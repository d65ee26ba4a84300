// model/moe_routing.h — which experts each token of a pass goes to, and with
// what weight, from the router's logits: llama.cpp's softmax gating
// (build_moe_ffn with LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX): probabilities =
// softmax over all experts, the k largest chosen (ties: the lower index), their
// probabilities the weights, divided by their sum (clamped below at 2^-14, as
// llama.cpp does) when the architecture renormalises (Mixtral, qwen3moe; not
// qwen2moe).
//
// The result is grouped by expert, so a layer runs each chosen expert once
// over exactly the tokens routed to it, and an expert nobody chose costs
// nothing. Runs on the host: the CPU backend's memory is host memory. A GPU
// backend would rather keep the router on the device (softmax + top-k there)
// and bring back only the per-expert counts it needs to size its launches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tern {

struct ExpertRoutes {
  int n_expert = 0;
  // Tokens routed to expert e, in token order: rows[begin[e] .. begin[e+1]) and their weights.
  std::vector<int32_t> begin;  // [n_expert + 1]
  std::vector<int32_t> rows;   // [n_tokens * k]
  std::vector<float> weights;  // [n_tokens * k]

  int64_t count(int e) const { return begin[static_cast<size_t>(e) + 1] - begin[static_cast<size_t>(e)]; }
  std::span<const int32_t> rows_of(int e) const {
    return std::span<const int32_t>(rows).subspan(static_cast<size_t>(begin[static_cast<size_t>(e)]),
                                                  static_cast<size_t>(count(e)));
  }
  std::span<const float> weights_of(int e) const {
    return std::span<const float>(weights).subspan(static_cast<size_t>(begin[static_cast<size_t>(e)]),
                                                   static_cast<size_t>(count(e)));
  }
};

// logits: [n_tokens][n_expert]; 1 <= k <= n_expert. Reuses out's storage.
void route_experts(std::span<const float> logits, int64_t n_tokens, int n_expert, int k, bool norm_weights,
                   ExpertRoutes& out);

}  // namespace tern
