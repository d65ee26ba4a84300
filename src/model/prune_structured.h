// model/prune_structured.h — structured pruning: remove whole K/V head groups,
// FFN channels and layers, and write a smaller dense GGUF that every kernel
// (and llama.cpp) runs (docs/prune.md, "Structured pruning").
//
// Importance comes from activations on calibration text (model/calibration.h):
// - an FFN channel j of layer l: E[h_j²]·‖W_down[:, j]‖², the expected squared
//   size of what the channel adds to the residual stream (h: ffn_down's input);
// - a K/V head group (a K/V head and the query heads that read it): the rise
//   of the calibration loss when it alone is removed (head_scores, from
//   engine/head_ablation.h), or else the FFN score summed over the
//   attention-output columns of its query heads; whole groups go, so
//   grouped-query attention keeps its shape;
// - a layer: 1 - mean cos(x_in, x_out) over calibration tokens (ShortGPT's
//   block influence): the layers that change the residual stream least go.
// Every layer keeps the same number of heads and channels (GGUF and every
// engine reading it expect one head count and FFN width), but each layer
// chooses its own. The removed part of a model contributes nothing in the
// masked original (zero rows and columns; a removed layer's output matrices
// zero), so the pruned file's logits equal that model's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/calibration.h"
#include "model/quantize.h"

namespace tern {

struct StructuredSpec {
  double heads = 0.0;  // fraction of K/V head groups removed from every layer, [0, 1)
  double ffn = 0.0;    // fraction of FFN channels removed from every layer, [0, 1)
  int layers = 0;      // whole layers removed
  std::string text() const;  // "heads=0.25,ffn=0.5,layers=1" (the parts asked for)
};

// "heads=F,ffn=F,layers=N": any of the three, in any order, comma-separated.
Result<StructuredSpec> parse_structured_spec(std::string_view s);

// How many of n units to keep when `fraction` of them goes: at least one
// removed and one kept; when n is a multiple of `align`, the count kept is
// rounded to a multiple of it too (FFN widths stay a multiple of 32, so the
// pruned matrices still take every block quantization type). `what` names
// the part in errors.
Result<int> structured_kept_count(int n, double fraction, int align, const std::string& what);

// What stays, by indices of the input model, ascending.
struct StructuredPlan {
  int n_layer_in = 0, n_head_in = 0, n_head_kv_in = 0, n_ff_in = 0, head_dim = 0;
  std::vector<int> layers;                 // kept layers
  std::vector<std::vector<int>> kv_heads;  // [n_layer_in] kept K/V heads (each with its query heads)
  std::vector<std::vector<int>> ffn;       // [n_layer_in] kept FFN channels
  std::vector<double> layer_influence;     // [n_layer_in] 1 - mean cos (empty: layers not pruned)

  int n_head_kv() const { return kv_heads.empty() ? 0 : static_cast<int>(kv_heads[0].size()); }
  int n_head() const { return n_head_kv_in > 0 ? n_head_kv() * (n_head_in / n_head_kv_in) : 0; }
  int n_ff() const { return ffn.empty() ? 0 : static_cast<int>(ffn[0].size()); }
  // Query heads kept in layer il: each kept K/V head's group, in order.
  std::vector<int> q_heads(int il) const;
};

// Chooses what to remove. InvalidArgument/Unsupported with what to do for a
// spec the model cannot take (MoE, state-space and hybrid stacks, fused
// Q/K/V or gate/up, per-layer head counts that differ, layer removal where
// layers differ) or calibration statistics that do not fit the model.
// head_scores ([n_layer][n_head_kv], higher kept), when given, rank the head
// groups instead of their activations: engine/head_ablation.h's loss rise,
// which `tern prune` uses by default (on stories260K the activation score
// chose worse than random draws; the loss rise chose better).
Result<StructuredPlan> plan_structured(const gguf::GgufFile& file, const Calibration& calib, const StructuredSpec& spec,
                                       const std::vector<std::vector<double>>* head_scores = nullptr);

struct StructuredReport {
  QuantizeReport written;
  uint64_t n_weights_in = 0, n_weights_out = 0;
};

// Writes the pruned model: the kept rows and columns of the sliced tensors,
// the kept layers renumbered from 0, everything else byte for byte; the
// head, head-group and FFN sizes, block count and per-layer arrays updated,
// attention.key_length/value_length set (the head size no longer follows
// from n_embd / n_head), and tern.prune.structured (the spec) and
// tern.prune.removed_layers (input indices) added. Column slicing needs
// F32, F16 or BF16 (attn_output, ffn_down); rows of any type are copied.
// Streamed and atomic as quantize_gguf.
Result<StructuredReport> prune_structured_gguf(const std::string& in_path, const std::string& out_path,
                                               const StructuredSpec& spec, const StructuredPlan& plan, ThreadPool& pool,
                                               const QuantizeProgressFn& progress = {});

}  // namespace tern
