// tools/tern/bench_tune.h — `tern bench --tune`: this CPU's tuning record
// (kernels/tuning.h) from measurements on a model.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/bench.h"
#include "gguf/gguf_format.h"
#include "kernels/cpu_features.h"

namespace tern::cli {

struct TuneCandidate {
  size_t act_block_bytes = 0;  // 0: each type's built-in default (no record entry)
  std::vector<double> pp_tok_s;  // one per round
  double mean = 0;
};

struct TuneResult {
  std::string path;  // where the record was written
  kernels::CpuLevel level = kernels::CpuLevel::Scalar;
  std::vector<gguf::GgmlType> types;  // the model's matrix types, now in the record
  std::vector<TuneCandidate> candidates;
  size_t best_bytes = 0;  // 0: the defaults stay (nothing beat them by kMinGain)
};

// A candidate replaces the defaults only when its mean pp beats theirs by this
// much: below it, a shared machine's noise picks the winner.
constexpr double kMinGain = 1.03;

// pp of `base` (its n_prompt, n_batch, repetitions) under the defaults and
// every candidate, `rounds` times interleaved; writes the best (or, when none
// beats the defaults by kMinGain, no entry for the model's types) to
// kernels::tuning_path() atomically and makes it the record in use.
Result<TuneResult> run_bench_tune(const Model& model, const BenchOptions& base, int rounds,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace tern::cli
