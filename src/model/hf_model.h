// model/hf_model.h — a Hugging Face checkpoint directory (config.json,
// *.safetensors, tokenizer files) as the GGUF model llama.cpp's converter
// would write for it: converted to a file, or opened in place as a GgufFile view.
//
// Both paths share one plan (plan_hf_model): each GGUF tensor with its source
// safetensors tensor and what the converter does to it on the way:
//   None        bytes used as they are (F32, F16, BF16)
//   PermuteQK   llama/mistral q_proj, k_proj (weights and biases): within each
//               head, HF's rotate-half order (first half, second half) becomes
//               GGUF's adjacent pairs — GGUF row h*hd + 2m + j = HF row
//               h*hd + j*hd/2 + m — so the llama rows' Normal RoPE applies
//   AddOne      Gemma norms: HF stores w and computes x * (1 + w); GGUF holds
//               1 + w (F32)
//   Computed    rope_freqs (Llama 3.1), rope_factors_long/short (Phi-3), F32
//   Widen       MoE routers (ffn_gate_inp, ffn_gate_inp_shexp): F32 whatever the
//               checkpoint's dtype, as the converter always writes them
//   Gather      MoE experts: GGUF's 3-D ffn_*_exps rows are runs of `piece_rows`
//               rows taken from several sources in turn — one 2-D matrix per
//               expert stacked, or each expert's half of a fused 3-D gate_up_proj
// FP8 checkpoints (quantization_config.quant_method "fp8"; dense matrices
// F8_E4M3 or F8_E5M2, each with its `weight_scale` or `weight_scale_inv`, a
// multiplier either way): a matrix whose scale is one value or one per row keeps
// its codes (tern's F8 types, docs/quantize.md) and gets a computed
// "<base>.scale" companion [n_rows] (its rows' scales, permuted with them); a
// matrix with block scales (weight_block_size) is decoded to F32, code × its
// block's scale. `input_scale`, `k_scale` and `v_scale` (static activation and
// KV scales for FP8 arithmetic) are not needed: tern computes in f32.
// Every HF tensor must map to a GGUF name (rotary_emb.inv_freq and Gemma 3's
// vision tower and projector, a separate model, are skipped) and every mapped
// tensor must have the shape the config implies; else one error naming it.
//
// The view (open_hf_view) keeps the safetensors mappings alive and points
// untransformed tensors into them — no copy; only the transformed tensors live
// in memory (marked TensorInfo::in_memory). Q/K permutation: the view holds
// permuted copies of wq/wk (and their biases) rather than running llama from
// HF with NeoX pairing, so that the view is exactly the file `convert` writes
// at the checkpoint's dtype — one model path, one set of tests — at the cost
// of the Q and K matrices (about a sixth of a Llama's weights) in memory.
// Conversion (convert_hf_model) streams: each tensor is read from its mapping,
// transformed row by row on the pool and written, so memory stays at one
// tensor's output plus one row per thread whatever the checkpoint's size.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "gguf/safetensors.h"
#include "model/hf_config.h"
#include "model/quantize.h"

namespace tern::hf {

using Metadata = std::vector<std::pair<std::string, gguf::Value>>;

enum class Transform { None, PermuteQK, AddOne, Computed, Gather, Widen };

// Gather: `piece_rows` rows of `source` from row `first_row` on.
struct RowPiece {
  const safetensors::Tensor* source = nullptr;
  int64_t first_row = 0;
};

struct PlannedTensor {
  std::string name;                             // GGUF name
  std::vector<uint64_t> dims;                   // GGUF order: dims[0] is the row length
  const safetensors::Tensor* source = nullptr;  // null for Computed; Gather: the first piece's
  gguf::GgmlType source_type = gguf::GgmlType::F32;
  Transform transform = Transform::None;
  int n_heads = 0;                              // PermuteQK: heads in the rows
  std::vector<float> values;                    // Computed: [prod(dims)]
  std::vector<RowPiece> pieces;                 // Gather: in row order, piece_rows rows each
  int64_t piece_rows = 0;
  // FP8 sources: the checkpoint's scales by source row: none (the codes are the
  // values), 1 (per tensor), one per row, or a grid of scale_block_rows x
  // scale_block_cols blocks ([ceil(rows / br)][ceil(cols / bc)]).
  std::vector<float> scales;
  int64_t scale_block_rows = 0, scale_block_cols = 0;  // 0: not block-wise
  std::string scale_of;                         // a "<base>.scale" companion: the matrix it scales

  uint64_t n_elements() const;
  uint64_t n_rows() const { return n_elements() / dims[0]; }
};

struct HfPlan {
  HfConfig config;
  std::shared_ptr<safetensors::SafetensorsCheckpoint> checkpoint;
  std::vector<PlannedTensor> tensors;  // in the converter's order: token_embd, layers, output_norm, output, extras
};

// True when `path` is a directory holding config.json (what -m accepts besides a GGUF file).
bool is_hf_dir(const std::string& path);

// Reads config.json and the safetensors checkpoint and maps every tensor.
Result<HfPlan> plan_hf_model(const std::string& dir);

// Row `i_row` of a planned tensor as f32 ([dims[0]]), after its transform (and an FP8 source's scales).
void read_planned_row(const PlannedTensor& t, int64_t i_row, float* row);

// The checkpoint row that GGUF row `i_row` of a by-rows tensor (None, PermuteQK) is read from.
int64_t source_row(const PlannedTensor& t, int64_t i_row);

// True for an FP8 matrix stored as its codes with row scales (no block scales).
bool keeps_fp8_codes(const PlannedTensor& t);

// The tokenizer.* keys for DIR (tokenizer.json, tokenizer_config.json,
// generation_config.json; tokenizer/hf_tokenizer.h); none when DIR has no
// tokenizer.json (a weights-only directory still loads as a model).
Result<Metadata> read_tokenizer_metadata(const std::string& dir);

// What -m accepts: an HF directory (is_hf_dir) as its view with its tokenizer
// keys, anything else as a GGUF file. options (--no-mmap) apply to GGUF files;
// a directory given options other than the defaults is refused.
Result<gguf::GgufFile> open_model_file(const std::string& path, const MapOptions& options = {});

// The model as a GgufFile view: the plan's metadata, then `tokenizer` keys.
Result<gguf::GgufFile> open_hf_view(const std::string& dir, Metadata tokenizer);

// Writes the GGUF file `options.out_path` for the directory under `options.scheme`
// (float schemes, block types and llama.cpp mixes, as tern quantize).
Result<QuantizeReport> convert_hf_model(const std::string& dir, const std::string& out_path, const QuantScheme& scheme,
                                        Metadata tokenizer, ThreadPool& pool, const QuantizeProgressFn& progress = {});

}  // namespace tern::hf
