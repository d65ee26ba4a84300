// model/awq.h — activation-aware weight quantization (Lin et al., 2023): each
// input channel j of a group of linear layers that read the same input is
// scaled up by s_j before rounding, and the input scaled down by s_j, where
// the scale is folded into whatever produces that input, so the model before
// rounding computes exactly what it did:
//
//   attn_norm            -> attn_q, attn_k, attn_v (or attn_qkv)    norm weight / s
//   ffn_norm             -> ffn_gate, ffn_up                         norm weight / s
//   attn_v rows          -> attn_output   (only when every query head has its own KV head and v has no bias)
//   ffn_up rows          -> ffn_down      (gated FFNs with separate gate and up)
//
// s = (mean |x_j|)^α, normalised to geometric mean 1 over its extremes, with α
// searched on a grid of 21 values in [0, 1] per group to minimise the group's
// output error on the calibration inputs, sum over its matrices W and rows r
// of (W_r - Ŵ_r) H (W_r - Ŵ_r)ᵀ with Ŵ = dequant(quant(W diag(s))) diag(s)⁻¹,
// each matrix rounded to the type the scheme gives it (any type with an
// encoder: AWQ works with the K-quants too). α = 0 is plain rounding, so the
// search never does worse on that error. The search reads up to 256 rows of
// each matrix (evenly spaced). MoE layers are left unscaled.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/calibration.h"
#include "model/quant_rules.h"

namespace tern {

struct AwqGroup {
  std::string producer;              // a 1-D norm (elements divided by s) or a matrix (rows divided by s)
  std::vector<std::string> linears;  // their columns multiplied by s
  int64_t n = 0;                     // channels
};

struct AwqResult {
  std::map<std::string, std::vector<float>> column_scale;  // linear -> s
  std::map<std::string, std::vector<float>> row_divisor;   // producer -> s (norm elements or matrix rows divided by it)
  std::vector<std::pair<std::string, float>> alpha;        // chosen α per group (its first linear)
};

// The groups of `file` in file order, where the producer and linears exist.
std::vector<AwqGroup> awq_groups(const gguf::GgufFile& file);

// Records group g scaled by s ([g.n]): its linears' columns multiplied by s and
// its producer divided by s, on top of what `r` already holds for them.
void fold_group(const AwqGroup& g, std::span<const float> s, AwqResult& r);

// stats(key) returns the input record of a linear (with H); `types` the type
// the scheme gives each linear.
using AwqStatsFn = std::function<Result<std::shared_ptr<const InputStats>>(const std::string& key)>;
Result<AwqResult> awq_search(const gguf::GgufFile& file, const QuantScheme& scheme, const AwqStatsFn& stats,
                             ThreadPool& pool);

}  // namespace tern
