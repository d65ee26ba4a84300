// model/hparams.h — the hyper-parameters of a decoder-only Transformer,
// read from GGUF `<arch>.*` metadata (keys: model/gguf_names.h) with defaults
// where the format has them.
//
// Per-layer values: attention.head_count_kv and attention.sliding_window may
// be a scalar (every layer) or an array with one entry per layer, as
// llama.cpp's GGUF allows; layers[il] holds what layer il uses. The scalar
// fields n_head_kv and sliding_window summarise them for callers that think
// of the model as uniform (see their comments).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "kernels/ref/ops.h"

namespace tern {

struct LayerHParams {
  bool recurrent = false;  // a state-space (Mamba) layer: no attention, a fixed-size state (HParams::ssm)
  int n_head_kv = 0;
  int sliding_window = 0;  // 0 = full attention; else a token attends to the last `sliding_window` positions
  bool rope_local = false; // RoPE with HParams::rope_local (Gemma's sliding-window layers) instead of rope
  // Hybrid stacks (ArchInfo::hybrid): an FFN-only layer's width (its
  // n_head_kv is 0); 0 in every other layer and architecture.
  int n_ff = 0;
  // Keys and values in a KV pool: an attention layer (not a recurrent or an FFN-only one).
  bool has_kv() const { return !recurrent && n_head_kv > 0; }
};

// The Mamba mixer's sizes (<arch>.ssm.*), shared by every recurrent layer.
// Mamba-2 (n_group > 0) has dt_rank heads of d_inner / dt_rank channels each
// (dt, A and D per head) and n_group groups of heads sharing B and C; its
// convolution runs over x, B and C together.
struct SsmHParams {
  int d_conv = 0;   // convolution taps
  int d_inner = 0;  // channels
  int d_state = 0;  // state values per channel
  int dt_rank = 0;  // Mamba-1: input rows of the dt projection; Mamba-2: heads
  int n_group = 0;  // Mamba-2: B/C groups (ssm.group_count); 0: Mamba-1
  bool dt_b_c_rms = false;  // RMS-norm dt, B and C (falcon-mamba)

  bool mamba2() const { return n_group > 0; }
  int n_head() const { return mamba2() ? dt_rank : d_inner; }
  int head_dim() const { return d_inner / n_head(); }
  // Channels of the convolution: x (Mamba-2: then B and C of every group).
  int64_t conv_channels() const { return d_inner + (mamba2() ? 2 * int64_t{n_group} * d_state : 0); }
  // Rows of the input projection: Mamba-1 x and z; Mamba-2 z, x, B, C and dt.
  int64_t in_rows() const { return mamba2() ? d_inner + conv_channels() + dt_rank : 2 * int64_t{d_inner}; }
  // One sequence's state in one layer: the last d_conv - 1 inputs, then h.
  int64_t conv_floats() const { return int64_t{d_conv - 1} * conv_channels(); }
  int64_t state_floats() const { return conv_floats() + int64_t{d_inner} * d_state; }
};

struct HParams {
  std::string arch;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;         // the largest of layers[].n_head_kv: kv_dim() bounds every layer's K/V row
  int head_dim = 0;          // attention.key_length (== value_length), default n_embd / n_head
  float rms_eps = 1e-5f;
  int sliding_window = 0;    // the window every layer has; -1 when layers differ (read layers[])
  kernels::RopeParams rope;  // layout from the arch table, n_rot, base, scaling (freq_factors: null, set per pass)
  // rope.scaling.original_context_length, else n_ctx_train: a context in force
  // past it selects LongRoPE's long factors (model.h, Model::forward).
  int rope_orig_ctx = 0;
  std::vector<LayerHParams> layers;  // [n_layer]
  // Set by an architecture's own reader (ArchInfo::read_hparams, e.g. Gemma);
  // the defaults change nothing.
  float attn_scale = 0.0f;         // attention score scale; 0 = 1/sqrt(head_dim)
  float attn_softcap = 0.0f;       // 0 = off; else scores become cap * tanh(score / cap)
  float final_softcap = 0.0f;      // 0 = off; the same on the output logits
  float embd_scale = 1.0f;         // token embeddings are multiplied by this
  kernels::RopeParams rope_local;  // RoPE of layers with LayerHParams::rope_local
  // Mixture of experts (ArchInfo::moe); n_expert == 0: a dense model.
  int n_expert = 0;         // expert_count
  int n_expert_used = 0;    // expert_used_count: top-k, 1 <= k <= n_expert
  int n_ff_exp = 0;         // rows of one expert's gate/up
  int n_ff_shexp = 0;       // rows of the shared expert's gate/up; 0: none
  bool moe_norm_weights = false;  // renormalise the top-k weights (MoeInfo::norm_weights)
  SsmHParams ssm;  // state-space architectures (ArchInfo::state_space); zero otherwise

  bool is_moe() const { return n_expert > 0; }
  bool has_ssm() const { return ssm.d_inner > 0; }
  // FFN activation floats per token a layer needs: dense, shared expert, or
  // the k routed experts' rows of n_ff_exp side by side.
  int64_t max_ff() const {
    return std::max({int64_t{n_ff}, int64_t{n_ff_exp} * std::max(n_expert_used, 1), int64_t{n_ff_shexp}});
  }

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int kv_dim(int il) const { return layers[static_cast<size_t>(il)].n_head_kv * head_dim; }
  std::string summary() const;
};

// Reads and validates hyper-parameters (positive sizes, heads dividing evenly
// in every layer, n_rot even and <= head_dim, per-layer arrays of block_count
// entries). n_vocab is taken from the token embedding when the vocab_size key
// is absent, so callers pass it in.
Result<HParams> read_hparams(const gguf::GgufFile& file, int n_vocab_from_tensors);

}  // namespace tern
