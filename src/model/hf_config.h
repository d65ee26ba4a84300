// model/hf_config.h — a Hugging Face config.json read into the GGUF
// `<arch>.*` keys llama.cpp's convert_hf_to_gguf.py writes for it.
//
//   model_type          GGUF architecture   notes
//   llama               llama               Q/K rows permuted (hf_names.h); rope_type llama3 → rope_freqs
//   mistral             llama               as llama.cpp converts it; a stated sliding_window is kept
//   qwen2               qwen2               q/k/v biases
//   qwen3               qwen3               attn_{q,k}_norm, key_length = head_dim
//   gemma2              gemma2              soft-caps, window (every 2nd layer global)
//   gemma3, gemma3_text gemma3              text_config nesting; rope_local_base_freq → freq_base_swa
//   phi3                phi3                fused qkv / gate_up; LongRoPE long/short factors
//   mixtral             llama               + expert_count / expert_used_count; experts stacked
//   qwen2_moe           qwen2moe            + expert and shared-expert widths; shared expert gate
//   qwen3_moe           qwen3moe            + expert width; q/k norms
// MoE checkpoints hold one 2-D matrix per expert (stacked into GGUF's 3-D
// ffn_*_exps, hf_names.cpp) or transformers 5's fused 3-D experts.gate_up_proj /
// experts.down_proj (split / used as they are).
//
// Values GGUF cannot express for tern (a query_pre_attn_scalar other than the
// one the loader derives, a layer_types list off the window pattern, Qwen2's
// use_sliding_window) are refused with the key named rather than converted into
// a model that computes something else.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"

namespace tern::hf {

struct HfConfig {
  std::string model_type;  // after text_config nesting (gemma3_text for a nested Gemma 3)
  std::string arch;        // GGUF general.architecture
  int n_vocab = 0, n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  // Mixture of experts (0: dense): experts per layer, used per token, one expert's
  // FFN width and the shared expert's (qwen2_moe; 0 when none).
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  bool tie_word_embeddings = false;
  bool permute_qk = false;  // llama / mistral: HF rotate-half rows → GGUF adjacent pairs
  bool norm_plus_one = false;  // Gemma: HF stores w, computes x * (1 + w); GGUF holds 1 + w
  // FP8 checkpoints (quantization_config.quant_method "fp8"): weight_block_size [rows, cols]
  // of block-wise weight_scale tensors; 0 when the config states none.
  bool fp8 = false;
  int fp8_block_rows = 0, fp8_block_cols = 0;
  // Derived tensors (F32), empty when the config has none: rope_freqs (Llama 3.1),
  // LongRoPE long/short factors (Phi-3). [n_rot/2] each.
  std::vector<float> rope_freqs, rope_long, rope_short;
  // general.* and <arch>.* keys in the converter's order (no tokenizer keys, no file_type).
  std::vector<std::pair<std::string, gguf::Value>> metadata;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// The supported model_type values, for messages.
std::string supported_model_types();

// Parses config.json's text. `name`: general.name to write (the directory's name).
Result<HfConfig> parse_hf_config(const std::string& json_text, const std::string& name);
// Reads DIR/config.json.
Result<HfConfig> read_hf_config(const std::string& dir);

}  // namespace tern::hf
