// loadgen/metrics.h — the figures of one run (or of several runs pooled).
//
// Definitions (docs/bench_serve.md has the long form):
//   TTFT  first content chunk - send time
//   e2e   end of the stream - send time
//   TPOT  (e2e - TTFT) / (completion_tokens - 1), for requests with >= 2 tokens
//   ITL   gaps between consecutive content chunks, over all requests
//   completion_tokens / prompt_tokens: the server's usage when it reported
//   them, else counted content chunks / the dataset's count.
//   throughputs: totals over successful requests / duration_s.
//   goodput: successful requests meeting every SLO / duration_s.
//   per core: output tokens/s divided by the cores given (--server-cores, else
//   this machine's); cost per million output tokens = price_per_hour /
//   (output tokens/s * 3600) * 1e6.
// Threading: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/runner.h"
#include "loadgen/stats.h"

namespace tern::loadgen {

struct CostConfig {
  int n_cores = 1;
  std::optional<double> price_per_hour;
};

struct RunMetrics {
  size_t completed = 0, failed = 0, not_sent = 0;
  std::map<std::string, size_t> errors;                // error type -> count
  std::map<std::string, std::string> error_examples;  // error type -> its first message
  double duration_s = 0;
  double request_throughput = 0, input_throughput = 0, output_throughput = 0, goodput = 0;
  size_t total_input_tokens = 0, total_output_tokens = 0;
  size_t n_usage_missing = 0;  // successful requests whose counts were not reported by the server
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
  int n_cores = 1;
  double output_throughput_per_core = 0;
  std::optional<double> cost_per_million_output_tokens;
};

// Output tokens of one successful request (usage, else content chunks).
int completion_tokens_of(const RequestResult& r);
int prompt_tokens_of(const RequestResult& r);

// Metrics of runs pooled: requests of all runs together, durations summed.
RunMetrics compute_metrics(const std::vector<const RunResult*>& runs, const Slo& slo, const CostConfig& cost);
RunMetrics compute_metrics(const RunResult& run, const Slo& slo, const CostConfig& cost);

}  // namespace tern::loadgen
