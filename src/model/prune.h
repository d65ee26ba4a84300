// model/prune.h — write a copy of a GGUF model with its linear layers pruned
// (quant/prune.h; docs/prune.md).
//
// The matrices pruned are the linear layers inside the blocks: attention
// Q/K/V/output, FFN gate/up/down, MoE experts (each expert a matrix of its
// own) and shared experts, SSM in/out projections. Embeddings, the output
// head, norms, routers and convolutions are copied byte for byte: they are a
// small share of the weights and the most sensitive to losing any.
//
// Pruned tensors keep their type, which must be F32, F16 or BF16 (zeros and
// the kept weights then survive exactly; `tern quantize` afterwards keeps the
// zeros exact in Q8_0, Q5_0 and Q4_0). Metadata is copied, with
// tern.prune.method, tern.prune.sparsity and (with a pattern)
// tern.prune.pattern added. Streamed and atomic as quantize_gguf
// (model/quantize.h): the output appears under its name only when complete.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/quantize.h"
#include "quant/prune.h"

namespace tern {

// Whether a tensor is one of the matrices pruning changes (by its GGUF name and rank).
bool is_prunable(std::string_view name, uint32_t n_dims);

// The prunable tensors of a file in file order: the tensors whose H SparseGPT reads.
std::vector<GptqTensor> prune_plan(const gguf::GgufFile& file);

struct PruneModelOptions {
  std::string in_path;
  std::string out_path;
  quant::PruneOptions prune;
  // Wanda: each matrix's input statistics (sum_x2); SparseGPT: with H for
  // prune_plan()'s tensors. A matrix calibration never ran (an expert no token
  // chose) is pruned by magnitude instead, and counted in the report.
  InputStatsFn inputs = {};
};

struct PrunedTensor {
  std::string name;
  uint64_t n_weights = 0;
  uint64_t n_zero_before = 0;
  uint64_t n_zero_after = 0;
  int n_by_magnitude = 0;  // matrices (experts) that had no calibration statistics
};

struct PruneReport {
  QuantizeReport written;
  std::vector<PrunedTensor> tensors;  // the pruned ones, in file order
  uint64_t n_weights_all = 0;         // elements of every tensor in the file

  uint64_t n_weights_pruned_tensors() const;
  uint64_t n_zero_after() const;
};

Result<PruneReport> prune_gguf(const PruneModelOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress = {});

}  // namespace tern
