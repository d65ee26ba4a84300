// engine/spec_bench.h — speculative decoding's speed, measured: the same
// greedy requests through an engine without and one with speculation,
// interleaved repetition by repetition (`tern bench --draft`), at each batch
// size. Outputs are compared too: greedy speculation must not change them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tern/engine.h"

namespace tern {

struct SpecBenchOptions {
  int n_gen = 128;              // tokens generated per sequence
  std::vector<int> batches{1};  // sequences decoding at once
  int repetitions = 3;          // measured, after one warm-up
};

struct SpecBenchRow {
  int batch = 0;
  double plain_tok_s = 0, plain_std = 0;  // generated tokens per second over all sequences
  double spec_tok_s = 0, spec_std = 0;
  int64_t proposed = 0, accepted = 0, verifies = 0;  // over the measured repetitions
  double draft_share = 0;       // of the speculative runs' time, spent in the proposer
  bool same_output = true;      // every sequence's tokens equal with and without
};

// `prompts` are cycled over the sequences of a batch.
Result<std::vector<SpecBenchRow>> bench_speculative(const EngineConfig& plain, const EngineConfig& spec,
                                                   const std::vector<std::string>& prompts, const SpecBenchOptions& o,
                                                   const std::function<void(const std::string&)>& status = {});

}  // namespace tern
