// model/smoothquant.h — SmoothQuant (Xiao et al., 2023) for W8A8: activation
// outliers moved into the weights, so that per-token int8 activations lose
// little. Each input channel j of a group of linears (model/awq.h's groups:
// attn_norm -> Q/K/V, ffn_norm -> gate/up, v -> output, up -> down) is divided
// by s_j in its producer and multiplied by s_j in the linears' columns (the
// same exact fold as AWQ), with
//
//   s_j = max|x_j|^α / max|W_j|^(1-α)     (max|W_j| over the group's matrices)
//
// α per group: given (`alpha` in [0, 1]) or searched on a grid of 21 values for
// the least expected output error of both roundings, from the calibration
// statistics alone (mean x², max |x| per channel; no H): rounding a row r of
// W diag(s) to int8 with step Δw_r adds Δw_r²/12 · Σ_j E[x_j²]/s_j² to output
// r's squared error, and rounding a token's x/s with step Δx (at most
// max_j(max|x_j|/s_j)/127) adds Δx²/12 · Σ_j W_rj² s_j². α = 0 with every
// s_j = 1 is plain W8A8.
#pragma once

#include <optional>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/awq.h"

namespace tern {

Result<AwqResult> smoothquant_search(const gguf::GgufFile& file, const AwqStatsFn& stats, std::optional<float> alpha,
                                     ThreadPool& pool);

}  // namespace tern
