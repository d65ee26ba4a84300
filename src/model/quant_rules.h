// model/quant_rules.h — which type each tensor of a model gets under a
// quantization scheme: llama-quantize's rules for the llama family, as a table.
//
// A scheme is a name the user types ("Q4_K_M", "Q8_0", "Q4_K", "F16"). Most
// are llama.cpp file types (LLAMA_FTYPE_*) and follow its mix rules:
//   1. Only matrices are converted: tensors with >= 2 dims whose name ends in
//      "weight", except norms ("_norm.weight"), MoE routers and positional /
//      token-type embeddings. Everything else is copied unchanged.
//   2. Float schemes (F32, F16, BF16) give every such matrix that type.
//   3. Quantized schemes start from the scheme's base type; output.weight (or
//      token_embd.weight when the embeddings are tied) becomes Q6_K (Q8_0 in a
//      Q8_0 file, or when its rows do not divide into the base type's blocks);
//      then the per-scheme upgrades of kMixRules (quant_rules.cpp) apply to
//      attn_v / ffn_down / attn_output by layer; then the 70B attn_v bump;
//      for 8-expert models (Mixtral) attn_v and attn_k become Q8_0 and some
//      schemes' attn_output Q5_K. MoE expert tensors (3-D ffn_*_exps) follow
//      the rules of their 2-D role (ffn_down_exps is an ffn_down).
//   4. Fallback: a row length (dims[0]) that is not a multiple of the chosen
//      type's block size takes the type's 32-element partner (Q2_K, Q3_K ->
//      Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0); when even 32 does not
//      divide the row (or the type already had 32-element blocks), F16.
// Block-type schemes that llama.cpp has no file type for (Q3_K, Q4_K, Q5_K as
// block types) and any scheme made `pure` skip rule 3: every matrix gets the
// base type, subject only to the fallback.
//
// Layers are read from the tensor name ("blk.N."); llama.cpp counts tensors in
// file order, which is the same for files whose layers are in order.
// Everything here is pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_format.h"
#include "gguf/reader.h"

namespace tern {

struct QuantScheme {
  std::string_view name;  // as typed on the command line, upper case
  gguf::GgmlType base;    // the type of most matrices
  uint32_t file_type;     // general.file_type: llama.cpp's LLAMA_FTYPE value
  bool mix;               // apply the llama.cpp mix rules (rule 3); false = pure
};

// Case-insensitive lookup; nullptr for an unknown name.
const QuantScheme* find_quant_scheme(std::string_view name);
// "F32, F16, ..." for usage and error messages.
std::string quant_scheme_names();
// "Q4_0,Q8_0,...": each name looked up; an unknown one is InvalidArgument
// "unknown type 'X' (known: ...)". An empty text gives an empty list.
Result<std::vector<const QuantScheme*>> parse_quant_schemes(std::string_view text);
// The scheme without its mix rules (--pure): every matrix `base`.
QuantScheme pure_scheme(const QuantScheme& scheme);

// What the rules need to know about the model.
struct QuantModelInfo {
  std::string arch;        // general.architecture
  int n_layer = 1;         // <arch>.block_count
  int n_head = 1;          // <arch>.attention.head_count
  int n_head_kv = 1;       // <arch>.attention.head_count_kv (default n_head)
  bool has_output = true;  // false: token_embd.weight doubles as the output matrix
  int n_expert = 0;        // <arch>.expert_count (0: dense); 8 (Mixtral) has rules of its own

  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
  // llama.cpp's LLM_TYPE_70B, the only model size its rules look at.
  bool is_70b() const { return arch == "llama" && n_layer == 80 && n_head != n_head_kv; }
};

// Reads the fields above from a model's metadata and tensor list.
Result<QuantModelInfo> quant_model_info(const gguf::GgufFile& file);

// Whether rule 1 lets this tensor change type at all.
bool is_quantizable(std::string_view name, uint32_t n_dims);

struct TypeChoice {
  gguf::GgmlType type;
  bool fell_back = false;  // rule 4 changed the type
};

// The type tensor `name` (n_dims dims, rows of n_cols elements, stored as
// `current`) is written as under `scheme`.
TypeChoice choose_tensor_type(const QuantScheme& scheme, const QuantModelInfo& model, std::string_view name,
                              uint32_t n_dims, uint64_t n_cols, gguf::GgmlType current);

// Rule 4 on its own: `target` if n_cols divides into its blocks, else the fallback.
gguf::GgmlType fallback_type(gguf::GgmlType target, uint64_t n_cols);

}  // namespace tern
