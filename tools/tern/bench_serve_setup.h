// tools/tern/bench_serve_setup.h — what `tern bench serve`, `tern bench sweep`
// and `tern tune` share: the load generator's flags, checked once into a
// Setup (dataset, arrivals, SLOs, cost), and the runs over it.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "core/status.h"
#include "loadgen/metrics.h"
#include "loadgen/runner.h"

namespace tern::cli {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int kMaxRequests = 1000000;

// The load generator's flags (bench serve, bench sweep, tune).
struct CommonFlags {
  std::string url, model, dataset, tokenizer, api_key, rate_text = "inf";
  int num_requests = 0, max_concurrency = 0, warmup = 0, repeat = 1, output_len = 0, server_cores = 0;
  uint64_t seed = 0;
  float burstiness = 1.0f, slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0, timeout_s = 300, max_duration_s = 3600;
  float price_per_hour = -1;
  bool chat = false, ignore_eos = false;

  void add_to(ArgParser& args);
};

// Everything a run needs, checked and built once from the flags.
struct Setup {
  loadgen::RunConfig run;
  std::vector<loadgen::RequestSpec> measured, warmup;
  loadgen::Slo slo;
  loadgen::CostConfig cost;
  int repeat = 1;
  nlohmann::json config;
};

// Checks the flags and builds the dataset; `who` prefixes every message.
// An empty f.model is asked of the server (GET /v1/models).
Result<Setup> prepare(const CommonFlags& f, const char* who);

// "inf" or a rate > 0; a comma-separated list of them (whole numbers for concurrencies).
Result<double> parse_rate(const std::string& text);
Result<std::vector<double>> parse_values(const std::string& text, bool rates);
nlohmann::json number_or_inf(double v);

// A one-line progress bar on stderr, only when it is a terminal (else empty).
std::function<void(size_t, size_t)> progress_bar(const std::string& what);

void run_warmup(const Setup& s);
// `repeat` measured runs of cfg; arrivals reseeded per repeat.
std::vector<loadgen::RunResult> run_repeats(const Setup& s, loadgen::RunConfig cfg, const std::string& what);
// The runs' requests pooled into one set of figures (and each run's, when per_run is given).
loadgen::RunMetrics pool(const std::vector<loadgen::RunResult>& runs, const Setup& s,
                         std::vector<loadgen::RunMetrics>* per_run);

}  // namespace tern::cli
