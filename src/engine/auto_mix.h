// engine/auto_mix.h — `tern quantize --auto`: a mixed-precision model chosen
// by measurement under a size budget.
//
//   1. Every candidate type is written once for the whole model (a pure
//      scheme, under the chosen method: rtn, imatrix or gptq), into a work
//      directory; a tensor's options are the types those files give it
//      (a type whose blocks do not divide its rows takes its rule-4 fallback,
//      quant_rules.h, so options are deduplicated).
//   2. Sensitivity: for each quantizable tensor and each option, the base
//      model with that one tensor replaced (a GgufFile view over the base and
//      candidate mappings, nothing rewritten) is run over the first
//      `n_chunks` perplexity windows of the calibration text, and its mean
//      KL divergence from the base's distributions recorded. The text is the
//      one the calibration file names (checked by size and hash), so choosing
//      never looks at evaluation text.
//   3. The mix: least summed KL with the tensor data within
//      target_bpw x elements / 8 bytes (engine/mix_knapsack.h); tensors that
//      are never quantized (norms, biases) count at their size.
//   4. The chosen tensors are copied byte for byte from the candidate files
//      into OUT, and the mix is run over the same windows: its measured KL
//      beside the predicted sum (the sum assumes the tensors' errors add).
// Cost: one quantization per candidate type, one pass over the windows per
// (tensor, option), each with a model load (the backend prepares its
// weights); disk: one model file per candidate type while it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/quant_rules.h"
#include "model/quantize.h"

namespace tern {

struct AutoMixOptions {
  std::string in_path, out_path;
  std::vector<const QuantScheme*> candidates;  // each made pure; empty: default_auto_candidates(method)
  double target_bpw = 0.0;                     // bits per element of the tensor data, the whole file
  QuantMethod method = QuantMethod::Rtn;       // rtn, imatrix or gptq
  std::string calib_path;                      // names the text and window size; statistics for the method
  std::string calib_text;                      // the text, if it moved since tern calibrate
  int n_chunks = 16;                           // calibration windows per measurement
  double gptq_damp = 0.01;
  uint64_t gptq_memory = 4ull << 30;
  // Candidate files go here; empty: "<out_path>.auto-<pid>", removed afterwards.
  std::string work_dir;
};

struct AutoMixTensor {
  std::string name;
  uint64_t n_elements = 0;
  gguf::GgmlType base_type = gguf::GgmlType::F32;
  std::vector<gguf::GgmlType> types;  // options
  std::vector<uint64_t> bytes;        // [options]
  std::vector<double> kl;             // [options] mean KL with this tensor alone as that type
  int chosen = 0;
};

struct AutoMixReport {
  std::vector<AutoMixTensor> tensors;  // the quantizable tensors, in file order
  uint64_t budget_bytes = 0;           // for the quantizable tensors
  uint64_t fixed_bytes = 0;            // tensors copied unchanged
  double predicted_kl = 0.0;           // sum of the chosen options' KL
  double measured_kl = 0.0;            // the written mix on the same windows
  double measured_top1 = 0.0;
  int n_windows = 0;
  int64_t n_scored = 0;                // tokens scored per pass
  int n_passes = 0;                    // sensitivity passes run
  QuantizeReport written;
};

using AutoMixProgressFn = std::function<void(const std::string& what)>;

Result<AutoMixReport> quantize_auto(const AutoMixOptions& o, ThreadPool& pool, const AutoMixProgressFn& progress = {});

// The default candidates for a method: the types it can write (quantize.h).
std::string default_auto_candidates(QuantMethod method);

}  // namespace tern
