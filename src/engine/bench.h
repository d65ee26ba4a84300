// engine/bench.h — llama-bench-style throughput measurement of a model:
// prompt processing (pp), single-sequence generation (tg) and batched decode,
// each as mean ± standard deviation over repetitions after a warm-up run.
// Token ids are random (seeded): speed does not depend on the text.
// With depths (llama-bench's -d), pp and tg are measured again after a prompt
// of each depth is already in the cache: decode at depth reads the KV cache as
// well as the weights, which bench reports beside the weights-only figure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace tern {

struct BenchOptions {
  int n_prompt = 512;            // pp tokens (0 skips pp)
  int n_gen = 128;               // tg tokens (0 skips tg)
  std::vector<int> batches;      // batched decode: sequences per step
  int n_batch = 512;             // prompt tokens per forward pass
  int repetitions = 5;
  uint64_t seed = 42;
  // pp and tg after this many cached positions each; empty = {0}, the plain
  // pp/tg. BenchResult::pp/tg hold the first depth's results.
  std::vector<int> depths = {};
  KvType kv_type = KvType::F32;  // the pp/tg cache's element type
};

// Mean and sample standard deviation (0 for fewer than two values).
struct SampleStats {
  double mean = 0, std = 0;
};
SampleStats sample_stats(const std::vector<double>& values);

struct Throughput {
  int tokens = 0;
  double tok_s = 0;      // mean over repetitions
  double std = 0;        // sample standard deviation of tok/s
};

struct BatchedThroughput {
  int batch = 0;
  int steps = 0;
  double tok_s = 0;
  double std = 0;
};

// pp and tg with `depth` positions already cached (tg: steps at depth+1 ...).
struct DepthThroughput {
  int depth = 0;
  Throughput pp, tg;
  double tg_kv_bytes = 0;  // KV bytes one tg token reads, mean over the tg run
};

struct BenchResult {
  Throughput pp, tg;
  std::vector<DepthThroughput> depths;  // one per BenchOptions::depths (or {0}), in order
  std::vector<BatchedThroughput> batched;
  double flops_per_token_pp = 0;  // matmul + attention flops per prompt token (average over the prompt)
  int64_t rss_bytes = 0;          // resident set after pp/tg, with the model mapped and the KV cache live
  int64_t kv_bytes = 0;           // the single-sequence KV cache (BenchOptions::kv_type, pp/tg context)
};

// progress(label): called before each measured phase (for a terminal status line).
Result<BenchResult> run_bench(const Model& model, const BenchOptions& options,
                              const std::function<void(const std::string&)>& progress = {});

// 2 * parameters of all matrices used per token (MoE: the k routed experts), plus attention's 4 * ctx * q_dim per layer.
double model_flops_per_token(const Model& model, double mean_context);

// Keys and values one token at `context` positions (itself included) reads
// in every layer: a sliding-window layer reads at most its window.
double kv_read_bytes_per_token(const Model& model, double context, KvType type);

// A fast 64-bit content hash of a file's bytes (for benchmark records).
Result<uint64_t> hash_file(const std::string& path);

}  // namespace tern
