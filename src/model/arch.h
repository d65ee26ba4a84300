// model/arch.h — the architecture registry. Each supported architecture is
// one row, defined in its own file under model/archs/: its name (the value of
// general.architecture and the prefix of its metadata keys), the RoPE pairing
// its GGUF files use, which optional keys and tensors it reads, and the block
// its layers run (a composition of model/layers.h). The registry (arch.cpp)
// lists the rows once; everything else — lookup, the list of supported names
// in error messages, the tests that load every architecture — derives from it.
//
// Adding an architecture of the Llama family is a new file with one row (plus
// a test against tests/model/reference_gguf); a new kind of block is a new
// composition in that file, over the same layers.
#pragma once

#include <span>
#include <string_view>

#include "core/status.h"
#include "gguf/reader.h"
#include "kernels/ref/ops.h"
#include "model/layers.h"

namespace tern {

// How an architecture's MoE FFN reads its file and routes (llama.cpp's
// build_moe_ffn arguments for that architecture). Layers are MoE when the
// file's <arch>.expert_count > 0.
struct MoeInfo {
  bool required;        // expert_count must be > 0 (qwen2moe, qwen3moe); llama: dense when absent
  bool expert_ffn_key;  // expert rows from expert_feed_forward_length (default n_ff / n_expert_used); else n_ff
  bool norm_weights;    // the top-k softmax weights are renormalised to sum to 1
  bool shared_expert;   // ffn_{gate,up,down}_shexp added, gated by sigmoid(ffn_gate_inp_shexp · x)
};

// Runs layer `il` of a pass on p.act.x (the residual stream) in place.
using BlockFn = void (*)(const Pass& p, const LayerWeights& l, const LayerHParams& lh);

struct ArchInfo {
  std::string_view name;
  kernels::RopeLayout rope_layout;  // pairing used by this arch's GGUF files
  bool reads_sliding_window;        // honours <arch>.attention.sliding_window
  bool reads_qkv_bias;              // binds blk.N.attn_{q,k,v}.bias when the file has them
  BlockFn block;
  // Optional, for blocks beyond Llama's (defaults: none; rows may omit them).
  // Reads the architecture's own keys after the common ones (model/hparams.h).
  Status (*read_hparams)(const gguf::GgufFile& f, HParams& hp) = nullptr;
  bool reads_post_norms = false;  // binds blk.N.post_attention_norm and post_ffw_norm (required)
  bool reads_qk_norm = false;     // requires blk.N.attn_{q,k}_norm.weight: RMSNorm of each q/k head before RoPE
  bool reads_rope_freqs = false;  // binds rope_freqs.weight (Llama 3.1+) when the file has it
  bool reads_long_rope = false;   // binds rope_factors_{long,short}.weight (LongRoPE) when the file has them
  bool fused_qkv = false;         // binds blk.N.attn_qkv.weight ([q; k; v] rows) when present, else attn_q/k/v
  bool fused_gate_up = false;     // blk.N.ffn_up.weight is [gate; up] (2 n_ff rows); there is no ffn_gate
  const MoeInfo* moe = nullptr;   // reads expert_count and, when > 0, binds experts in place of ffn_{gate,up,down}
  // Every layer is a Mamba mixer (archs/mamba.cpp): reads <arch>.ssm.*, and
  // neither attention nor FFN keys and tensors (head_count, feed_forward_length
  // may be absent or 0).
  bool state_space = false;
  // Mamba-2 (archs/mamba.cpp): reads <arch>.ssm.group_count; heads, groups
  // and a grouped RMS norm (model/hparams.h, SsmHParams).
  bool ssm_groups = false;
  // A hybrid stack (archs/nemotron_h.cpp): each layer is a Mamba-2 mixer, an
  // attention without RoPE or an FFN, told apart by the per-layer arrays
  // attention.head_count_kv and feed_forward_length (both 0: the mixer).
  bool hybrid = false;
};

// Every registered architecture, in registry order.
std::span<const ArchInfo* const> registered_archs();
// nullptr when the architecture is not supported.
const ArchInfo* find_arch(std::string_view name);
// Comma-separated registered names, for error messages.
std::string_view supported_arch_names();

}  // namespace tern
