// Synthetic Llama-family models for tests: random weights, chosen
// hyper-parameters, built as an in-memory GGUF image.
//
// A SyntheticModel is plain data (metadata in insertion order plus named f32
// tensors) so a test can break it before encoding: drop a tensor, change a
// shape, force a tensor type. to_gguf() encodes the matrices in one ggml type
// (1-D tensors — norms and biases — stay F32, as converters write them) and
// parses the image back with GgufFile::from_bytes.
// Weights are deterministic for a given seed on one standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "gguf/value.h"

namespace tern::test {

struct SynthSpec {
  std::string arch = "llama";
  int n_vocab = 100;
  int n_embd = 64;
  int n_layer = 2;
  int n_ff = 96;
  int n_head = 8;
  int n_head_kv = 2;
  int n_ctx_train = 256;
  int key_length = 0;             // 0: key omitted (head_dim = n_embd / n_head)
  int n_rot = 0;                  // 0: rope.dimension_count omitted (= head_dim)
  double freq_base = 0.0;         // 0: rope.freq_base omitted (10000)
  std::string scaling_type;       // "": rope.scaling.* omitted
  double scaling_factor = 0.0;
  int yarn_orig_ctx = 0;          // 0: rope.scaling.original_context_length omitted
  int sliding_window = 0;         // 0: attention.sliding_window omitted
  // Per-layer values, written as arrays of n_layer I32 (as gguf-py writes a
  // list) in place of the scalar above when not empty.
  std::vector<int> layer_n_head_kv;
  std::vector<int> layer_sliding_window;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;          // attn_{q,k,v}.bias present
  bool tied_output = false;       // no output.weight: the classifier reuses token_embd
  // RoPE frequency divisors, [n_rot/2] each when not empty: rope_freqs.weight
  // (Llama 3.1), rope_factors_long/short.weight (Phi-3 LongRoPE).
  std::vector<float> rope_freqs, rope_long, rope_short;
  float attn_factor = 0.0f;       // 0: rope.scaling.attn_factor omitted
  // By architecture, as llama.cpp's converter writes them: qwen3 adds
  // attn_{q,k}_norm.weight ([head_dim]); phi3 fuses attn_qkv ([q; k; v] rows)
  // and ffn_up ([gate; up] rows, no ffn_gate).
  // gemma2 / gemma3 keys, each written only when set (else the architecture's default
  // applies); gemma files also get post_attention_norm / post_ffw_norm, and
  // gemma3 files attn_q_norm / attn_k_norm, in every layer.
  double attn_softcap = 0.0;      // attn_logit_softcapping
  double final_softcap = 0.0;     // final_logit_softcapping
  int window_pattern = 0;         // attention.sliding_window_pattern
  double freq_base_swa = 0.0;     // rope.freq_base_swa
  // Mixture of experts (written when n_expert > 0; qwen2moe / qwen3moe always
  // are MoE): expert_count / expert_used_count, the router ffn_gate_inp
  // ([n_embd, n_expert]), 3-D ffn_{gate,up,down}_exps in place of the dense
  // FFN; qwen2moe adds ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp ([n_embd]).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;    // qwen*moe: written as expert_feed_forward_length (0: omitted); expert rows
  int n_ff_shexp = 0;  // qwen2moe: expert_shared_feed_forward_length (0: omitted, n_ff)
  uint32_t seed = 1;
  // Large enough that q·k/sqrt(head_dim) spreads over several units, so
  // attention is far from uniform and positions (RoPE, windows) matter.
  float weight_std = 0.15f;
  float bias_std = 0.3f;

  bool is_moe() const { return n_expert > 0; }
  // Rows of one expert: llama (Mixtral) n_ff; qwen*moe the key, else n_ff / n_expert_used.
  int expert_rows() const {
    if (arch == "llama") return n_ff;
    return n_ff_exp > 0 ? n_ff_exp : n_ff / n_expert_used;
  }
  int head_dim() const { return key_length > 0 ? key_length : n_embd / n_head; }
  int n_head_kv_of(int il) const { return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[static_cast<size_t>(il)]; }
};

struct SynthTensor {
  std::string name;
  std::vector<uint64_t> dims;             // dims[0] is the contiguous row
  std::vector<float> data;                // [prod(dims)]
  std::optional<gguf::GgmlType> type;     // overrides the encoding type (raw zero bytes if no traits)
};

struct SyntheticModel {
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<SynthTensor> tensors;

  SynthTensor* find_tensor(const std::string& name);
  void remove_tensor(const std::string& name);
  // Adds or replaces a metadata key.
  void set(const std::string& key, gguf::Value value);
};

// Random weights: matrices and embeddings ~ N(0, weight_std), norm weights
// ~ 1 + N(0, 0.1), biases ~ N(0, bias_std).
SyntheticModel make_synthetic(const SynthSpec& spec);

// The GGUF image of `m` with every 2-D tensor encoded as `matrix_type`.
Result<gguf::GgufFile> to_gguf(const SyntheticModel& m, gguf::GgmlType matrix_type = gguf::GgmlType::F32);
// The same image as the bytes of a .gguf file.
Result<std::vector<uint8_t>> to_gguf_bytes(const SyntheticModel& m, gguf::GgmlType matrix_type = gguf::GgmlType::F32);

}  // namespace tern::test
